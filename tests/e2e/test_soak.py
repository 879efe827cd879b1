"""Load and faults: 20 jobs submitted at once to one service, run by real worker
processes (the real workflow; fake builds and boots, tests/e2e/soak_worker.py) on a real
dev server. During the run a VM worker and the build worker are SIGKILLed and the server
is restarted on its database. Every job ends with its own right answer, once; no process's
memory grows without bound."""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from benchmarks.nginx import free_port
from kbisect.infra import temporal_server
from kbisect.workflows.bisect_types import BisectRequest, BisectResult
from kbisect.workflows.bisect_workflow import BisectWorkflow
from tests.e2e.soak_worker import truth

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("whole_host")]
JOBS = 20
PEAK_MIB = 600  # a worker's or the server's most resident memory over the run


def _worker(address: str, role: str, queue: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.soak_worker", address, role, queue],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _peak_mib(pid: int) -> float:
    """VmHWM: the most resident memory the process has had (while it lives)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def _tree_peak_mib(pid: int) -> float:
    """The largest VmHWM in a process tree (the dev server under its supervisor)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return max([_peak_mib(pid), *(_tree_peak_mib(int(c)) for c in children)])


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


async def _running(client: Client, prefix: str) -> int:
    query = f"WorkflowId STARTS_WITH '{prefix}' AND ExecutionStatus = 'Running'"
    return len([w async for w in client.list_workflows(query)])


async def _ended(client: Client, prefix: str, deadline: float) -> dict[str, BisectResult]:
    """Every job's result, once all have ended; fails at the deadline."""
    while True:
        try:
            seen = [w async for w in client.list_workflows(f"WorkflowId STARTS_WITH '{prefix}'")]
        except Exception:  # the server is restarting
            seen = []
        if len(seen) >= JOBS and all(w.status != WorkflowExecutionStatus.RUNNING for w in seen):
            break
        assert time.monotonic() < deadline, f"{len(seen)} jobs seen, not all ended"
        await asyncio.sleep(1)
    assert sorted(w.id for w in seen) == sorted(f"{prefix}{i}" for i in range(JOBS))
    results = {}
    for w in seen:
        assert w.status == WorkflowExecutionStatus.COMPLETED, (w.id, w.status)
        results[w.id] = await client.get_workflow_handle_for(BisectWorkflow.run, w.id).result()
    return results


def test_twenty_jobs_at_once_through_killed_workers_and_a_restarted_server(
    tmp_path: Path,
) -> None:
    port, ui_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    db, log = tmp_path / "temporal.db", tmp_path / "temporal.log"
    server = temporal_server.start(port=port, ui_port=ui_port, db=db, log=log)
    tag = uuid.uuid4().hex[:6]
    queues = {role: f"soak-{role}-{tag}" for role in ("control", "build", "vm")}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    peaks: dict[str, float] = {}

    def start(name: str, role: str) -> None:
        procs[name] = _worker(address, role, queues[role], tmp_path / f"{name}.log")

    async def run() -> dict[str, BisectResult]:
        client = await Client.connect(address)
        prefix = f"soak-{tag}-"
        for i in range(JOBS):  # all submitted at once, before any worker has room
            req = BisectRequest(
                repo=f"soak-{i}",
                good=["root"],
                bad="tip",
                testcase="nvme-snapshot-read",
                build_queue=queues["build"],
                vm_queue=queues["vm"],
                parallel=1 + i % 3,
            )
            await client.start_workflow(
                BisectWorkflow.run, req, id=f"{prefix}{i}", task_queue=queues["control"]
            )
        await asyncio.sleep(8)
        assert await _running(client, prefix) > JOBS // 2  # the faults hit a busy service
        peaks["vm-a"] = _peak_mib(procs["vm-a"].pid)
        _kill(procs["vm-a"])  # a VM host lost mid-run: vm-b takes its boots
        peaks["build"] = _peak_mib(procs["build"].pid)
        _kill(procs["build"])  # the only build host: a new one starts
        await asyncio.sleep(2)
        start("build-2", "build")
        await asyncio.sleep(5)
        assert await _running(client, prefix) > 0
        nonlocal server
        peaks["server"] = _tree_peak_mib(server.pid)
        server.terminate()  # the server stops and starts again on its database
        server.wait(timeout=30)
        server = temporal_server.start(port=port, ui_port=ui_port, db=db, log=log)
        client = await Client.connect(address)
        return await _ended(client, prefix, time.monotonic() + 900)

    try:
        start("control", "control")
        start("build", "build")
        start("vm-a", "vm")
        start("vm-b", "vm")
        results = asyncio.run(run())
        for name in ("control", "build-2", "vm-b"):
            assert procs[name].poll() is None, f"{name} died: see {name}.log"
            peaks[name] = _peak_mib(procs[name].pid)
        peaks["server-2"] = _tree_peak_mib(server.pid)
    finally:
        for proc in procs.values():
            _kill(proc)
        server.terminate()
        server.wait(timeout=30)
    print("peak resident MiB:", {k: round(v) for k, v in peaks.items()})
    wrong = {
        job: (r.culprit, r.message)
        for job, r in results.items()
        if r.culprit != truth(f"soak-{job.rsplit('-', 1)[1]}")
    }
    assert not wrong, wrong
    assert max(peaks.values()) < PEAK_MIB, peaks
