"""What a bisection is asked and answers, beside its workflow (bisect_workflow).

The request, the progress a query reads and the result; the steps (one a judged commit),
the verification of the named commit, and the requests of the activities only a bisection
calls (a duet's boots, the inert commits, the revert or backport to verify). What other
workflows share too (the validated job, builds, boots, traces) is kbisect.contract's.
Plain data only: the workflow sandbox shares this module.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kbisect.contract import (
    DEFAULT_MAX_BOOTS,
    DEFAULT_MIN_EFFECT,
    DEFAULT_MIN_RATE_STEP,
    DEFAULT_QUEUE,
    Fixup,
    Mode,
    QueueKind,
    TestRequest,
    TestResult,
)


class JobStatus(StrEnum):
    VALIDATING = "validating"
    CALIBRATING = "calibrating"
    BISECTING = "bisecting"
    VERIFYING = "verifying"
    BLOCKED = "blocked"
    FOUND = "found"
    AMBIGUOUS = "ambiguous"
    NO_DIFFERENCE = "no-difference"
    FAILED = "failed"


class StepSource(StrEnum):
    TEST = "test"
    BUILD_FAILED = "build-failed"
    BOOT_FAILED = "boot-failed"
    TESTCASE_FAILED = "testcase-failed"
    MARKED = "marked"
    ENDPOINT = "endpoint"
    SAME_KERNEL = "same-kernel"  # no build or boot: the kernel of a commit already judged


class VerificationStatus(StrEnum):
    CONFIRMED = "confirmed"
    CONTRADICTED = "contradicted"
    INCONCLUSIVE = "inconclusive"


@dataclass
class BisectRequest:
    repo: str
    good: list[str]
    bad: str
    testcase: str
    mode: str = Mode.REGRESSION.value  # or fix: bad is the old (broken) side, good the new
    profile: str | None = None
    repetitions: int | None = None
    search_attributes: bool = True  # False where the cluster has not registered ours
    verify: bool = True  # test the culprit reverted on new (or the fix applied to old)
    parallel: int = 1  # commits tested at once per round (multisection)
    metric: str | None = None  # the primary metric (default: the testcase's)
    min_effect: float = DEFAULT_MIN_EFFECT
    max_boots: int = DEFAULT_MAX_BOOTS  # per endpoint
    trace: bool = False  # trace the endpoints and the named commit (blktrace)
    tree: str | None = None  # repo is this named tree's mirror: fetched before validating
    config: str = ""  # --config: the user's kernel config, kept in the shared cache (a path)
    # a pass/fail testcase's bad boots narrowed to this console pattern ("": the testcase's)
    signature: str = ""
    # a pass/fail testcase's failure comes and goes: boots weighed by a posterior, not one
    # a commit (also when the testcase says so)
    flaky: bool = False
    min_rate_step: float = DEFAULT_MIN_RATE_STEP  # a flaky job's --min-effect
    # a noisy metric's probes each booted beside a reference at one moment (a duet), on a
    # VM worker whose --measure-cpus hold two guests
    duets: bool = False
    build_queue: str = DEFAULT_QUEUE[QueueKind.BUILD]
    vm_queue: str = DEFAULT_QUEUE[QueueKind.VM]
    # --cross-tree: the distro endpoint the user gave, not on upstream's line; the job
    # bisects upstream from its merge base, which stands in for it (jobs.cross_tree)
    cross_tree: str = ""
    # --fixup: patches applied to each commit built (the verification's too) where they
    # apply and the commit lacks them: a build fix a span of the range needs
    fixups: list[Fixup] = field(default_factory=list)


@dataclass
class DuetRequest:
    """Two boots at one moment on one VM host, each guest on its half of the reserved
    CPUs: the host's state then reaches both alike."""

    tests: list[TestRequest]


@dataclass
class DuetResult:
    results: list[TestResult]  # in the order of DuetRequest.tests


@dataclass
class Step:
    commit: str
    subject: str
    verdict: str  # good / bad / skip
    source: str  # "test", "build-failed", "boot-failed", "testcase-failed", "marked", "endpoint"
    value: float | None = None  # the primary metric
    values: dict[str, float] = field(default_factory=dict)
    position: float | None = None  # 0 = old endpoint, 1 = new endpoint
    margin: float | None = None
    note: str = ""
    build_seconds: float = 0.0
    test_seconds: float = 0.0
    index: int = -1  # place in the range's history, oldest first; -1: the old endpoint
    round: int = 0  # 0: calibration; commits tested at once share a round
    boots: int = 0  # boots the verdict took (0: before boots were counted)
    scores: list[float] = field(default_factory=list)  # each boot's primary metric
    hosts: list[str] = field(default_factory=list)  # the VM host of each boot, as scores
    # when each boot ran, as scores: the job's count of boots so far (the host's level
    # moves with it; benchmarks.noisy_labs keeps them to replay a job offline)
    boot_numbers: list[int] = field(default_factory=list)
    # each boot's repetitions of the primary metric, as scores (a boot's score is their
    # median; the engine weighs them all: a replay needs them to decide as the job did)
    repetitions: list[list[float]] = field(default_factory=list)
    confidence: float | None = None  # P(this verdict is right)
    # the job's boot numbers (as boot_numbers) of boots set aside as wild: read far off
    # the kernel's others (a disturbed host), shown but not weighed
    set_aside: list[int] = field(default_factory=list)
    # a same-kernel step: the judged commit (a step before it) whose kernel and verdict it
    # shares; "" when that kernel was never booted (the note says where its commit lies)
    same_as: str = ""
    # the evidence, as kbisect.evidence names it on the hosts' caches: each boot's run
    # folder (as scores), a failed boot's, and the kernel's build log
    runs: list[str] = field(default_factory=list)
    failed_run: str = ""
    build_log: str = ""
    fixups: list[str] = field(default_factory=list)  # the --fixup names its kernel was built with


@dataclass
class VerifyRequest:
    repo: str
    change: str  # the commit the bisection named
    onto: str  # the endpoint to revert it on (regression) or apply it to (fix)
    revert: bool


@dataclass
class ClassifyRequest:
    repo: str
    commits: list[str]
    sources: list[str]  # each endpoint build's list of compiled files (Artifact.sources)


@dataclass
class ClassifyResult:
    inert: dict[str, str]  # commit -> its first parent: it changes nothing compiled
    compiled: int = 0  # files the endpoints' builds compiled (0: unknown, nothing inert)


@dataclass
class VerifyCommit:
    commit: str | None  # None: the change does not apply there
    subject: str
    error: str = ""


@dataclass
class Verification:
    """The named commit put to the test: reverted on the new endpoint in regression mode
    (expect the old behaviour back), applied to the old endpoint in fix mode (expect the
    fix: the backport an SRU would ship)."""

    kind: str  # "revert" or "backport"
    change: str
    onto: str
    status: str  # "confirmed", "contradicted" or "inconclusive"
    message: str
    commit: str | None = None  # the commit kbisect wrote and tested
    subject: str = ""
    value: float | None = None  # the primary metric there
    values: dict[str, float] = field(default_factory=dict)
    position: float | None = None  # 0 = old endpoint, 1 = new endpoint
    boots: int = 0  # of the verification kernel


@dataclass
class StatusChange:
    status: str
    message: str = ""


STATUS_CHANGES_KEPT = 32  # a job blocked and freed again and again keeps its first ones


@dataclass
class Progress:
    # validating, calibrating, bisecting, verifying, found, ambiguous, no-difference, failed
    status: str
    repo: str = ""
    testcase: str = ""
    mode: str = Mode.REGRESSION.value
    metric: str = ""
    unit: str = ""
    old: list[str] = field(default_factory=list)
    new: str = ""
    candidates: int = 0
    steps_left: int = 0
    current: list[str] = field(default_factory=list)  # commits being built or tested
    building: dict[str, str] = field(default_factory=dict)  # builds under way: commit -> subject
    steps: list[Step] = field(default_factory=list)
    message: str = ""
    verification: Verification | None = None
    boots: int = 0  # boots so far
    last_boot: str = ""  # the latest: commit, its boot number, the score
    # the posterior now (decide.plan.Plan.likeliest): commit ("" no culprit) -> probability
    likeliest: dict[str, float] = field(default_factory=dict)
    # each status the job entered, in order, with its message then: a follower that looks
    # too late for one (validation is over in a moment) still says it
    changes: list[StatusChange] = field(default_factory=list)


@dataclass
class EndpointChange:
    """The new endpoint against the old in numbers: a metric's change as a fraction of old
    (-0.2: 20% lower) or, for pass/fail boots, the change in the share that failed (+1.0:
    none failed, then all)."""

    value: float
    low: float | None  # its 95% interval (None: unbounded, too few boots)
    high: float | None
    boots_old: int
    boots_new: int
    old: float | None = None  # the endpoints' medians (pass/fail: the share that failed)
    new: float | None = None


@dataclass
class BadBoot:
    """A pass/fail job's bad boot for the report: what went wrong and its console lines."""

    commit: str
    bad: str  # fails, panic or hang
    excerpt: str


@dataclass
class BisectResult:
    status: str  # found, ambiguous, no-difference
    mode: str
    testcase: str
    repo: str
    old: list[str]
    new: str
    culprit: str | None
    candidates: list[str]
    steps: list[Step]
    message: str
    subjects: dict[str, str] = field(default_factory=dict)
    metric: str = ""  # the primary metric the verdicts were made on, and its unit
    unit: str = ""
    verification: Verification | None = None
    profile: str = ""  # what the testcase ran with, for reproducing it
    repetitions: int = 0
    confidence: float | None = None  # P(every verdict that named the culprit is right)
    effect: str = ""  # new vs old endpoint, with its 95% interval
    change: EndpointChange | None = None  # ... in numbers
    boots: int = 0
    notes: list[str] = field(default_factory=list)
    # commit -> its traced boot's summary (testcases.trace_run.Diagnostics.to_json), or
    # {"error": why}; with --trace
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)
    pass_fail: bool = False  # each boot was good or bad (`metric` is 1 or 0)
    bad_boot: BadBoot | None = None  # a pass/fail job's: the culprit's first bad boot


@dataclass
class MarkRequest:
    commit: str  # a full hash, resolved by the client
    verdict: str  # good / bad / skip
