"""What a sweep is asked and answers, beside its workflow (sweep_workflow).

A series of kernels measured side by side: the request, its testcases resolved once, each
boot, each neighbouring pair's verdict, the progress and the result. A series watch's tick
and a backport measure as a sweep does (series_measure), so they take these types too.
Plain data only: the workflow sandbox shares this module.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kbisect.contract import DEFAULT_MIN_EFFECT, DEFAULT_QUEUE, DEFAULT_SWEEP_BOOTS, QueueKind


class PairWord(StrEnum):
    """A sweep's verdict on one neighbouring pair."""

    CHANGED = "changed"
    SAME = "same"
    CANNOT_TELL = "cannot tell"


@dataclass
class SweepRequest:
    repo: str  # a git repository, or a kernel list's (`--kernels`)
    kernels: list[str]  # full hashes, oldest first; the same one may come twice (A/A)
    testcases: list[str]
    names: list[str] = field(default_factory=list)  # each kernel as the user named it
    metric: str | None = None  # every testcase's metric (default: each one's primary)
    profile: str | None = None
    boots: int = DEFAULT_SWEEP_BOOTS  # per kernel and testcase, for every pair
    min_effect: float = DEFAULT_MIN_EFFECT
    search_attributes: bool = True
    build_queue: str = DEFAULT_QUEUE[QueueKind.BUILD]
    vm_queue: str = DEFAULT_QUEUE[QueueKind.VM]
    trace: bool = False  # a traced boot of both kernels of each changed pair
    config: str = ""  # a kernel config kept in the shared cache (--config), for every kernel
    pass_fail_ok: bool = False  # a pass/fail testcase is taken (a backport counts failures)
    # an undecided pair's kernels go on to this many boots (0: no further than `boots`)
    max_boots: int = 0


@dataclass
class SweepTestcase:
    """A sweep's testcase, resolved once by an activity."""

    name: str
    metric: str
    unit: str
    better: str  # "higher" or "lower"
    profile: str
    repetitions: int
    test_timeout: float
    exact: bool = False  # a counter: its boots repeat
    pass_fail: bool = False  # a verdict, not a score (only a backport takes one)
    disks: bool = False  # it reads or writes disks of its own: blktrace can trace it


@dataclass
class SweepJob:
    kernels: list[str]  # full hashes, as the request's
    subjects: list[str]  # each kernel's subject (a kernel list's: the kernel's name)
    testcases: list[SweepTestcase]


# A (kernel, testcase) cell of a sweep whose testcase cannot run on that kernel: its
# error and its pairs' messages start with this, and the rest of the sweep goes on.
CANNOT_TEST = "cannot test"


def cannot_test(why: str) -> str:
    """A boot's error for a kernel the testcase cannot run on."""
    return f"{CANNOT_TEST}: {why}"


def is_cannot_test(error: str) -> bool:
    return error.startswith(CANNOT_TEST)


@dataclass
class SweepBoot:
    """One boot of a sweep, in the order they ran."""

    testcase: str
    kernel: int  # index into the series
    value: float | None  # the mean of its repetitions (None: the boot or testcase failed)
    samples: list[float] = field(default_factory=list)  # each repetition's
    host: str = ""
    error: str = ""
    userland: str = ""  # how its guest reached the host userland (TestResult.userland)


@dataclass
class SweepPair:
    testcase: str
    metric: str
    unit: str
    old: int  # indices into the series: old is new - 1
    new: int
    verdict: str  # PairWord
    direction: str = ""  # "worse" or "better" when changed
    effect: float | None = None  # new vs old as a fraction of old, with its 95% interval
    low: float | None = None
    high: float | None = None
    # No change larger than this fits the boots at 95%: the least effect this pair
    # would have shown.
    bound: float | None = None
    boots_old: int = 0
    boots_new: int = 0
    message: str = ""


@dataclass
class SweepProgress:
    status: str  # validating, building, measuring, done
    kernels: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    testcases: list[str] = field(default_factory=list)
    boots: list[SweepBoot] = field(default_factory=list)
    planned: int = 0  # boots the budget allows; a sweep stops sooner once all is decided
    message: str = ""


@dataclass
class SweepTrace:
    """A traced boot (blktrace) of one kernel of a changed pair, after the scored boots."""

    testcase: str
    kernel: int  # index into the series
    diagnostics: dict[str, Any]  # trace_run.Diagnostics.to_json(), or {"error": why}


@dataclass
class SweepResult:
    repo: str
    kernels: list[str]
    names: list[str]
    subjects: list[str]
    testcases: list[SweepTestcase]
    pairs: list[SweepPair]
    boots: list[SweepBoot]
    budget: int  # boots per kernel and testcase for every pair (--boots)
    message: str = ""
    traces: list[SweepTrace] = field(default_factory=list)  # with --trace
    max_boots: int = 0  # ... and for an undecided one, at most (0: the budget)
    min_effect: float = DEFAULT_MIN_EFFECT  # the floor asked for
