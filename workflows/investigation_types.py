"""What an investigation is asked and answers, beside its workflow (investigation_workflow).

An investigation is the chain `kbisect bisect` and the doors start: the cross-tree check,
a first phase over prebuilt kernels, the bisection with its verification, explain, a
backport to a target. Each stage is a child job of its own kind and id; these types say
which ran, how each ended, and how the next one's request is made from the last one's
answer (pure: the workflow and the doors share it).
"""

import dataclasses
import hashlib
from dataclasses import dataclass, field

from kbisect.contract import BACKPORT_SUFFIX, EXPLAIN_SUFFIX, Mode
from kbisect.workflows.backport_types import BackportRequest
from kbisect.workflows.bisect_types import BisectRequest, BisectResult, JobStatus
from kbisect.workflows.explain_types import ExplainRequest
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepRequest, SweepResult


class StageName:
    """The stages in their order; a stage job's id is the investigation's plus '-' name."""

    CHECK = "check"  # the distro endpoint against the merge base (a sweep)
    KERNELS = "kernels"  # the bisection over prebuilt kernels
    SWEEP = "sweep"  # sweep --bisect: the series, then "bisect-N" for each change
    BISECT = "bisect"  # the bisection over commits
    EXPLAIN = "explain"
    BACKPORT = "backport"


# an investigation's KbisectStatus is this and its stage (or how it ended); its summary is
# the other and its bisection's
STATUS_HEAD = "investigation "
SUMMARY_HEAD = "investigate: "

NO_CHANGE = "no-change"  # sweep --bisect: no pair changed between two revisions


class StageState:
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"  # the stage job failed or was cancelled
    REFUSED = "refused"  # it ended, and its answer stops the chain (the check changed)


@dataclass
class Stage:
    name: str  # a StageName
    job: str  # the stage job's id
    kind: str  # its workflow type (kbisect.contract's names)
    state: str = StageState.RUNNING
    line: str = ""  # how it ended, one line


@dataclass(frozen=True)
class CrossTreeCheck:
    """`bisect --cross-tree`: the sweep of the distro endpoint against its merge base with
    upstream, made before the bisection (kbisect.jobs.cross_tree)."""

    sweep: SweepRequest
    distro: str  # the endpoint off upstream's line (full hash)
    upstream: str  # the other endpoint
    base: str  # their merge base
    side: str  # which of the job's endpoints the distro one is: "bad" or "good"

    def refusal(self, pair: SweepPair) -> str | None:
        """Why the job must not bisect from the merge base (its pair changed), or None."""
        if pair.verdict != PairWord.CHANGED:
            return None
        effect = f", {pair.effect:+.1%}" if pair.effect is not None else ""
        return (
            f"the merge base {self.base[:12]} does not behave like the distro {self.side} "
            f"{self.distro[:12]} ({pair.metric} {pair.verdict}{effect}): the distro's own "
            "commits matter, and no upstream range holds the answer; bisect the distro "
            "branch itself"
        )


@dataclass(frozen=True)
class KernelsPhase:
    """`bisect --kernels`: the first bisection is over prebuilt kernels (the request's),
    then, with each kernel's source revision known, the commits between the last good build
    and the first bad one."""

    commits: list[str]  # the kernel list's commit of each kernel, oldest first
    revs: list[str] = field(default_factory=list)  # each one's source revision, or none
    # the commits job as checked at submit (endpoints: the first and last revision); the
    # workflow puts the two builds' revisions in their place
    between: BisectRequest | None = None

    def commits_between(self, result: BisectResult) -> BisectRequest | None:
        """The commits job, once the kernels job named a build and revisions are known."""
        if self.between is None or result.status != JobStatus.FOUND or not result.culprit:
            return None
        if result.culprit not in self.commits:
            return None
        i = self.commits.index(result.culprit)
        older, newer = self.revs[i - 1], self.revs[i]
        regression = self.between.mode == Mode.REGRESSION
        good, bad = ([older], newer) if regression else ([newer], older)
        return dataclasses.replace(self.between, good=good, bad=bad)


@dataclass(frozen=True)
class SweepBisect:
    """`sweep --bisect`: the sweep first, then a bisection of each neighbouring pair that
    changed between two different source revisions, in regression mode when the newer
    kernel is worse and in fix mode when it is better."""

    sweep: SweepRequest
    revs: list[str]  # each kernel's source revision (full hashes)
    # by testcase: its bisection as checked at submit (over the series' outer revisions);
    # the workflow puts each pair's revisions and mode in
    bisections: dict[str, BisectRequest]

    def bisections_of(self, result: SweepResult) -> list[tuple[SweepPair, BisectRequest]]:
        jobs = []
        for p in result.pairs:
            old, new = self.revs[p.old], self.revs[p.new]
            if p.verdict != PairWord.CHANGED or old == new or p.testcase not in self.bisections:
                continue
            fix = p.direction == "better"
            mode = (Mode.FIX if fix else Mode.REGRESSION).value
            good, bad = ([new], old) if fix else ([old], new)
            template = self.bisections[p.testcase]
            job = dataclasses.replace(template, good=good, bad=bad, mode=mode, metric=p.metric)
            jobs.append((p, job))
        return jobs


@dataclass
class InvestigationRequest:
    # the first bisection (over kernels, or from the merge base); None: a sweep's
    bisection: BisectRequest | None = None
    sweep: SweepBisect | None = None
    check: CrossTreeCheck | None = None
    kernels: KernelsPhase | None = None
    explain: bool = False  # explain a named culprit (a timing metric, and not --no-explain)
    target: str = ""  # backport the change to this revision (a full hash), once named
    target_name: str = ""  # as the user gave it
    backport_boots: int = 0  # 0: the backport's default
    search_attributes: bool = False  # set by the client

    @property
    def testcase(self) -> str:
        if self.bisection is not None:
            return self.bisection.testcase
        return ",".join(self.sweep.sweep.testcases) if self.sweep else ""


@dataclass
class InvestigationProgress:
    status: str = "starting"
    message: str = ""
    stages: list[Stage] = field(default_factory=list)


@dataclass
class InvestigationResult:
    stages: list[Stage]
    status: str  # the last bisection's (found, ...), or "refused" / "failed"
    message: str
    culprit: str | None = None
    bisection: str = ""  # the id of the bisection that named it (the last one)
    testcase: str = ""

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)


@dataclass(frozen=True)
class BackportChangeRequest:
    repo: str
    culprit: str
    mode: str


@dataclass(frozen=True)
class BackportChange:
    """What goes to the target: in fix mode the fix; in regression mode the upstream
    commit whose `Fixes:` names the culprit, or else the culprit reverted."""

    change: str
    revert: bool


def stage_id(investigation: str, name: str) -> str:
    """A stage job's id; explain's is its bisection's explain id, as `kbisect explain`
    gives it."""
    return f"{investigation}-{name}"


def backport_id(job: str, req: BackportRequest) -> str:
    """One backport job of a bisection per target, testcase and choice of follow-ups:
    asked again, the same (its answer shown, unless --again)."""
    key = f"{req.change}:{req.target}:{req.testcase}:{req.with_followups}:{req.revert}"
    return f"{job}{BACKPORT_SUFFIX}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def explain_id(job: str) -> str:
    """The explain job of a bisection: one at a time, started again once it has ended."""
    return job + EXPLAIN_SUFFIX


def explain_request(result: BisectResult, job: str, asked: BisectRequest | None) -> ExplainRequest:
    """The explain request for bisection `job`'s culprit against its first parent, on the
    job's testcase, metric and profile, its kernels built as the bisection's were (its
    --config and --fixup; `asked`: what it was started with). The caller checks there is
    a culprit."""
    assert result.culprit is not None
    return ExplainRequest(
        repo=result.repo,
        parent=f"{result.culprit}^",  # resolved by the explain job's validating activity
        culprit=result.culprit,
        testcase=result.testcase,
        job=job,
        metric=result.metric or None,
        profile=result.profile or None,
        config=asked.config if asked else "",
        fixups=list(asked.fixups) if asked else [],
    )


def backport_request(
    result: BisectResult,
    job: str,
    change: BackportChange,
    target: tuple[str, str],
    boots: int,
    asked: BisectRequest | None,
    followups: bool = False,
) -> BackportRequest:
    """The backport request of bisection `job`'s change to a target (its full hash, and
    its name as the user gave it); `asked`: what the bisection was started with."""
    ends = {
        s.verdict: s.value for s in result.steps if s.source == "endpoint" and s.value is not None
    }
    return BackportRequest(
        repo=result.repo, change=change.change, target=target[0], target_name=target[1],
        testcase=result.testcase, revert=change.revert, with_followups=followups, job=job,
        flaky=bool(asked and asked.flaky), metric=result.metric or None,
        profile=result.profile or None, config=asked.config if asked else "", boots=boots,
        good_value=ends.get("good"), bad_value=ends.get("bad"),
    )  # fmt: skip
