"""`kbisect bisect` on bad input: one line and exit 2, against a real local dev server."""

import asyncio
import os
import re
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from benchmarks.dags import linear
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.contract import WORKFLOW, BisectResult
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.main import main
from kbisect.settings import Settings
from kbisect.workers.activities import BuildActivities
from kbisect.workers.decisions import decide
from kbisect.workflows.bisect_workflow import BisectWorkflow, sandbox_runner
from tests.conftest import one_queue_env
from tests.workflows import fakes
from tests.workflows.fakes import Scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _kbisect(
    env: WorkflowEnvironment, *args: str, command: str = "bisect"
) -> tuple[int, str]:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    environ = one_queue_env(env, queue)
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[BisectWorkflow],
        activities=[BuildActivities(Settings.from_env(), KernelBuilder()).validate_job, decide],
        workflow_runner=sandbox_runner(),
        activity_executor=ThreadPoolExecutor(2),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kbisect",
            command,
            "--no-start",
            *args,
            env=environ,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    lines = [line for line in err.decode().splitlines() if line.startswith("kbisect: error")]
    assert len(lines) == 1, err.decode()
    return proc.returncode or 0, lines[0]


@pytest.fixture
def lab(tmp_path: Path, tiny_tarball: Path) -> Path:
    create_lab(tmp_path / "lab", LabOptions(commits=6, seed=3))
    return tmp_path / "lab"


@pytest.mark.parametrize(
    ("good", "bad", "extra", "expected"),
    [
        ("lab-bad", "lab-good", [], "is not an ancestor of bad"),  # and it suggests --mode fix
        ("lab-good", "lab-bad", ["--mode", "fix"], "must be an ancestor of good"),
    ],
)
async def test_a_bad_job_ends_at_once_with_one_line(
    env: WorkflowEnvironment, lab: Path, good: str, bad: str, extra: list[str], expected: str
) -> None:
    args = ["--repo", str(lab), "--good", good, "--bad", bad, "--testcase", "nvme-snapshot-read"]
    code, line = await _kbisect(env, *args, *extra)  # a later --testcase wins
    assert code == 2 and expected in line
    # The job has failed: resuming it says so in one line.
    found = re.search(r"job (\S+) failed: ", line)
    assert found, line
    job = found.group(1)
    code, line = await _kbisect(env, job, command="resume")
    assert code == 2 and f"job {job} has ended (failed): nothing to resume" in line


@pytest.mark.parametrize(
    ("good", "testcase", "expected"),
    [
        ("v9.9", "nvme-snapshot-read", "unknown revision 'v9.9'"),
        ("lab-good", "no-such-test", "unknown testcase 'no-such-test'"),
    ],
)
async def test_bad_input_fails_before_a_job_starts(
    env: WorkflowEnvironment, lab: Path, good: str, testcase: str, expected: str
) -> None:
    before = await _jobs(env)
    args = ["--repo", str(lab), "--good", good, "--bad", "lab-bad", "--testcase", testcase]
    code, line = await _kbisect(env, *args)
    assert code == 2 and expected in line
    assert await _jobs(env) == before  # no job was started


async def _jobs(env: WorkflowEnvironment) -> int:
    return len([wf async for wf in env.client.list_workflows()])


# --- the CLI against a server: unknown jobs, missing workers, piped output -----------
async def _cli(
    env: WorkflowEnvironment, *args: str, timeout: float = 120, **environ: str
) -> tuple[int, str, str]:
    """Run `kbisect ARGS` against the test server with stdout and stderr piped."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbisect",
        *args,
        env={
            **os.environ,
            "KBISECT_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            **environ,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode(), err.decode()


def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("kbisect: error")]
    assert len(lines) == 1, err
    return lines[0]


def _queues(queue: str) -> dict[str, str]:
    return {
        "KBISECT_CONTROL_QUEUE": queue,
        "KBISECT_BUILD_QUEUE": queue,
        "KBISECT_VM_QUEUE": queue,
    }


@pytest.mark.parametrize("command", ["watch", "resume", "cancel", "report", "mark"])
async def test_an_unknown_job_is_one_line(env: WorkflowEnvironment, command: str) -> None:
    extra = ["HEAD", "good"] if command == "mark" else []
    code, _, err = await _cli(env, command, "no-such-job", *extra)
    assert code == 2
    assert "no job 'no-such-job'" in _one_error(err)


async def _start_job(env: WorkflowEnvironment, queue: str, scenario: Scenario | None = None) -> str:
    """A job over a fake scenario (tests.workflows.fakes), on its own queue."""
    req = fakes.request(scenario or Scenario(graph=linear(8), culprit="c5"), queue)
    job_id = f"bisect-test-{uuid.uuid4().hex[:8]}"
    await env.client.start_workflow(WORKFLOW, req, id=job_id, task_queue=queue)
    return job_id


def _fake_worker(env: WorkflowEnvironment, queue: str) -> Worker:
    return fakes.fake_worker(env.client, queue, BisectWorkflow)


async def test_bisect_without_a_worker_says_so_and_starts_nothing(
    env: WorkflowEnvironment, lab: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    before = await _jobs(env)
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    code, _, err = await _cli(
        env, "bisect", "--no-start", *args, "--testcase", "nvme-snapshot-read", **_queues(queue)
    )
    assert code == 6
    line = _one_error(err)
    assert f"no worker polls task queue {queue} on 127.0.0.1:" in line
    assert "kbisect worker" in line and "kbisect up" in line
    assert await _jobs(env) == before


@pytest.mark.parametrize("command", ["watch", "resume"])
async def test_a_job_without_a_worker_says_so(env: WorkflowEnvironment, command: str) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    job_id = await _start_job(env, queue)
    code, _, err = await _cli(env, command, job_id)
    assert code == 6
    assert f"no worker polls task queue {queue}" in _one_error(err)


async def test_watch_notices_when_the_workers_go(
    env: WorkflowEnvironment,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kbisect.cli import job_service
    from kbisect.jobs import client as job_client

    monkeypatch.setattr(job_service, "STALL_SECONDS", 1.0)  # "nothing changed for a while"
    monkeypatch.setattr(job_client, "POLLER_WINDOW", 6.0)  # a poller older is gone
    monkeypatch.setenv("KBISECT_TEMPORAL_ADDRESS", env.client.service_client.config.target_host)
    queue = f"q-{uuid.uuid4().hex[:6]}"
    scenario = Scenario(graph=linear(8), culprit="c5", test_delay=120)  # a slow first test
    async with _fake_worker(env, queue) as worker:
        job_id = await _start_job(env, queue, scenario)
        watching = asyncio.create_task(asyncio.to_thread(main, ["watch", job_id]))
        await asyncio.sleep(3)
        assert not watching.done()  # the workers were there when it started
        await worker.shutdown()
        code = await asyncio.wait_for(watching, 90)
    assert code == 6
    assert f"no worker polls task queue {queue}" in _one_error(capsys.readouterr().err)


async def test_piped_watch_is_one_event_a_line(env: WorkflowEnvironment) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    async with _fake_worker(env, queue):
        job_id = await _start_job(env, queue, Scenario(linear(8), "c5", test_delay=1.0))
        code, out, err = await _cli(env, "watch", job_id)
        result = await env.client.get_workflow_handle(job_id, result_type=BisectResult).result()
    assert code == 0, err
    assert "\x1b[" not in err + out and "\r" not in err  # no colours, no redraws
    steps = [line for line in err.splitlines() if re.match(r"step \d+: ", line)]
    assert len(steps) == len(result.steps), err
    for i, (line, step) in enumerate(zip(steps, result.steps, strict=True), 1):
        assert line.startswith(f"step {i}: {step.commit[:12]} {step.verdict} avg_read_sectors=")
    assert "first bad commit: c5 subject of c5" in out


async def test_piped_bisect_prints_whole_lines(env: WorkflowEnvironment, lab: Path) -> None:
    queue = f"q-{uuid.uuid4().hex[:6]}"
    ui = "http://127.0.0.1:8233/a/web/ui/behind/a/rather/long/proxy/path"
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    async with _fake_worker(env, queue):
        code, out, err = await _cli(
            env,
            "bisect",
            "--no-start",
            "--detach",
            *args,
            "--testcase",
            "nvme-snapshot-read",
            KBISECT_TEMPORAL_UI=ui,
            **_queues(queue),
        )
    assert code == 0, err
    job_id = out.strip()
    assert re.fullmatch(r"bisect-nvme-snapshot-read-[0-9a-f]{8}", job_id)
    assert f"job {job_id}" in err.splitlines()
    assert f"Web UI: {ui}/namespaces/default/workflows/{job_id}" in err.splitlines()
