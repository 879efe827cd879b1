"""The service on this machine: server, worker, up, down; and starting it on demand."""

import argparse
import asyncio
import dataclasses
import signal
import time
from urllib.parse import urlsplit

from kbisect.cli.output import note, out
from kbisect.contract import RESULTS_APP
from kbisect.errors import InfraError, UserError
from kbisect.infra import host_lock
from kbisect.infra.logs import service_logging
from kbisect.infra.processes import stop
from kbisect.jobs.client import JobClient
from kbisect.jobs.service import (
    LOOPBACK,
    ServiceProcess,
    forget,
    local_settings,
    pidfile,
    record,
    recorded,
    signal_service,
)
from kbisect.settings import MACHINES, Endpoint, Queues, Settings


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
        proc = temporal_server.start(port=port, ui_port=ui_port, mount=RESULTS_APP)
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
    service_logging()
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
    running = asyncio.create_task(run_workers(workers, settings))
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
    running = recorded(settings)
    if running is not None and running.is_running():
        raise UserError(
            f"a kbisect service runs already (pid {running.pid}): stop it with 'kbisect down'"
        )
    local = local_settings(settings, port, ui_port)
    service_logging()
    # Until the workers take the signals over, SIGTERM (kbisect down) interrupts as Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        proc = temporal_server.start(port=port, ui_port=ui_port, mount=RESULTS_APP)
    except KeyboardInterrupt:
        return 0
    me = record(settings)
    note(
        f"kbisect service up on {local.endpoint.address}: Web UI {local.endpoint.ui} (pid {me.pid})"
    )
    try:
        asyncio.run(_workers(args, local))
    except KeyboardInterrupt:
        pass
    finally:
        stop(proc)
        forget(settings, me)
    return 0


def cmd_down(args: argparse.Namespace, settings: Settings) -> int:
    path = pidfile(settings)
    was = recorded(settings)
    if was is None:
        if path.exists():
            path.unlink()
            out(f"{path} was unreadable: removed it; no service was signalled")
        else:
            out("no kbisect service started by 'kbisect up' is running")
        return 0
    if ServiceProcess.current(was.pid) is None:
        path.unlink(missing_ok=True)
        out("the service had already stopped")
        return 0
    if not signal_service(was):
        path.unlink(missing_ok=True)
        out(
            f"pid {was.pid} in {path} is not the kbisect service (it stopped and the "
            "pid was reused): removed the stale pid file, signalled nothing"
        )
        return 0
    # It removes the pid file once its dev server has stopped too.
    deadline = time.monotonic() + 60
    while recorded(settings) == was and was.is_running():
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if recorded(settings) == was and was.is_running():
        raise InfraError(f"the service (pid {was.pid}) did not stop within 60 s: kill {was.pid}")
    path.unlink(missing_ok=True)
    out(f"stopped the kbisect service (pid {was.pid})")
    return 0


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
