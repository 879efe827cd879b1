"""Investigations in a door, against stand-ins for the job service: `bisect` plans one as
the CLI does (its chain from the command) and starts it; an investigation's id given to a
command that takes a bisection works on its bisection, `status` shows its stages, and the
door acts on its stage jobs as its own; its thread, computed again after a restart, posts
nothing twice and leaves nothing out. (A real one end to end: test_investigation_thread.)"""

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from kbisect.contract import EXPLAIN_WORKFLOW, INVESTIGATION_WORKFLOW, SWEEP_WORKFLOW, WORKFLOW
from kbisect.doors.actions import execute
from kbisect.doors.grammar import parse
from kbisect.doors.job_posts import Post, follow
from kbisect.errors import InfraError, UserError
from kbisect.jobs import investigation
from kbisect.jobs.investigation import Chain
from kbisect.jobs.request import JobOptions
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult, Step
from kbisect.workflows.explain_types import ExplainResult
from kbisect.workflows.investigation_types import (
    InvestigationProgress,
    InvestigationRequest,
    InvestigationResult,
    Stage,
    StageState,
)
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepResult, SweepTestcase
from tests.chat.test_explain_posts import _explained
from tests.conftest import tree_lab

INV = "inv-nvme-snapshot-read-0a1b2c3d"
CHECK, BISECT, EXPLAIN = f"{INV}-check", f"{INV}-bisect", f"{INV}-bisect-explain"
C9 = "c9" + "0" * 38


def _swept() -> SweepResult:
    tc = SweepTestcase("nvme-snapshot-read", "avg_read_sectors", "sectors", "higher", "fast", 3, 60)
    pair = SweepPair("nvme-snapshot-read", "avg_read_sectors", "sectors", 0, 1, PairWord.SAME,
                     effect=0.0, low=-0.01, high=0.01, boots_old=2, boots_new=2)  # fmt: skip
    return SweepResult("/nonexistent", ["d" * 40, "b" * 40], ["the distro", "their merge base"],
                       ["distro", "base"], [tc], [pair], [], 12)  # fmt: skip


def _found() -> BisectResult:
    steps = [Step("a" * 40, "add a", "good", "endpoint", value=512.0, boots=1),
             Step(C9, "add c9", "bad", "endpoint", value=8.0, boots=1)]  # fmt: skip
    return BisectResult("found", "regression", "nvme-snapshot-read", "/nonexistent", ["a" * 40],
                        C9, C9, [C9], steps, f"first bad commit: {C9}",
                        metric="avg_read_sectors", unit="sectors")  # fmt: skip


@dataclass
class Ended:
    """An ended investigation: its check, bisection and explain stages, each with its answer
    (`refused`: the check stopped it; `failed`: its bisection failed)."""

    refused: bool = False
    failed: bool = False
    asked: list[str] = field(default_factory=list)

    def stages(self) -> list[Stage]:
        check = Stage("check", CHECK, SWEEP_WORKFLOW, StageState.DONE, "merge base: same")
        if self.refused:
            check.state, check.line = StageState.REFUSED, "merge base: changed"
            return [check]
        state = StageState.FAILED if self.failed else StageState.DONE
        bisect = Stage("bisect", BISECT, WORKFLOW, state, "found: first bad commit")
        if self.failed:
            return [check, bisect]
        return [check, bisect, Stage("explain", EXPLAIN, EXPLAIN_WORKFLOW, StageState.DONE, "x")]

    async def describe(self, job_id: str) -> Any:
        kinds = {INV: INVESTIGATION_WORKFLOW, CHECK: SWEEP_WORKFLOW, BISECT: WORKFLOW}
        return SimpleNamespace(workflow_type=kinds.get(job_id, EXPLAIN_WORKFLOW))

    async def running(self, job_id: str) -> bool:
        return False

    async def status_of(self, job_id: str) -> WorkflowExecutionStatus:
        self.asked.append(job_id)
        return WorkflowExecutionStatus.COMPLETED

    async def investigation_result(self, job_id: str) -> InvestigationResult:
        if self.failed:
            raise UserError(f"job {job_id} failed: the bisect stage ({BISECT}) failed: no disk")
        if self.refused:
            return InvestigationResult(self.stages(), "refused", "bisect the distro branch itself")
        return InvestigationResult(self.stages(), "found", f"first bad commit: {C9}", C9, BISECT)

    async def investigation_progress(self, job_id: str) -> InvestigationProgress:
        return InvestigationProgress("failed", "", self.stages())  # a closed one's last

    async def bisection_of(self, job_id: str) -> str:
        return BISECT if job_id == INV else job_id

    async def sweep_result(self, job_id: str) -> SweepResult:
        return _swept()

    async def result(self, job_id: str) -> BisectResult:
        if self.failed:
            raise UserError(f"job {job_id} failed: no disk")
        return _found()

    async def explain_result(self, job_id: str) -> ExplainResult:
        return _explained()

    async def backport_result(self, job_id: str) -> None:
        raise UserError(f"no job {job_id!r}")  # it ran none


def _ours(job: str) -> bool:  # the door started the investigation only
    return job == INV


FULL = [
    "stage:check", "check:outcome", "stage:bisect", "bisect:step:1", "bisect:step:2",
    "bisect:outcome", "bisect:summary", "stage:explain", "explain:outcome", "outcome",
]  # fmt: skip


async def _thread(jobs: Any, posted: list[str], stop_after: int = 0) -> list[Post]:
    """What one follower posts before it stops (after `stop_after` posts: as a restart
    does), with the keys posted before it."""
    sent: list[Post] = []

    async def send(post: Post) -> None:
        if stop_after and len(sent) == stop_after:
            raise InfraError("the homeserver went away")
        sent.append(post)
        posted.append(post.key)

    try:
        await follow(jobs, INV, list(posted), send, poll=0)
    except InfraError:
        pass
    return sent


@pytest.mark.asyncio
@pytest.mark.parametrize("stop_after", [1, 4, 8, 9])
async def test_a_restarted_follower_posts_nothing_twice(stop_after: int) -> None:
    """Each stage's line, then its job's posts under its name, then the investigation's
    outcome: whenever the follower stops, the next one posts the rest, each once."""
    posted: list[str] = []
    first = await _thread(Ended(), posted, stop_after)
    rest = await _thread(Ended(), posted)
    assert [p.key for p in first] == FULL[:stop_after]
    assert [p.key for p in first + rest] == FULL == posted
    texts = {p.key: p.text for p in first + rest}
    assert texts["stage:check"] == f"check: job {CHECK}"
    assert texts["check:outcome"].startswith("nvme-snapshot-read avg_read_sectors: the distro")
    assert texts["bisect:outcome"].startswith(f"first bad commit: {C9}")
    assert texts["explain:outcome"].startswith("explained: cccccccccccc")
    assert texts["outcome"] == f"{INV} found: first bad commit: {C9}"
    assert await _thread(Ended(), posted) == []  # a third follower: nothing new


@pytest.mark.asyncio
async def test_a_refused_check_or_a_failed_stage_is_the_investigations_outcome() -> None:
    sent = await _thread(Ended(refused=True), [])
    assert [p.key for p in sent] == ["stage:check", "check:outcome", "outcome"]
    assert sent[-1].text == f"{INV} stopped before bisecting: bisect the distro branch itself"
    sent = await _thread(Ended(failed=True), [])
    assert [p.key for p in sent] == ["stage:check", "check:outcome", "stage:bisect",
                                     "bisect:outcome", "outcome"]  # fmt: skip
    assert sent[-2].text == f"{BISECT} ended without a result: job {BISECT} failed: no disk"
    assert sent[-1].text.startswith(f"{INV} ended without a result: job {INV} failed: the bisect")


@pytest.mark.asyncio
async def test_an_investigations_id_to_explain_works_on_its_bisection(tmp_path: Path) -> None:
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    jobs = Ended()
    reply = await execute(parse(f"explain {INV}"), jobs, settings, _ours)  # type: ignore[arg-type]
    assert jobs.asked == [EXPLAIN]  # its bisection's explain job: the explain stage
    assert reply.ok and reply.text.startswith("explained: cccccccccccc"), reply.text
    assert [f.name for f in reply.files] == [f"{EXPLAIN}-flame.svg"]


@pytest.mark.asyncio
async def test_status_and_report_of_an_investigation_show_its_stages(tmp_path: Path) -> None:
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    status = await execute(parse(f"status {INV}"), Ended(), settings, _ours)  # type: ignore[arg-type]
    assert status.text.splitlines() == [
        f"{INV}: ended",
        f"found: first bad commit: {C9}",
        f"check: done ({CHECK}): merge base: same",
        f"bisect: done ({BISECT}): found: first bad commit",
        f"explain: done ({EXPLAIN}): x",
    ]
    report = await execute(parse(f"report {INV}"), Ended(), settings, _ours)  # type: ignore[arg-type]
    assert report.markdown and report.text.startswith(f"# kbisect {INV}: ")
    assert f"## Bisect: {BISECT}" in report.text and f"## Explain: {EXPLAIN}" in report.text
    failed = await execute(parse(f"status {INV}"), Ended(failed=True), settings, _ours)  # type: ignore[arg-type]
    assert failed.text.splitlines()[1].startswith(f"job {INV} failed: the bisect stage")
    assert failed.text.splitlines()[2:] == [
        f"check: done ({CHECK}): merge base: same",
        f"bisect: failed ({BISECT}): found: first bad commit",
    ]


@pytest.mark.asyncio
async def test_the_door_acts_on_its_investigations_stage_jobs_and_no_others(
    tmp_path: Path,
) -> None:
    settings = Settings.from_env({"KBISECT_DATA": str(tmp_path / "d")})
    for job in (CHECK, BISECT, EXPLAIN, f"{BISECT}-backport-0123abcd", f"{INV}-bisect-2"):
        reply = await execute(parse(f"status {job}"), Ended(), settings, _ours)  # type: ignore[arg-type]
        assert "not started here" not in reply.text, (job, reply.text)
    other = "inv-nvme-snapshot-read-99999999"
    for job in (other, f"{other}-bisect", f"{INV}x-bisect", f"{INV}-bisectx", f"bisect-{INV}"):
        reply = await execute(parse(f"status {job}"), Ended(), settings, _ours)  # type: ignore[arg-type]
        assert not reply.ok and "not started here" in reply.text, (job, reply.text)


@dataclass
class Starts:
    """The job service's side of a start: what was started, by whom."""

    started: list[tuple[InvestigationRequest, str]] = field(default_factory=list)

    def needs(self) -> list[object]:
        return []

    async def require_workers(self, needs: object) -> None:
        return None

    async def start_investigation(self, req: InvestigationRequest, by: str = "") -> str:
        self.started.append((req, by))
        return INV

    def job_url(self, job_id: str) -> str:
        return f"http://ui/{job_id}"


@pytest.mark.asyncio
async def test_bisect_plans_the_chain_the_command_asks_for_as_the_cli_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[JobOptions, Chain]] = []
    real = investigation.plan

    def plan(opts: JobOptions, chain: Chain, settings: Settings) -> Any:
        asked.append((opts, chain))
        return real(opts, chain, settings)

    monkeypatch.setattr(investigation, "plan", plan)
    _, settings = tree_lab(tmp_path, tmp_path / "cache")
    jobs = Starts()
    base = "bisect tree=lab good=v1 bad=master testcase=nvme-snapshot-read"
    claims: list[int] = []
    reply = await execute(
        parse(f"{base} cross-tree=yes target=master explain=no"), jobs, settings, _ours,  # type: ignore[arg-type]
        "@alice:hs (Matrix)", lambda: claims.append(1),
    )  # fmt: skip
    assert reply.ok and reply.job_id == INV and claims == [1], reply.text
    assert reply.text.splitlines() == [
        f"started {INV}: http://ui/{INV}",  # and v1 is master's ancestor: no check to make
        "cross-tree=yes: the endpoints are on one line already; bisecting them as they are",
    ]
    ((opts, chain),) = asked
    assert chain == Chain(cross_tree=True, kernels="", explain=False, target="master")
    assert (opts.tree, opts.good, opts.bad) == ("lab", ["v1"], "master")
    ((req, by),) = jobs.started
    assert by == "@alice:hs (Matrix)" and req.check is None and not req.explain
    assert req.target_name == "master" and len(req.target) == 40
    assert req.bisection is not None and req.bisection.testcase == "nvme-snapshot-read"
    # the chain's own checks are the CLI's: a target that is not in the tree
    refused = await execute(
        parse(f"{base} target=no-such-rev"),
        jobs,
        settings,
        _ours,
        "x",
        lambda: None,  # type: ignore[arg-type]
    )
    assert not refused.ok and "no-such-rev" in refused.text and len(jobs.started) == 1
    # prebuilt kernels, package names only: the bisection is over the kernels' list
    kernels = "kernels=linux-image-6.1.0-1-amd64,linux-image-6.1.0-2-amd64"
    reply = await execute(
        parse(f"bisect {kernels} testcase=nvme-snapshot-read"), jobs, settings, _ours, "x",  # type: ignore[arg-type]
        lambda: None,
    )  # fmt: skip
    assert reply.ok, reply.text
    req, _ = jobs.started[-1]
    assert req.kernels is not None and len(req.kernels.commits) == 2 and req.check is None
    assert asked[-1][1].kernels == "linux-image-6.1.0-1-amd64,linux-image-6.1.0-2-amd64"
