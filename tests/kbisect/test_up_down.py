"""`kbisect up` runs a dev server and workers; `kbisect down` really stops both."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from kbisect.infra.temporal_server import listening


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_up_then_down(tmp_path: Path) -> None:
    port, ui = _free_port(), _free_port()
    env = {
        **os.environ,
        "KBISECT_DATA": str(tmp_path),
        "KBISECT_CACHE": str(tmp_path / "c"),
        "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
    }
    cli = [sys.executable, "-m", "kbisect.cli"]
    up = subprocess.Popen(
        [*cli, "up", "--port", str(port), "--ui-port", str(ui)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (listening("127.0.0.1", port) and (tmp_path / "service.pid").exists()):
            assert up.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        time.sleep(2)  # workers connected
        status = subprocess.run([*cli, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0 and "no bisection jobs yet" in status.stdout
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=90)
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=30) == 0
        assert not listening("127.0.0.1", port) and not (tmp_path / "service.pid").exists()
    finally:
        if up.poll() is None:
            up.kill()


def test_sigterm_stops_the_server_and_its_dev_server(tmp_path: Path) -> None:
    port, ui = _free_port(), _free_port()
    env = {**os.environ, "KBISECT_DATA": str(tmp_path)}
    server = subprocess.Popen(
        [sys.executable, "-m", "kbisect.cli", "server", "--port", str(port), "--ui-port", str(ui)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not listening("127.0.0.1", port):
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        # The dev server went with it, not left behind as an orphan.
        assert not listening("127.0.0.1", port)
    finally:
        if server.poll() is None:
            server.kill()
