"""`kbisect bisect` on bad input: one line and exit 2, against a real local dev server."""

import asyncio
import os
import re
import sys
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from benchmarks.dags import linear
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.contract import (
    BACKPORT_WORKFLOW,
    EXPLAIN_WORKFLOW,
    SERIES_SCHEDULE_PREFIX,
    SERIES_WORKFLOW,
    SWEEP_WORKFLOW,
    WORKFLOW,
    QueueKind,
)
from kbisect.doors.actions import execute
from kbisect.doors.grammar import parse
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.jobs.client import JobClient
from kbisect.main import main
from kbisect.settings import Queues, Settings
from kbisect.workers.activities import BuildActivities
from kbisect.workers.decisions import decide
from kbisect.workflows.backport_types import BackportPlan, BackportResult
from kbisect.workflows.bisect_types import BisectResult
from kbisect.workflows.bisect_workflow import BisectWorkflow, sandbox_runner
from kbisect.workflows.explain_types import ExplainResult
from kbisect.workflows.investigation_workflow import InvestigationWorkflow
from kbisect.workflows.series_types import SeriesTick
from kbisect.workflows.sweep_types import SweepResult
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
        workflows=[InvestigationWorkflow, BisectWorkflow],
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
# `python -m kbisect` with a shorter WORKER_GRACE, set before the commands import it.
SHORT_GRACE = (
    "import sys; from kbisect.jobs import client; client.WORKER_GRACE = 2.0; "
    "from kbisect.main import main; sys.exit(main())"
)


async def _cli(
    env: WorkflowEnvironment, *args: str, timeout: float = 120, **environ: str
) -> tuple[int, str, str]:
    """Run `kbisect ARGS` against the test server with stdout and stderr piped; the wait
    for a worker that is starting cut to 2 s (30 s): no test here starts one late."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SHORT_GRACE,
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
    return fakes.fake_worker(env.client, queue, InvestigationWorkflow, BisectWorkflow)


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


async def test_a_worker_busy_with_another_job_s_activity_is_not_taken_for_gone(
    env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose slots are all taken does not poll (a cold build holds one for
    minutes): while it runs another job's activity, a job queued behind it is served, and
    its follower must not stop with "no worker polls"."""
    from kbisect.jobs import client as job_client

    monkeypatch.setattr(job_client, "POLLER_WINDOW", -1.0)  # every poll too old: only work counts
    queue = f"q-{uuid.uuid4().hex[:6]}"
    client = JobClient(Settings.from_env(), env.client)
    needs = client.needs(Queues(control=queue, build=queue, vm=queue))
    waiting = await _start_job(env, f"q-{uuid.uuid4().hex[:6]}")  # nothing of its own runs
    async with _fake_worker(env, queue):
        busy = await _start_job(env, queue, Scenario(linear(8), "c5", test_delay=120))
        for _ in range(100):  # its first boot under way
            if QueueKind.VM in await client._busy_kinds(busy):
                break
            await asyncio.sleep(0.2)
        served = {n.kind for n in needs} - {n.kind for n in await client.unserved(needs, waiting)}
        assert served == {QueueKind.VM}, served
        await env.client.get_workflow_handle(busy).terminate("test over")
        gone = {n.kind for n in await client.unserved(needs, waiting)}
    assert QueueKind.VM in gone  # nothing runs there now: the poller check stands
    await env.client.get_workflow_handle(waiting).terminate("test over")


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
    assert 'first bad commit: c5 ("subject of c5")' in out


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
    assert re.fullmatch(r"inv-nvme-snapshot-read-[0-9a-f]{8}", job_id)
    assert f"job {job_id}" in err.splitlines()
    assert f"Web UI: {ui}/namespaces/default/workflows/{job_id}" in err.splitlines()


# --- an id of another kind than the command takes: one line that says what it is -----
ENDED = {  # each kind's result, as small as its dataclass allows
    SWEEP_WORKFLOW: SweepResult(
        "/r", ["a" * 40, "b" * 40], ["v1", "v2"], ["s", "t"], [], [], [], 3
    ),
    EXPLAIN_WORKFLOW: ExplainResult(
        "explained", "/r", "t", "m", "us", "lower", "p" * 40, "c" * 40, ["p", "c"]
    ),
    BACKPORT_WORKFLOW: BackportResult("verified", BackportPlan("", "c" * 40), "/r", "t" * 40, ""),
    SERIES_WORKFLOW: SeriesTick("w"),
}


@workflow.defn(dynamic=True, sandboxed=False)
class Ended:
    """A job of any of those kinds, ended at once with its kind's result."""

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> object:
        return ENDED[workflow.info().workflow_type]


# What a user may give in place of a bisection's id, as each is named in the refusal
NAMED = {
    "sweep": "a sweep",
    "explain": "an explain job",
    "backport": "a backport job",
    "tick": "a series watch's tick",
    "watch": "a series watch",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def other_ids(env: WorkflowEnvironment) -> dict[str, str]:
    """By NAMED's kinds: an ended sweep, explain and backport job and series tick, a series
    watch (its schedule's id, as `kbisect series watch` prints it); and an id of no job."""
    queue, tag = f"q-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:8]
    ended = {  # as each kind's id is formed (a tick's: its Schedule's time appended)
        "sweep": (SWEEP_WORKFLOW, f"sweep-{tag}"),
        "explain": (EXPLAIN_WORKFLOW, f"bisect-t-{tag}-explain"),
        "backport": (BACKPORT_WORKFLOW, f"bisect-t-{tag}-backport-0123abcd"),
        "tick": (SERIES_WORKFLOW, f"series-w{tag}-2026-01-01T00:00:00Z"),
    }
    async with Worker(env.client, task_queue=queue, workflows=[Ended]):
        for kind, job in ended.values():
            await env.client.execute_workflow(kind, id=job, task_queue=queue)
    ids = {name: job for name, (_, job) in ended.items()}
    ids["watch"] = SERIES_SCHEDULE_PREFIX + f"w{tag}"
    tick = ScheduleActionStartWorkflow(SERIES_WORKFLOW, id=f"series-w{tag}", task_queue=queue)
    await env.client.create_schedule(
        ids["watch"],
        Schedule(tick, ScheduleSpec(intervals=[ScheduleIntervalSpec(timedelta(days=1))]),
                 state=ScheduleState(paused=True)),
    )  # fmt: skip
    return {**ids, "none": f"bisect-t-{tag}-gone"}


def _words(command: str) -> str:
    return " ".join(w for w in command.split() if "{" not in w)


OTHERS = ("sweep", "explain", "backport", "tick")
REFUSED = {  # each command that takes a job id, and the kinds (of NAMED's) it refuses
    "explain {}": OTHERS,
    "backport {} --target HEAD": OTHERS,
    "mark {} HEAD good": OTHERS,
    "report {} --bisect-log {dir}/log": OTHERS,
    "report {} --sru": ("sweep", "explain", "tick"),
    "report {} --sru-patch {dir}": ("sweep", "explain", "tick"),
    "report {} --plot {dir}/p.png": ("explain", "backport", "tick"),
    "report {}": ("tick",),
    "watch {}": ("tick",),
    "resume {}": ("tick",),
}


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        pytest.param(command, kind, id=f"{_words(command)}-{kind}")
        for command, kinds in REFUSED.items()
        for kind in (*kinds, "watch", "none")
    ],
)
async def test_an_id_of_another_kind_is_one_line_that_says_what_it_is(
    env: WorkflowEnvironment,
    other_ids: dict[str, str],
    command: str,
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kbisect explain sweep-…` (the id `bisect --cross-tree` prints first) ended in a
    traceback: each command that takes one kind of job names what the id is instead."""
    monkeypatch.setenv("KBISECT_TEMPORAL_ADDRESS", env.client.service_client.config.target_host)
    job = other_ids[kind]
    argv = command.format(job, dir=tmp_path).split()
    assert await asyncio.to_thread(main, [*argv, "--no-start"]) == 2
    line = _one_error(capsys.readouterr().err)
    said = f"no job {job!r}" if kind == "none" else f"{job} is {NAMED[kind]}, not "
    assert said in line, line


@pytest.mark.parametrize("kind", ["sweep", "explain", "backport"])
@pytest.mark.parametrize(
    "command", ["explain {}", "backport {} target=HEAD", "sru {}", "report {}", "mark {} HEAD good"]
)
async def test_a_door_refuses_an_id_of_another_kind_in_one_line(
    env: WorkflowEnvironment, other_ids: dict[str, str], command: str, kind: str, tmp_path: Path
) -> None:
    """The doors' `explain JOB`, `backport JOB target=…`, `sru JOB`, `report JOB` and
    `mark JOB` read a bisection too: the same one line as a reply."""
    job = other_ids[kind]
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    client = JobClient(settings, env.client)
    reply = await execute(parse(command.format(job)), client, settings, lambda j: True)
    assert not reply.ok and reply.text.startswith(f"{job} is {NAMED[kind]}, not a bisection: ")
    assert "\n" not in reply.text
