"""The local service's process: the pid file that names it (so a reused pid is never taken
for it), the settings of a dev server on this machine, its start in the background when a
job command finds none, and the signal that stops it. `kbisect up` and `down` drive it."""

import asyncio
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from kbisect.errors import InfraError
from kbisect.infra.processes import boot_id, start_time
from kbisect.jobs.client import JobClient
from kbisect.settings import Endpoint, Settings

LOOPBACK = "127.0.0.1"  # the dev server has no authentication: it never listens beyond


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
        started = start_time(pid)
        return None if started is None else cls(pid, started, boot_id())

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

    def to_json(self, code: str = "") -> str:
        """The pid file's text; `code`: the code_digest() the service started on."""
        fields = {"pid": self.pid, "start_time": self.start_time, "boot_id": self.boot_id}
        return json.dumps({**fields, "code": code} if code else fields)

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


def pidfile(settings: Settings) -> Path:
    return settings.data_dir() / "service.pid"


def recorded(settings: Settings) -> ServiceProcess | None:
    try:
        return ServiceProcess.parse(pidfile(settings).read_text())
    except FileNotFoundError:
        return None


def _code_in(text: str) -> str:
    """The code_digest() a pid file's text records ("": none, an older kbisect's)."""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, str) else ""


def code_digest() -> str:
    """kbisect's code as it is now: the names, sizes and change times of its Python files
    (the package and the folders it links in), hashed. A worker imports its workflow
    code once; a workflow started after the files changed re-imports part of it in the
    sandbox, against the old rest, and its tasks fail without a word to the user."""
    import kbisect

    digest = hashlib.sha256()
    root = Path(kbisect.__file__).parent
    for folder, dirs, files in sorted(os.walk(root, followlinks=True)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = Path(folder, name)
            st = path.stat()
            digest.update(f"{path.relative_to(root)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def stale_service(settings: Settings) -> ServiceProcess | None:
    """The local service, running still, if kbisect's code changed after it started."""
    try:
        text = pidfile(settings).read_text()
    except FileNotFoundError:
        return None
    running, code = ServiceProcess.parse(text), _code_in(text)
    if running is None or not code or not running.is_running():
        return None
    return running if code != code_digest() else None


def record(settings: Settings) -> ServiceProcess:
    me = ServiceProcess.current(os.getpid())
    assert me is not None
    tmp = pidfile(settings).with_suffix(".tmp")
    tmp.write_text(me.to_json(code_digest()))
    tmp.replace(pidfile(settings))
    return me


def forget(settings: Settings, me: ServiceProcess) -> None:
    if recorded(settings) == me:  # not a pid file another `up` wrote since
        pidfile(settings).unlink(missing_ok=True)


def local_settings(settings: Settings, port: int, ui_port: int) -> Settings:
    """The settings with the endpoint of a dev server on this machine."""
    endpoint = Endpoint(
        address=f"{LOOPBACK}:{port}",
        namespace=settings.endpoint.namespace,
        ui=f"http://{LOOPBACK}:{ui_port}",
    )
    return dataclasses.replace(settings, endpoint=endpoint)


def signal_service(service: ServiceProcess) -> bool:
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


def ensure_local_service(settings: Settings, parallel: int = 1) -> Path | None:
    """With a local address and nothing there, start `kbisect up` in the background (with
    room for `parallel` builds and VMs at once): its log, or None if none was started."""
    from kbisect.infra import temporal_server

    endpoint = settings.endpoint
    if endpoint.host not in ("127.0.0.1", "localhost") or endpoint.secured:
        return None  # a secured service is never replaced by a plaintext one
    if temporal_server.listening(endpoint.host, endpoint.port):
        return None
    port = endpoint.port
    ui = urlsplit(endpoint.ui)
    ui_port = ui.port if ui.hostname in ("127.0.0.1", "localhost") and ui.port else port + 1000
    log = settings.data_dir() / "service.log"
    temporal_server.rotate_log(log)
    with open(log, "ab") as log_file:
        subprocess.Popen(
            [
                *(sys.executable, "-m", "kbisect", "up"),
                *("--port", str(port), "--ui-port", str(ui_port)),
                *("--builds", str(parallel), "--vms", str(parallel)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
        )
    deadline = time.monotonic() + 90
    while not temporal_server.listening(endpoint.host, port):
        if time.monotonic() > deadline:
            raise InfraError(f"the local service did not come up in 90 s: see {log}")
        time.sleep(0.5)
    asyncio.run(_search_attributes_ready(settings, deadline))
    return log


async def _search_attributes_ready(settings: Settings, deadline: float) -> None:
    """The dev server answers a moment after it starts listening (a connection refused
    before: CI saw one), and registers our search attributes a moment after that."""
    client = None
    while time.monotonic() <= deadline:
        try:
            client = client or await JobClient.connect(settings)
        except InfraError:
            pass  # listening, not answering yet
        if client is not None and await client.has_search_attributes():
            return
        await asyncio.sleep(0.5)
    # at the deadline jobs still run, without the search attributes (or the command says
    # there is no server, as it would have)
