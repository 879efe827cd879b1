"""A backport job in a door's thread: its phases and boots as they come, then its outcome
and, verified, the SRU note with the target's before and after; each post once."""

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kbisect.contract import BACKPORT_WORKFLOW
from kbisect.doors.job_posts import Post, follow
from kbisect.workflows.backport_types import BackportProgress, BackportWord
from kbisect.workflows.sweep_types import SweepBoot
from tests.kbisect.test_sru_backport import _backport


@dataclass
class Jobs:
    """The job service as the door sees it: the backport runs for two looks, then ends."""

    backport: Any
    bisection: Any
    looks: int = 0
    progress: list[BackportProgress] = field(default_factory=list)

    async def describe(self, job_id: str) -> Any:
        return SimpleNamespace(workflow_type=BACKPORT_WORKFLOW)

    async def running(self, job_id: str) -> bool:
        self.looks += 1
        return self.looks <= len(self.progress)

    async def backport_progress(self, job_id: str) -> BackportProgress:
        return self.progress[self.looks - 1]

    async def backport_result(self, job_id: str) -> Any:
        return self.backport

    async def result(self, job_id: str) -> Any:
        return self.bisection


@pytest.mark.asyncio
async def test_a_verified_backport_posts_its_boots_outcome_and_sru_note(
    distro_lab: tuple[Path, dict[str, Any]],
) -> None:
    repo, truth = distro_lab
    result, bisection = _backport(repo, truth, BackportWord.VERIFIED)
    boot = SweepBoot("nvme-snapshot-read", 0, 8.0, host="vm-1")
    jobs = Jobs(result, bisection, progress=[
        BackportProgress("building", message="the target without and with the series"),
        BackportProgress("measuring", boots=[boot]),
    ])  # fmt: skip
    sent: list[Post] = []

    async def send(post: Post) -> None:
        sent.append(post)

    assert await follow(jobs, "bisect-x-1-backport-1", ["phase:building"], send, poll=0) is None  # type: ignore[arg-type]
    keys = [p.key for p in sent]
    assert keys == ["phase:measuring", "boot:0", "outcome", "sru"]  # building was posted before
    assert sent[1].text == "boot 1: without the backport: nvme-snapshot-read 8 on vm-1"
    assert sent[2].text.startswith("verified: ")
    assert (
        "[Test Plan]" in sent[3].text and "with the backport: avg_read_sectors 512" in sent[3].text
    )
