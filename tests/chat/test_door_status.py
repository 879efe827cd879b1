"""`status` in a door (Matrix, GitLab): one line a job, and a failed job's line says why
in the activity's own words, as `kbisect status` does. The job service is a stand-in here:
what counts is the door's line (JobSummary.error from a real Temporal's failed job:
tests/workflows/test_bisect_workflow.py)."""

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kbisect.doors.actions import execute
from kbisect.doors.grammar import parse
from kbisect.jobs.client import JobSummary
from kbisect.settings import Settings

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
