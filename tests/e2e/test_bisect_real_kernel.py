"""A real bisection: dev server and worker processes, lab kernels, QEMU; and it survives a
SIGKILL of the worker mid-build, after steps have finished, with a SIGKILL of the server."""

import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from benchmarks.nginx import free_port
from kbisect.infra import temporal_server
from kbisect.infra.git import Git
from kbisect.workflows.investigation_types import StageName, stage_id
from tests.e2e.service import uncache, watch_job

pytestmark = pytest.mark.e2e
KBISECT = [sys.executable, "-m", "kbisect"]
TESTCASE = "nvme-snapshot-read"


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*KBISECT, "worker"],
            env=env,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _wait_for(cond: "object", timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(1)


def _compiling_under(pid: int) -> bool:
    """Whether a make runs under process `pid` (a child of it, or deeper)."""
    parent, name = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended meanwhile
        proc = int(stat.parent.name)
        name[proc] = text[text.index("(") + 1 : text.rindex(")")]
        parent[proc] = int(text[text.rindex(")") + 2 :].split()[1])
    for proc in (p for p, n in name.items() if n == "make"):
        while proc > 1:
            proc = parent.get(proc, 0)
            if proc == pid:
                return True
    return False


def _build_history(address: str, job_id: str) -> tuple[Counter[str], int]:
    """How often each commit's build was scheduled (a retry is not a new schedule), and how
    many build attempts were retries (a worker died under them)."""

    async def go() -> tuple[Counter[str], int]:
        client = await Client.connect(address)
        history = await client.get_workflow_handle(job_id).fetch_history()
        scheduled: Counter[str] = Counter()
        build_events: set[int] = set()
        retries = 0
        for event in history.events:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "build_kernel":
                scheduled[json.loads(attrs.input.payloads[0].data)["commit"]] += 1
                build_events.add(event.event_id)
            started = event.activity_task_started_event_attributes
            if started.scheduled_event_id in build_events and started.attempt > 1:
                retries += 1
        return scheduled, retries

    return asyncio.run(go())


def _steps(address: str, job_id: str) -> set[tuple[str, str]]:
    """The job's recorded steps (a finished verdict each) as (commit, verdict), from its
    progress query."""

    async def go() -> set[tuple[str, str]]:
        client = await Client.connect(address)
        try:
            progress = await client.get_workflow_handle(job_id).query("progress")
        except RPCError:  # the investigation has not started its bisection yet
            return set()
        return {(step["commit"], step["verdict"]) for step in progress["steps"]}

    return asyncio.run(go())


def test_bisection_names_the_culprit_through_a_worker_kill_and_a_server_restart(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    # Every kernel the bisection may build after its endpoints is built for real: the
    # e2e cache (the lab is the same every run) would hold them all, and no build would
    # be there to kill.
    uncache(
        lab, Git(lab).run("rev-list", "--ancestry-path", "lab-good..lab-bad^").split(), TESTCASE
    )
    port, ui_port = free_port(), free_port()
    db = tmp_path / "temporal.db"
    server = temporal_server.start(port=port, ui_port=ui_port, db=db, log=tmp_path / "server.log")
    tag = uuid.uuid4().hex[:6]
    env = {
        **os.environ,
        "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "KBISECT_CONTROL_QUEUE": f"kb-{tag}",
        "KBISECT_BUILD_QUEUE": f"kb-build-{tag}",
        "KBISECT_VM_QUEUE": f"kb-vm-{tag}",
    }
    worker = _worker(env, tmp_path / "worker.log")
    try:
        started = subprocess.run(
            [
                *KBISECT,
                "bisect",
                "--repo",
                str(lab),
                "--good",
                "lab-good",
                "--bad",
                "lab-bad",
                "--testcase",
                TESTCASE,
                "--repetitions",
                "1",
                "--detach",
                "--no-start",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        job_id = started.stdout.strip()  # the investigation's; its bisection is a stage
        bisection = stage_id(job_id, StageName.BISECT)

        # Once steps have finished (the endpoints are judged), kill the worker while it is
        # really compiling (not on a cache hit), and the server with it: both crash.
        address = f"127.0.0.1:{port}"
        _wait_for(lambda: len(_steps(address, bisection)) >= 2, 1500, "the endpoints judged")
        # This worker's make: the other e2e worker may be building in the lab's slots.
        _wait_for(lambda: _compiling_under(worker.pid), 1500, "a real build")
        time.sleep(3)
        done_before_kill = _steps(address, bisection)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        server.kill()  # SIGKILL: the dev server goes with its supervisor, mid-write
        server.wait(timeout=30)
        # The dev server dies of its parent's death a moment later (PR_SET_PDEATHSIG).
        _wait_for(lambda: not temporal_server.listening("127.0.0.1", port), 30, "the port free")
        server = temporal_server.start(
            port=port, ui_port=ui_port, db=db, log=tmp_path / "server.log"
        )
        worker = _worker(env, tmp_path / "worker.log")

        result = watch_job(env, job_id)
        builds, retries = _build_history(f"127.0.0.1:{port}", bisection)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may be the killed one
            os.killpg(worker.pid, signal.SIGKILL)
        server.terminate()
        server.wait(timeout=30)

    # The lab breaks commits 2 (build) and 14 (boot) and puts the culprit at 4-11, so
    # neither the culprit nor its parent is ever skipped: the answer is one commit.
    culprit = truth["culprit"]
    assert result["culprit"] == culprit, result["message"]
    # The culprit reverted on lab-bad, built and booted for real, reads like lab-good.
    verification = result["verification"]
    assert verification["kind"] == "revert" and verification["change"] == culprit
    assert verification["status"] == "confirmed", verification
    assert verification["position"] < 0.5
    assert builds[verification["commit"]] == 1
    # The steps finished before the kill stand, with their verdicts, and were not redone.
    finished = {(s["commit"], s["verdict"]) for s in result["steps"]}
    assert done_before_kill <= finished, (done_before_kill, finished)
    assert max(builds.values()) == 1, builds  # no finished step redone after the kill
    assert retries >= 1  # the kill landed in a build, which another worker finished
    commits = int(str(truth["commits"]))
    # Builds besides the two endpoints and the verification commit: a bisection's worth.
    assert sum(builds.values()) - 2 - 1 <= math.ceil(math.log2(commits)) + 2
    tested = [s["commit"] for s in result["steps"]]
    assert len(tested) == len(set(tested))
    # Lab fillers edit files the config does not compile, or only comments: judged from
    # the kernel they share with a judged commit, never booted; the inert never built.
    same = [s for s in result["steps"] if s["source"] == "same-kernel"]
    assert same and all(s["boots"] == 0 for s in same), same
    inert = [s["commit"] for s in same if s["note"].startswith("touches no file")]
    assert inert and not any(builds.get(c) for c in inert), (inert, builds)
    print(
        f"bisection: {len(tested)} steps, {sum(builds.values())} builds; "
        f"culprit {result['culprit']}"
    )
