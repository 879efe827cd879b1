"""The service on this machine: server, worker, up, down; and starting it on demand."""

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from kbisect.cli.output import note, out
from kbisect.client import JobClient
from kbisect.errors import InfraError, UserError
from kbisect.infra import host_lock
from kbisect.settings import MACHINES, Endpoint, Queues, Settings

LOOPBACK = "127.0.0.1"  # the dev server has no authentication: it never listens beyond


# --- which process the pid file names --------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ServiceProcess:
    """A process named so that a reused pid is not taken for it: its pid, its start time
    (/proc/PID/stat field 22, clock ticks after boot) and the boot it started in."""

    pid: int
    start_time: int | None  # None: a pid file written by an older kbisect (pid only)
    boot_id: str = ""

    @classmethod
    def current(cls, pid: int) -> "ServiceProcess | None":
        """The live process with this pid (not a zombie), or None."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        # The command name (field 2) may hold spaces and parentheses: split after it.
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):  # exited, not yet reaped by its parent
            return None
        return cls(pid, int(fields[19]), _boot_id())

    @classmethod
    def parse(cls, text: str) -> "ServiceProcess | None":
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, int):
            return cls(data, None)
        if isinstance(data, dict) and isinstance(data.get("pid"), int):
            start = data.get("start_time")
            return cls(
                data["pid"], start if isinstance(start, int) else -1, str(data.get("boot_id"))
            )
        return None

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "start_time": self.start_time, "boot_id": self.boot_id})

    def is_running(self) -> bool:
        """This very process runs still (not another one that got its pid)."""
        now = ServiceProcess.current(self.pid)
        if now is None:
            return False
        if self.start_time is None:  # an old pid file: trust only a kbisect command line
            try:
                argv = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                return False
            return any(b"kbisect" in a for a in argv) and b"up" in argv
        return now == self


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pidfile(settings: Settings) -> Path:
    return settings.data_dir() / "service.pid"


def _recorded(settings: Settings) -> ServiceProcess | None:
    try:
        return ServiceProcess.parse(_pidfile(settings).read_text())
    except FileNotFoundError:
        return None


def _record(settings: Settings) -> ServiceProcess:
    me = ServiceProcess.current(os.getpid())
    assert me is not None
    tmp = _pidfile(settings).with_suffix(".tmp")
    tmp.write_text(me.to_json())
    tmp.replace(_pidfile(settings))
    return me


def _forget(settings: Settings, me: ServiceProcess) -> None:
    if _recorded(settings) == me:  # not a pid file another `up` wrote since
        _pidfile(settings).unlink(missing_ok=True)


# --- ports ---------------------------------------------------------------------------
def _port(args: argparse.Namespace, settings: Settings) -> int:
    """--port, else the configured address's port when that is this machine."""
    if args.port is not None:
        return int(args.port)
    return settings.endpoint.port if settings.endpoint.local else Endpoint().port


def _ui_port(args: argparse.Namespace, settings: Settings, port: int) -> int:
    """--ui-port, else the configured Web UI's port when that is this machine (so job
    links point at it), else the gRPC port + 1000 as Temporal does."""
    if args.ui_port is not None:
        return int(args.ui_port)
    ui = urlsplit(settings.endpoint.ui)
    if ui.hostname in ("127.0.0.1", "localhost") and ui.port and port == settings.endpoint.port:
        return ui.port
    return port + 1000


def _check_port(name: str, port: int) -> None:
    if not 0 < port < 65536:
        raise UserError(f"{name} {port}: give a TCP port, 1 to 65535")


def _local(settings: Settings, port: int, ui_port: int) -> Settings:
    """The settings with the endpoint of a dev server on this machine."""
    endpoint = Endpoint(
        address=f"{LOOPBACK}:{port}",
        namespace=settings.endpoint.namespace,
        ui=f"http://{LOOPBACK}:{ui_port}",
    )
    return dataclasses.replace(settings, endpoint=endpoint)


# --- commands ------------------------------------------------------------------------
def cmd_server(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.infra import temporal_server

    port = _port(args, settings)
    ui_port = _ui_port(args, settings, port)
    _check_port("--port", port)
    _check_port("--ui-port", ui_port)
    # Until the dev server is up, a SIGTERM interrupts the wait (and start() kills it).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        proc = temporal_server.start(port=port, ui_port=ui_port)
    except KeyboardInterrupt:
        return 0
    note(f"Temporal dev server on {LOOPBACK}:{port}, Web UI http://{LOOPBACK}:{ui_port}")

    def stop(*_: object) -> None:  # Ctrl-C or SIGTERM: take the dev server down too
        proc.terminate()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    code = proc.wait()
    return 0 if code in (0, -signal.SIGTERM) else code


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    asyncio.run(_workers(args, settings))
    return 0


def _queues(args: argparse.Namespace, settings: Settings) -> Queues:
    q = settings.queues
    return Queues(
        control=args.control_queue or q.control,
        build=args.build_queue or q.build,
        vm=args.vm_queue or q.vm,
    )


async def _workers(args: argparse.Namespace, settings: Settings) -> None:
    """Run until SIGINT or SIGTERM, then shut the workers down cleanly."""
    from kbisect.workers.worker import make_workers, run_workers

    if args.builds < 0 or args.vms < 0:
        raise UserError("--builds and --vms take a number, 0 or more")
    queues = _queues(args, settings)
    if args.libvirt_uri:
        settings = dataclasses.replace(settings, libvirt_uri=args.libvirt_uri)
    machine = args.machine or settings.machine
    if args.vms > 0:
        from kbisect.infra.machines import check_machine

        for text in check_machine(machine, settings):
            note(text)
    client = await JobClient.connect(settings)
    workers = make_workers(
        client.temporal,
        queues,
        args.builds,
        args.vms,
        workflows=not args.no_workflows,
        settings=settings,
        measure_cpus=host_lock.parse_cpus(args.measure_cpus) if args.measure_cpus else (),
        machine=machine,
    )
    if not workers:
        raise UserError("nothing to run: give --builds or --vms, or drop --no-workflows")
    note(
        f"workers on {settings.endpoint.address}: workflows on "
        f"{queues.control if not args.no_workflows else '-'}, "
        f"{args.builds} build(s) on {queues.build}, {args.vms} VM(s) on {queues.vm}"
        f"{_machine_note(machine, settings) if args.vms > 0 else ''}"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    running = asyncio.create_task(run_workers(workers))
    await asyncio.wait(
        [running, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    # An activity cut short here is retried by Temporal on another (or the next) worker.
    await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
    running.cancel()


def _machine_note(machine: str, settings: Settings) -> str:
    return f" (libvirt at {settings.libvirt_uri})" if machine == "libvirt" else f" ({machine})"


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    """Server and workers together, for one machine; SIGTERM (kbisect down) stops both."""
    from kbisect.infra import temporal_server

    port = _port(args, settings)
    ui_port = _ui_port(args, settings, port)
    _check_port("--port", port)
    _check_port("--ui-port", ui_port)
    running = _recorded(settings)
    if running is not None and running.is_running():
        raise UserError(
            f"a kbisect service runs already (pid {running.pid}): stop it with 'kbisect down'"
        )
    local = _local(settings, port, ui_port)
    # Until the workers take the signals over, SIGTERM (kbisect down) interrupts as Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        proc = temporal_server.start(port=port, ui_port=ui_port)
    except KeyboardInterrupt:
        return 0
    me = _record(settings)
    note(
        f"kbisect service up on {local.endpoint.address}: Web UI {local.endpoint.ui} (pid {me.pid})"
    )
    try:
        asyncio.run(_workers(args, local))
    except KeyboardInterrupt:
        pass
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        _forget(settings, me)
    return 0


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    pidfile = _pidfile(settings)
    recorded = _recorded(settings)
    if recorded is None:
        if pidfile.exists():
            pidfile.unlink()
            out(f"{pidfile} was unreadable: removed it; no service was signalled")
        else:
            out("no kbisect service started by 'kbisect up' is running")
        return 0
    if ServiceProcess.current(recorded.pid) is None:
        pidfile.unlink(missing_ok=True)
        out("the service had already stopped")
        return 0
    if not _signal(recorded):
        pidfile.unlink(missing_ok=True)
        out(
            f"pid {recorded.pid} in {pidfile} is not the kbisect service (it stopped and the "
            "pid was reused): removed the stale pid file, signalled nothing"
        )
        return 0
    # It removes the pid file once its dev server has stopped too.
    deadline = time.monotonic() + 60
    while _recorded(settings) == recorded and recorded.is_running():
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if _recorded(settings) == recorded and recorded.is_running():
        raise InfraError(
            f"the service (pid {recorded.pid}) did not stop within 60 s: kill {recorded.pid}"
        )
    pidfile.unlink(missing_ok=True)
    out(f"stopped the kbisect service (pid {recorded.pid})")
    return 0


def _signal(service: ServiceProcess) -> bool:
    """SIGTERM to the service if that pid is still it; False (and no signal) if not. A
    pidfd pins the process between the check and the signal."""
    try:
        fd = os.pidfd_open(service.pid)
    except ProcessLookupError:
        return False
    try:
        if not service.is_running():
            return False
        signal.pidfd_send_signal(fd, signal.SIGTERM)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def ensure_local_service(settings: Settings, parallel: int = 1) -> bool:
    """With a local address and nothing there, start `kbisect up` in the background (with
    room for `parallel` builds and VMs at once). True if it was started here."""
    from kbisect.infra import temporal_server

    endpoint = settings.endpoint
    if endpoint.host not in ("127.0.0.1", "localhost"):
        return False
    if temporal_server.listening(endpoint.host, endpoint.port):
        return False
    port = endpoint.port
    ui = urlsplit(endpoint.ui)
    ui_port = ui.port if ui.hostname in ("127.0.0.1", "localhost") and ui.port else port + 1000
    log = settings.data_dir() / "service.log"
    temporal_server.rotate_log(log)
    with open(log, "ab") as log_file:
        subprocess.Popen(
            [
                *(sys.executable, "-m", "kbisect.cli", "up"),
                *("--port", str(port), "--ui-port", str(ui_port)),
                *("--builds", str(parallel), "--vms", str(parallel)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
        )
    note(
        f"started the local kbisect service in the background (log {log}; "
        "stop it with 'kbisect down')"
    )
    deadline = time.monotonic() + 90
    while not temporal_server.listening(endpoint.host, port):
        if time.monotonic() > deadline:
            raise InfraError(f"the local service did not come up in 90 s: see {log}")
        time.sleep(0.5)
    asyncio.run(_search_attributes_ready(settings, deadline))
    return True


async def _search_attributes_ready(settings: Settings, deadline: float) -> None:
    """The dev server registers our search attributes a moment after it starts listening."""
    client = await JobClient.connect(settings)
    while not await client.has_search_attributes():
        if time.monotonic() > deadline:
            return  # jobs still run, without the search attributes
        await asyncio.sleep(0.5)


# --- the parser ----------------------------------------------------------------------
def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("server", help="run the Temporal dev server (on 127.0.0.1 only)")
    _ports(s)
    s.set_defaults(func=cmd_server)

    for name, helptext in (
        ("worker", "run workers for the service at KBISECT_TEMPORAL_ADDRESS"),
        ("up", "run a dev server and workers together on this machine"),
    ):
        w = sub.add_parser(name, help=helptext)
        w.add_argument("--builds", type=int, default=1, help="kernel builds at once (0: none)")
        w.add_argument("--vms", type=int, default=1, help="VMs at once (0: none)")
        w.add_argument("--no-workflows", action="store_true", help="activities only")
        w.add_argument(
            "--measure-cpus",
            metavar="LIST",
            help="CPUs reserved for guests, e.g. 1 or 2-3; builds keep to the others. Without "
            "it a host takes one timed guest at a time, with no build or other guest beside "
            "it; with it, one per reserved set (give every worker on the host the same set)",
        )
        w.add_argument(
            "--machine",
            choices=MACHINES,
            help="how guests run: qemu (QEMU started directly, the default) or libvirt (a "
            "transient libvirt domain per boot, seen by virsh; for hosts whose VMs libvirt "
            "manages) (KBISECT_MACHINE)",
        )
        w.add_argument(
            "--libvirt-uri",
            metavar="URI",
            help="the libvirt daemon for --machine libvirt (KBISECT_LIBVIRT_URI; default "
            "qemu:///session: the user's own daemon, started on demand; as root, the "
            "system daemon)",
        )
        w.add_argument("--control-queue", help="the workflows' task queue (KBISECT_CONTROL_QUEUE)")
        w.add_argument("--build-queue", help="the builds' task queue (KBISECT_BUILD_QUEUE)")
        w.add_argument("--vm-queue", help="the VM runs' task queue (KBISECT_VM_QUEUE)")
        if name == "up":
            _ports(w)
        w.set_defaults(func=cmd_worker if name == "worker" else cmd_up)

    sub.add_parser("down", help="stop the service started by 'kbisect up'").set_defaults(
        func=cmd_down
    )


def _ports(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port",
        type=int,
        help="gRPC port on 127.0.0.1 (default: the port of KBISECT_TEMPORAL_ADDRESS, 7233)",
    )
    p.add_argument(
        "--ui-port",
        type=int,
        help="Web UI port on 127.0.0.1 (default: that of KBISECT_TEMPORAL_UI, 8233)",
    )
