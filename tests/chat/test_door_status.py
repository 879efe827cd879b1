"""`status` in a door (Matrix, GitLab): one line a job, and a failed job's line says why
in the activity's own words, as `kbisect status` does. The job service is a stand-in here:
what counts is the door's line (JobSummary.error from a real Temporal's failed job:
tests/workflows/test_bisect_workflow.py)."""

from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from kbisect.contract import BACKPORT_WORKFLOW, DOOR_RUNNING_JOBS, EXPLAIN_WORKFLOW
from kbisect.doors.actions import Quota, execute
from kbisect.doors.grammar import parse
from kbisect.errors import UserError
from kbisect.jobs.client import JobSummary
from kbisect.settings import Settings
from kbisect.workflows.backport_types import (
    BackportPlan,
    BackportProgress,
    BackportResult,
    BackportWord,
)
from kbisect.workflows.explain_types import ExplainProgress

WHY = "cannot test: kernel 6.12.117+deb12-cloud-amd64 has module 9pnet_virtio neither built in"


@dataclass
class Jobs:
    async def jobs(self, limit: int = 20) -> list[JobSummary]:
        now = datetime.now(UTC)
        return [
            JobSummary("bisect-a-1", "failed", "bisecting", "needs-9p", "", now, error=WHY),
            JobSummary("bisect-b-2", "completed", "found", "nvme-snapshot-read", "c" * 40, now),
            JobSummary("bisect-c-3", "failed", "", "sched-pipe", "", now, error="x"),  # not ours
        ]


@pytest.mark.asyncio
async def test_a_failed_job_says_why_on_its_status_line(tmp_path: Path) -> None:
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    reply = await execute(parse("status"), Jobs(), settings, lambda j: j != "bisect-c-3")  # type: ignore[arg-type]
    assert reply.text.splitlines() == [
        f"bisect-a-1 failed bisecting needs-9p: {WHY}",
        f"bisect-b-2 completed found nvme-snapshot-read {'c' * 40}",
    ]


@dataclass
class Stage:
    """An explain or backport job as the door sees it: its kind, and whether it runs."""

    kind: str
    runs: bool

    async def describe(self, job_id: str) -> SimpleNamespace:
        return SimpleNamespace(workflow_type=self.kind)

    async def running(self, job_id: str) -> bool:
        return self.runs

    async def explain_progress(self, job_id: str) -> ExplainProgress:
        return ExplainProgress("booting", planned=10, boots=["boot 1: parent"])

    async def backport_progress(self, job_id: str) -> BackportProgress:
        return BackportProgress("measuring")

    async def backport_result(self, job_id: str) -> BackportResult:
        return BackportResult(
            BackportWord.VERIFIED, BackportPlan("c" * 40, "t" * 40), "/r", "t" * 40, "stable"
        )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("job", "kind", "runs", "says"),
    [
        ("bisect-a-1-explain", EXPLAIN_WORKFLOW, True, " is booting: 1 of 10 explain boots"),
        ("bisect-a-1-backport-0123abcd", BACKPORT_WORKFLOW, True, " is measuring"),
        ("bisect-a-1-backport-0123abcd", BACKPORT_WORKFLOW, False, ": ended\nverified"),
    ],
)
async def test_status_of_an_explain_or_backport_job_is_its_own(
    tmp_path: Path, job: str, kind: str, runs: bool, says: str
) -> None:
    """`status JOB` of the door's explain or backport job reads that job's progress or
    result, not a bisection's."""
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    reply = await execute(parse(f"status {job}"), Stage(kind, runs), settings, lambda j: True)  # type: ignore[arg-type]
    assert reply.ok and reply.text.startswith(job + says), reply.text


def test_a_quota_holds_each_start_until_the_door_has_recorded_it() -> None:
    """Commands sent at once each claim before any job is recorded: the claims under way
    count, one person's only, and are given back when their commands end."""
    quota = Quota(lambda who: 1 if who == "alice" else 0)  # one of alice's is recorded
    with ExitStack() as commands:
        claims = [commands.enter_context(quota.command("alice")) for _ in range(DOOR_RUNNING_JOBS)]
        for claim in claims[:-1]:
            claim()
        with pytest.raises(UserError, match=f"refused: you have {DOOR_RUNNING_JOBS} jobs running"):
            claims[-1]()
        with quota.command("bob") as bobs:
            bobs()
    with quota.command("alice") as claim:
        claim()  # the others' commands ended (unrecorded: their jobs did not start)
