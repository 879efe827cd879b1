"""What a backport job is asked and answers, beside its workflow (backport_workflow).

The change a bisection found, taken to the kernel that ships: the plan the repository
gives (already there, not affected, does not apply, or a series to measure), then the
target against the target with the series, measured as a sweep's pair (sweep_types).
Plain data only: the workflow sandbox shares this module.
"""

from dataclasses import dataclass, field
from enum import StrEnum

from kbisect.contract import DEFAULT_MIN_EFFECT, DEFAULT_QUEUE, DEFAULT_SWEEP_BOOTS, QueueKind
from kbisect.workflows.sweep_types import SweepBoot, SweepPair, SweepTestcase

BACKPORT_SIDES = ("without", "with")  # the target's kernels: 0 as it is, 1 with the series


class BackportWord(StrEnum):
    ALREADY = "already there"  # the target has it, under another hash: nothing built
    NOT_AFFECTED = "not affected"  # a revert, and the target does not carry the culprit
    CONFLICT = "does not apply"  # no series of upstream commits applies: one line says why
    VERIFIED = "verified"  # the target with the series behaves like the good side
    NOT_VERIFIED = "not verified"  # it does not, or the boots cannot tell: the figures


class NamesTarget:
    """A backport's target as the user named it (its short hash when not named)."""

    target: str
    target_name: str

    @property
    def shown_target(self) -> str:
        return self.target_name or self.target[:12]


@dataclass
class BackportRequest(NamesTarget):
    repo: str
    change: str  # full hash: the upstream commit to take (the fix), or to revert
    target: str  # full hash of the kernel that ships (a distro branch's tip)
    testcase: str
    target_name: str = ""  # as the user named it
    revert: bool = False  # no upstream fix: the culprit reverted on the target
    flaky: bool = False  # a pass/fail job's failure comes and goes (--flaky)
    with_followups: bool = False  # the commits whose Fixes: names the series', in it too
    job: str = ""  # the bisection that found the change
    metric: str | None = None
    profile: str | None = None
    config: str = ""  # the bisection's --config (a path in the shared cache)
    boots: int = DEFAULT_SWEEP_BOOTS  # of each kernel, at most
    min_effect: float = DEFAULT_MIN_EFFECT
    # The bisection's endpoints' values: "verified" wants the target like its bad side
    # and the target with the series like its good side (None: given by hand, not checked)
    good_value: float | None = None
    bad_value: float | None = None
    search_attributes: bool = False  # the cluster has kbisect's (`kbisect status` columns)
    build_queue: str = DEFAULT_QUEUE[QueueKind.BUILD]
    vm_queue: str = DEFAULT_QUEUE[QueueKind.VM]


@dataclass
class BackportPlan:
    """What the planning activity found in the repository (no build yet)."""

    word: str  # BackportWord.ALREADY, NOT_AFFECTED, CONFLICT, or "" (a series to measure)
    change: str
    subjects: dict[str, str] = field(default_factory=dict)  # of every commit named here
    found: str = ""  # ALREADY: the target's commit that is the change
    found_how: str = ""  # "ancestor", "provenance line" or "same patch"
    series: list[str] = field(default_factory=list)  # upstream commits, the change last
    prerequisites: list[str] = field(default_factory=list)
    # commits whose Fixes: names the change or a prerequisite, the target lacks them; in
    # the series with --with-followups (when they apply)
    followups: list[str] = field(default_factory=list)
    patched: str = ""  # the target with the series (cherry-picks), a commit to build
    message: str = ""
    revert: bool = False  # the series is reverted on the target (no upstream fix)


@dataclass
class BackportProgress:
    status: str  # planning, building, measuring, done, failed
    target: str = ""
    change: str = ""
    series: list[str] = field(default_factory=list)
    planned: int = 0  # boots the budget allows
    boots: list[SweepBoot] = field(default_factory=list)  # kernel 0: target, 1: patched
    message: str = ""
    pass_fail: bool = False  # its boots are good (value 1) or bad (no value, and why)


@dataclass
class BackportResult(NamesTarget):
    word: str  # BackportWord
    plan: BackportPlan
    repo: str
    target: str
    target_name: str
    testcase: str = ""
    job: str = ""  # the bisection's
    id: str = ""  # this backport job's own
    pair: SweepPair | None = None  # the target against the target with the series
    testcases: list[SweepTestcase] = field(default_factory=list)
    boots: list[SweepBoot] = field(default_factory=list)
    kernels: dict[str, str] = field(default_factory=dict)  # by BACKPORT_SIDES: the built kernel
    # a pass/fail testcase's bad boots and boots, by BACKPORT_SIDES (no pair then)
    failures: dict[str, list[int]] = field(default_factory=dict)
    message: str = ""
