"""`kbisect up` runs a dev server and workers; `kbisect down` really stops both."""

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.infra.processes import process_tree, start_time
from kbisect.infra.temporal_server import listening


def _start_up(
    tmp_path: Path, port: int, ui: int, address: str
) -> tuple[dict[str, str], list[str], "subprocess.Popen[bytes]"]:
    env = {
        **os.environ,
        "KBISECT_DATA": str(tmp_path),
        "KBISECT_CACHE": str(tmp_path / "c"),
        "KBISECT_LOCK_DIR": str(tmp_path / "locks"),
        "KBISECT_TEMPORAL_ADDRESS": address,
    }
    cli = [sys.executable, "-m", "kbisect"]
    up = subprocess.Popen(
        [*cli, "up", "--port", str(port), "--ui-port", str(ui)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return env, cli, up


@pytest.mark.server
def test_up_then_down(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    env, cli, up = _start_up(tmp_path, port, ui, f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while not (listening("127.0.0.1", port) and (tmp_path / "service.pid").exists()):
            assert up.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        time.sleep(2)  # workers connected
        status = subprocess.run([*cli, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0 and "no bisection jobs yet" in status.stdout
        assert "warning" not in status.stderr
        # The service started on other code than this kbisect's (an upgrade, an edit of a
        # checkout): a command says so, because the jobs it starts could hang.
        pid_file = tmp_path / "service.pid"
        record = json.loads(pid_file.read_text())
        assert len(record["code"]) == 64
        pid_file.write_text(json.dumps({**record, "code": "0" * 64}))
        status = subprocess.run([*cli, "status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0 and "no bisection jobs yet" in status.stdout
        assert f"service (pid {up.pid}) started before kbisect's code changed" in status.stderr
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=90)
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=30) == 0
        assert not listening("127.0.0.1", port) and not (tmp_path / "service.pid").exists()
    finally:
        if up.poll() is None:
            up.kill()


@pytest.mark.server
def test_sigterm_stops_the_server_and_its_dev_server(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    env = {**os.environ, "KBISECT_DATA": str(tmp_path)}
    server = subprocess.Popen(
        [sys.executable, "-m", "kbisect", "server", "--port", str(port), "--ui-port", str(ui)],
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


@pytest.mark.server
def test_a_killed_up_takes_its_dev_server_along(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    env, cli, up = _start_up(tmp_path, port, ui, f"127.0.0.1:{port}")
    helpers: dict[int, int | None] = {}
    try:
        deadline = time.monotonic() + 60
        while not (listening("127.0.0.1", ui) and (tmp_path / "service.pid").exists()):
            assert up.poll() is None and time.monotonic() < deadline
            time.sleep(0.3)
        helpers = {pid: start_time(pid) for pid in process_tree(up.pid) if pid != up.pid}
        assert helpers, "kbisect up runs no dev server"
        up.kill()  # SIGKILL: no handler of its own runs
        up.wait()
        # `down` right away says it had stopped; `up` right away starts cleanly.
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True)
        assert down.returncode == 0 and "already stopped" in down.stdout, down.stdout
        env, cli, up = _start_up(tmp_path, port, ui, f"127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(start_time(p) == t for p, t in helpers.items()):
            time.sleep(0.3)
        left = [p for p, t in helpers.items() if start_time(p) == t]
        assert not left, f"the dev server (pids {left}) outlived a SIGKILLed kbisect up"
        deadline = time.monotonic() + 60
        while not (listening("127.0.0.1", ui) and (tmp_path / "service.pid").exists()):
            assert up.poll() is None, up.stderr.read().decode() if up.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.3)
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=90)
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=30) == 0
    finally:
        if up.poll() is None:
            up.kill()
        for pid, start in helpers.items():  # only the very processes this test started
            if start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


def _listening(pids: list[int]) -> set[str]:
    """host:port of every TCP socket these processes listen on (from /proc)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            host_hex, port_hex = cols[1].split(":")
            raw = bytes.fromhex(host_hex)
            if width == 8:
                host = ".".join(str(b) for b in reversed(raw))
            else:  # four little-endian 32-bit words
                words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
                host = socket.inet_ntop(socket.AF_INET6, b"".join(words))
            found.add(f"{host}:{int(port_hex, 16)}")
    return found


async def _pollers(address: str, queue: str) -> int:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.client import Client

    client = await Client.connect(address)
    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace="default",
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(resp.pollers)


@pytest.mark.server
def test_up_port_is_where_its_workers_connect_and_all_of_it_is_on_loopback(
    tmp_path: Path,
) -> None:
    port, ui, elsewhere = free_port(), free_port(), free_port()
    # KBISECT_TEMPORAL_ADDRESS is not where `up --port` puts the server: its workers must
    # not go there.
    env, cli, up = _start_up(tmp_path, port, ui, f"127.0.0.1:{elsewhere}")
    try:
        deadline = time.monotonic() + 60
        address = f"127.0.0.1:{port}"
        while not (listening("127.0.0.1", port) and asyncio.run(_pollers(address, "kbisect"))):
            assert up.poll() is None, up.stderr.read().decode() if up.stderr else ""
            assert time.monotonic() < deadline, "no worker polls the server that up started"
            time.sleep(0.5)
        # Nothing that can start a job listens beyond this machine: gRPC, the Web UI, the
        # HTTP API and the metrics port of the dev server are all on 127.0.0.1.
        addresses = _listening(process_tree(up.pid))
        assert f"127.0.0.1:{port}" in addresses and f"127.0.0.1:{ui}" in addresses
        assert all(a.startswith("127.0.0.1:") for a in addresses), addresses
        # The pid file says which process it is, not only its number.
        record = json.loads((tmp_path / "service.pid").read_text())
        assert record["pid"] == up.pid
        stat = Path(f"/proc/{up.pid}/stat").read_text()
        assert record["start_time"] == int(stat.rsplit(")", 1)[1].split()[19])
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=90)
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=30) == 0
    finally:
        if up.poll() is None:
            up.kill()


@pytest.mark.parametrize("form", ["bare pid", "other start time", "other boot"])
def test_down_never_signals_a_reused_pid(tmp_path: Path, form: str) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        stat = Path(f"/proc/{sleeper.pid}/stat").read_text()
        start = int(stat.rsplit(")", 1)[1].split()[19])
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        record: object = {
            "bare pid": sleeper.pid,
            "other start time": {"pid": sleeper.pid, "start_time": start - 1, "boot_id": boot},
            "other boot": {"pid": sleeper.pid, "start_time": start, "boot_id": "x" + boot[1:]},
        }[form]
        (tmp_path / "service.pid").write_text(json.dumps(record))
        env = {**os.environ, "KBISECT_DATA": str(tmp_path)}
        down = subprocess.run(
            [sys.executable, "-m", "kbisect", "down"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert down.returncode == 0, down.stderr
        assert "not the kbisect service" in down.stdout + down.stderr
        assert sleeper.poll() is None  # still alive: never signalled
        assert not (tmp_path / "service.pid").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.server
def test_a_job_command_starts_the_local_service_unless_told_not_to(tmp_path: Path) -> None:
    # After a reboot or 'kbisect down', 'kbisect status' (or watch, report, ...) brings the
    # embedded service back in the background; --no-start says what to do instead.
    port, ui = free_port(), free_port()
    env = {
        **os.environ,
        "KBISECT_DATA": str(tmp_path),
        "KBISECT_CACHE": str(tmp_path / "c"),
        "KBISECT_LOCK_DIR": str(tmp_path / "locks"),
        "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "KBISECT_TEMPORAL_UI": f"http://127.0.0.1:{ui}",
    }
    cli = [sys.executable, "-m", "kbisect"]
    # Logs grown large over many runs: starting the service sets them aside (sparse files:
    # no disk used).
    big = 64 << 20
    for name in ("service.log", "temporal-server.log"):
        with open(tmp_path / name, "wb") as f:
            f.truncate(big)
    refused = subprocess.run(
        [*cli, "status", "--no-start"], env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "no Temporal server" in refused.stderr
    assert not listening("127.0.0.1", port)
    try:
        status = subprocess.run(
            [*cli, "status"], env=env, capture_output=True, text=True, timeout=150
        )
        assert status.returncode == 0, status.stderr
        assert "no bisection jobs yet" in status.stdout
        assert "started the local kbisect service" in status.stderr
        assert listening("127.0.0.1", port) and listening("127.0.0.1", ui)
        for name in ("service.log", "temporal-server.log"):
            rotated = tmp_path / f"{name}.1"
            assert rotated.exists() and rotated.stat().st_size == big, f"{name} not rotated"
            assert (tmp_path / name).stat().st_size < big
    finally:
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=90)
    assert down.returncode == 0, down.stderr
    assert not listening("127.0.0.1", port)
