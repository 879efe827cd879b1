"""The contract between the front doors, the workflow and the workers.

Activity names, the request and result dataclasses each activity takes and returns, the
words a job uses (StrEnums: Temporal stores them as their string values, so histories
recorded with plain strings still decode), and the error-type names that travel as
Temporal failure types. Plain data only: the workflow sandbox shares this module.
"""

import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kbisect.model import Artifact

# Activity names: the workers register their implementations under these.
VALIDATE = "validate_job"
BUILD = "build_kernel"
TEST = "run_testcase"
TRACE = "trace_testcase"
EXPLAIN = "explain_testcase"  # a boot under statistics and a CPU profile (kbisect explain)
DUET = "run_duet"  # two guests at one moment on one VM host's reserved CPUs
PREPARE_VERIFY = "prepare_verify"
CLASSIFY = "classify_commits"
VALIDATE_SWEEP = "validate_sweep"
SERIES_PLAN = "series_plan"
SERIES_RECORD = "series_record"
PLAN_BACKPORT = "plan_backport"  # is the change in the target, what it needs, its commits
CHANGED_FUNCTIONS = "changed_functions"  # the functions a commit's diff touches (explain)
BACKPORT_CHANGE = "backport_change"  # what a bisection's answer takes to a target
DECIDE = "decide"  # a local activity: the job's next decision, run by its workflow worker
WORKFLOW = "BisectWorkflow"
SWEEP_WORKFLOW = "SweepWorkflow"
SERIES_WORKFLOW = "SeriesTickWorkflow"
EXPLAIN_WORKFLOW = "ExplainWorkflow"
INVESTIGATION_WORKFLOW = "InvestigationWorkflow"  # the chain of stages (a child job each)
EXPLAIN_SUFFIX = "-explain"  # a bisection's explain job is its id plus this
BACKPORT_WORKFLOW = "BackportWorkflow"
BACKPORT_SUFFIX = "-backport"  # a bisection's backport job: its id, this, the target's hash


class QueueKind(StrEnum):
    """Which kind of worker serves a task queue."""

    WORKFLOW = "workflow"  # the job's decisions (cheap)
    BUILD = "build"  # kernel builds and git: the repository, make, ccache
    VM = "vm"  # guests: QEMU or libvirt, and the built artifacts


# The task queue each activity runs on; the client's worker check reads it too.
ACTIVITY_QUEUE: dict[str, QueueKind] = {
    VALIDATE: QueueKind.BUILD,
    BUILD: QueueKind.BUILD,
    PREPARE_VERIFY: QueueKind.BUILD,
    CLASSIFY: QueueKind.BUILD,
    VALIDATE_SWEEP: QueueKind.BUILD,
    SERIES_PLAN: QueueKind.BUILD,  # the host that has the trees and apt keeps the results
    SERIES_RECORD: QueueKind.BUILD,
    PLAN_BACKPORT: QueueKind.BUILD,
    CHANGED_FUNCTIONS: QueueKind.BUILD,
    BACKPORT_CHANGE: QueueKind.BUILD,
    TEST: QueueKind.VM,
    DUET: QueueKind.VM,
    TRACE: QueueKind.VM,
    EXPLAIN: QueueKind.VM,
}
# Task queue names unless KBISECT_CONTROL_QUEUE, _BUILD_QUEUE or _VM_QUEUE say otherwise.
DEFAULT_QUEUE = {
    QueueKind.WORKFLOW: "kbisect",
    QueueKind.BUILD: "kbisect-build",
    QueueKind.VM: "kbisect-vm",
}

# Search defaults and limits (the CLI, the doors and the engine read them here).
DEFAULT_MIN_EFFECT = 0.05  # smaller differences between the endpoints are "none"
# A flaky pass/fail job's least change in failure rate, in absolute terms (--min-effect
# there): an A/A range flaking 1% must not name a culprit, a 0% -> 5% change should still
# be found.
DEFAULT_MIN_RATE_STEP = 0.03
DEFAULT_MAX_BOOTS = 96  # per endpoint before "cannot decide"
MAX_COMMIT_BOOTS = 120  # a commit's boots before its verdict is left undecided


def commit_boots_cap(max_boots: int) -> int:
    """A commit's cap under --max-boots N: MAX_COMMIT_BOOTS, or more in proportion when N
    is above the default (a hunt for a small step raises both, or the culprit's parent
    stops at 120 boots, short of what a 5% step under 15% noise needs)."""
    return max(MAX_COMMIT_BOOTS, -(-max_boots * MAX_COMMIT_BOOTS // DEFAULT_MAX_BOOTS))


# A flaky pass/fail job's caps are this many times those: a boot of its says less (at a
# 1% -> 10% change, 66 of 100 simulated jobs named the culprit within the plain caps, 50
# of 50 within four times them; benchmarks.pass_fail), and it is seconds, not a timing.
FLAKY_BOOTS_FACTOR = 4
# A sweep's boots per kernel and testcase: the gate reads them at 3, 6 and 12, so 12 is
# its last look; a 25% step under 15% noise is "changed" by 6.
DEFAULT_SWEEP_BOOTS = 12
# ... and a pair still undecided then goes on, in rounds, to this many boots a kernel
# (--max-boots): a loaded host's noise takes more boots to rule out the floor.
DEFAULT_SWEEP_MAX_BOOTS = 48
MAX_SWEEP_KERNELS = 50  # a series longer than this is a bisection, or a typo
# A job's boots per endpoint (--max-boots), or a sweep's or watch's per kernel and
# testcase (--boots): from the gate's first look to more than a week of 20 s boots.
MIN_BOOTS, MAX_BOOTS = 3, 5000
# A person's jobs running at once through a door (chat, GitLab), whatever their kind: each
# bisection, explain or backport job is builds and boots on the lab's shared hosts.
DOOR_RUNNING_JOBS = 3
# `kbisect explain`: boots of the culprit and of its parent each (a timing's boots are
# noisy; a counter or a pass/fail repeats), the false-discovery rate of the statistics it
# lists, and the least change it lists (percent of the parent's value; for a profile,
# points of the samples): a real change smaller than that explains little.
EXPLAIN_BOOTS_TIMING, EXPLAIN_BOOTS_EXACT = 5, 2
EXPLAIN_FDR = 0.05
EXPLAIN_LEAST_CHANGE, EXPLAIN_LEAST_POINTS = 10.0, 0.5
# --boots, of each side: 50 boots, each a result in the job's history, which Temporal ends
# at 50 MB (a hostile boot's result can fill its caps below to about 0.5 MB: half of it)
EXPLAIN_MAX_BOOTS = 25
# What an explain boot's guest leaves is the kernel under test's: read and kept bounded, so
# that a boot's result and the answer stay well under Temporal's 2 MB payload (a hostile
# boot's result measures about 0.5 MB at these caps: tests/testcases/test_explain_hostile).
# Each cap that drops something says so in the answer (its "left out" lines).
EXPLAIN_SCRIPT_BYTES = 64 << 20  # perf.script read (sched-pipe's 40,000 samples: 16 MB)
EXPLAIN_STATS_FILE_BYTES = 1 << 20  # a statistics file read (a guest's: a few kB)
EXPLAIN_NAME_CHARS = 80  # a statistic's or a function's name (qemu.guest_text), cut past it
EXPLAIN_SOURCE_STATS = 300  # a source's statistics (vmstat has 192; the profile's shares)
# An explain boot's folded CPU stacks kept in its result, the most sampled first, and a
# side's summed over its boots (sched-pipe's boots fold to about 3,000 stacks): as many as
# fit this many characters; the others' samples are kept as one stack, "[left out]"
EXPLAIN_STACKS, EXPLAIN_STACKS_CHARS = 1000, 150_000
EXPLAIN_CHANGES = 400  # listed changes kept in the answer, the largest first
EXPLAIN_NOTES = 20  # "left out" lines kept in the answer
# `kbisect explain --alignment`: the pair rebuilt with every function aligned to this many
# bytes, to tell the change from a shift of the code's layout (LKP's commonest false
# culprit); it is suggested when the culprit's diff touches none of the culprit's most
# sampled functions, this many of them.
EXPLAIN_ALIGNMENT = 64
EXPLAIN_TOP_FUNCTIONS = 50
# A series watch is a Temporal Schedule of this id prefix and the watch's name; it looks
# for new kernels this often unless `--every` says otherwise.
SERIES_SCHEDULE_PREFIX = "kbisect-series-"
SERIES_SWEEP_SUFFIX = "-sweep"  # a tick's sweep is the tick's id plus this: one a tick
DEFAULT_SERIES_EVERY_MINUTES = 360

# The kernel store (KBISECT_STORE): what one entry may hold, and how long a request may
# take. A distro kernel's entry is about 500 MiB with its modules; a build log tens of MiB.
STORE_FILE_MAX_BYTES = 1 << 30  # one file of an entry
STORE_ENTRY_MAX_BYTES = 4 << 30  # all of an entry's files
STORE_LISTING_MAX_BYTES = 8 << 20  # its listing (a modules folder has thousands of files)
STORE_CONNECT_SECONDS = 10
STORE_STALL_SECONDS = 30  # no byte for this long: the request is retried
STORE_REQUEST_SECONDS = 900  # one whole file
STORE_RETRIES = 2
STORE_KEY_MIN_BYTES = 16  # KBISECT_STORE_KEY_FILE's key, at least

# Search attributes the workflow keeps up to date (Keyword each).
SA_TESTCASE_NAME = "KbisectTestcase"
SA_STATUS_NAME = "KbisectStatus"
SA_CULPRIT_NAME = "KbisectCulprit"
SEARCH_ATTRIBUTE_NAMES = (SA_TESTCASE_NAME, SA_STATUS_NAME, SA_CULPRIT_NAME)

# kbisect's results pages: where the Web UI front serves them, and the application it
# mounts there (named, not imported: the front is the lowest layer's)
RESULTS_PATH = "/kbisect"
RESULTS_APP = "kbisect.doors.web.app:results_app"

LIKELIEST = 8  # a noisy job's likeliest answers its progress shows, with their probability
# Temporal refuses a workflow's or activity's summary longer than this, JSON-encoded
# (its limit.userMetadataSummarySize): a job would not start, a workflow task would fail
SUMMARY_BYTES = 400


def fit_summary(text: str, limit: int = SUMMARY_BYTES) -> str:
    """`text` cut (with "…") until its JSON encoding, as Temporal measures it, fits."""
    if len(json.dumps(text)) <= limit:
        return text
    while text and len(json.dumps(text + "…")) > limit:
        text = text[: max(0, len(text) - max(1, len(text) // 8))]
    return text + "…"


def finite(data: Any) -> Any:
    """`data` (dicts, lists and tuples of them) with each float that is not finite (a
    guest's NaN, an overflow) as None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    return data


def strict_json(data: Any, **kwargs: Any) -> str:
    """JSON that every reader takes: json.dumps writes NaN and infinities, which are not
    JSON; here they are null (finite)."""
    return json.dumps(finite(data), allow_nan=False, **kwargs)


class ErrorType(StrEnum):
    """Failure types between activities and the workflow: the type decides the handling."""

    USER = "UserError"  # bad input: fail the job at once with the message
    INFRA = "InfraError"  # the host: retried, then the job waits blocked
    JOB_FAILED = "JobFailed"  # the workflow's own failure (e.g. an endpoint does not build)


class Verdict(StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


class Mode(StrEnum):
    """Regression: the old side is good and a commit broke it. Fix: the old side is bad
    and a commit fixed it. The bisection itself only knows old and new."""

    REGRESSION = "regression"
    FIX = "fix"

    @property
    def old_word(self) -> Verdict:
        return Verdict.BAD if self == Mode.FIX else Verdict.GOOD

    @property
    def new_word(self) -> Verdict:
        return Verdict.GOOD if self == Mode.FIX else Verdict.BAD

    @property
    def culprit_word(self) -> str:
        return "fixed" if self == Mode.FIX else "first bad"

    @property
    def change_word(self) -> str:
        return "fix" if self == Mode.FIX else "first bad commit"


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


class TestStatus(StrEnum):
    __test__ = False

    OK = "ok"
    BOOT_FAILED = "boot-failed"
    TESTCASE_FAILED = "testcase-failed"


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


@dataclass
class ValidatedJob:
    """Everything the workflow needs to decide, resolved once by an activity."""

    old: list[str]  # full hashes of the old side (good in regression mode)
    new: str
    testcase: str
    primary: str
    unit: str
    better: str
    profile: str
    repetitions: int
    test_timeout: float
    old_subjects: dict[str, str] = field(default_factory=dict)  # the old side is outside the range
    pass_fail: bool = False  # each boot is good or bad (`primary` is 1 or 0), not a score
    signature: str = ""  # a pass/fail job's bad boots show this on their console
    flaky: bool = False  # a pass/fail job whose failure comes and goes
    # The range in a compact form (a release is ~15k commits, and a Temporal payload must
    # stay under 2 MB): full hashes newest first, and each one's parents as indices into
    # that list (parents outside the range left out).
    order: list[str] = field(default_factory=list)
    parent_index: list[list[int]] = field(default_factory=list)
    subjects: dict[str, str] = field(default_factory=dict)  # left empty for large ranges


@dataclass
class BuildRequest:
    repo: str
    commit: str
    testcase: str
    config: str = ""  # the job's --config (a path in the shared cache); "": tinyconfig
    explain: bool = False  # with the diagnostics fragment merged last (an explain boot's)
    aligned: bool = False  # every function aligned to EXPLAIN_ALIGNMENT bytes


@dataclass
class BuildResult:
    commit: str
    ok: bool  # False: the commit does not build (a verdict: skip), never a host failure
    artifact: Artifact | None = None
    error: str = ""
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    subject: str = ""  # for ranges too large to carry every subject
    host: str = ""  # the build host (KBISECT_HOST_NAME or its hostname); "" before it said


@dataclass
class TestRequest:
    __test__ = False

    repo: str
    commit: str
    testcase: str
    profile: str
    repetitions: int
    artifact: Artifact
    metric: str = ""  # the metric the job judges ("": a job started before it was sent)
    signature: str = ""  # a pass/fail job's: a bad boot must show it on its console


@dataclass
class TestResult:
    __test__ = False

    commit: str
    status: str  # "ok", "boot-failed" or "testcase-failed"
    values: dict[str, float] = field(default_factory=dict)  # median per metric
    samples: list[float] = field(default_factory=list)  # the primary metric's samples
    error: str = ""
    console: str = ""
    seconds: float = 0.0
    warmup: list[float] = field(default_factory=list)  # the primary's warm-up samples
    # every metric's scored samples (the job may bisect on one that is not the primary)
    metric_samples: dict[str, list[float]] = field(default_factory=dict)
    host: str = ""  # the machine that booted it ("": before hosts were sent)
    # A pass/fail boot: "" when good, else what made it bad (fails, panic, hang), and the
    # console lines that show it (the oops or panic, the failing script's last words).
    bad: str = ""
    excerpt: str = ""
    userland: str = ""  # how the guest reached the host userland: 9p, squashfs ("": none)

    def samples_of(self, metric: str) -> list[float]:
        return self.metric_samples.get(metric) or self.samples


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
    same_as: str = ""  # a same-kernel step: the commit whose kernel (and verdict) it shares


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
    boots: int = 0
    notes: list[str] = field(default_factory=list)
    # commit -> its traced boot's summary (testcases.trace_run.Diagnostics.to_json), or
    # {"error": why}; with --trace
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)
    pass_fail: bool = False  # each boot was good or bad (`metric` is 1 or 0)
    bad_boot: BadBoot | None = None  # a pass/fail job's: the culprit's first bad boot


@dataclass
class TraceRequest:
    repo: str
    commit: str
    testcase: str
    profile: str
    artifact: Artifact


@dataclass
class TraceResult:
    commit: str
    # Diagnostics.to_json(); Any, not object: Temporal's converter refuses object
    diagnostics: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # the traced boot did not run: why


@dataclass
class MarkRequest:
    commit: str  # a full hash, resolved by the client
    verdict: str  # good / bad / skip


# --- sweeps: a series of kernels measured side by side ----------------------------------
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


# --- series watches: each new kernel swept against the last one, on a schedule ---------
@dataclass
class SeriesWatch:
    """What a watch follows and how it measures; the Schedule passes it to every tick."""

    name: str
    testcases: list[str]
    tree: str = ""  # a named tree ('kbisect tree add')
    tags: str = ""  # the tree's tags matching this glob; "": its branch head
    apt: str = ""  # or Debian packages whose names match this glob
    metric: str | None = None
    profile: str | None = None
    boots: int = DEFAULT_SWEEP_BOOTS
    min_effect: float = DEFAULT_MIN_EFFECT
    search_attributes: bool = True
    build_queue: str = DEFAULT_QUEUE[QueueKind.BUILD]
    vm_queue: str = DEFAULT_QUEUE[QueueKind.VM]
    trace: bool = False  # its sweeps trace each changed pair (SweepRequest.trace)
    max_boots: int = 0  # SweepRequest.max_boots (0: a watch made before it, no further)


@dataclass
class SeriesKernel:
    name: str  # as shown: a tag, a short hash, a package
    key: str  # what makes it new: a full hash, or package=version
    spec: str  # what a sweep takes: a full hash, or a package name


@dataclass
class SeriesPlan:
    """A tick's sweep: the last kernel measured, then the new ones (series); none when
    nothing is new."""

    repo: str  # the tree, or a kernel list of the packages
    kernels: list[str]  # the sweep's commits, one per series entry
    series: list[SeriesKernel] = field(default_factory=list)
    message: str = ""


@dataclass
class SeriesAlert:
    """A changed pair of a watch's sweep; `key` is posted once, whatever restarts."""

    key: str
    watch: str
    sweep: str  # the sweep's job id
    old: str  # the kernels' names
    new: str
    pair: SweepPair


@dataclass
class SeriesRecord:
    watch: str
    sweep: str
    series: list[SeriesKernel]
    result: SweepResult


@dataclass
class SeriesTick:
    """What one tick of a watch did."""

    watch: str
    sweep: str = ""  # its sweep's job id; "" when nothing was new
    series: list[SeriesKernel] = field(default_factory=list)
    alerts: list[SeriesAlert] = field(default_factory=list)
    kept: dict[str, dict[str, int]] = field(default_factory=dict)  # kernel: testcase: boots
    message: str = ""


# --- explain: why the culprit changed the metric ----------------------------------------
@dataclass
class ExplainRequest:
    """The culprit and its parent, booted in turn on kernels with the diagnostics
    fragment, each boot under statistics and a CPU profile."""

    repo: str
    parent: str  # a revision ("<culprit>^" is resolved by the validating activity)
    culprit: str
    testcase: str
    job: str = ""  # the bisection it explains ("": a pair given by hand)
    metric: str | None = None  # default: the testcase's primary
    profile: str | None = None
    config: str = ""  # the bisection's --config (a path in the shared cache)
    boots: int = 0  # of each side; 0: EXPLAIN_BOOTS_TIMING, or _EXACT for a counter
    build_queue: str = DEFAULT_QUEUE[QueueKind.BUILD]
    vm_queue: str = DEFAULT_QUEUE[QueueKind.VM]
    alignment: bool = False  # also the job's kernels rebuilt aligned, and measured again


@dataclass
class ChangedFunctionsRequest:
    repo: str
    parent: str  # full hashes: the functions the diff between them touches
    culprit: str


class AlignmentWord(StrEnum):
    REMAINS = "remains"  # the aligned kernels show it too, the same way: the change's own
    VANISHES = "vanishes"  # they show none, and not the effect either: likely code layout
    CANNOT_TELL = "cannot tell"  # their boots fit both (more --boots), or it turns around
    UNMEASURED = "not measured"  # fewer than two boots a side ran: why, in its line


@dataclass
class AlignmentCheck:
    """The job's pair rebuilt with aligned functions and booted in turn: does the effect
    survive?"""

    verdict: AlignmentWord
    effect: dict[str, Any]  # compare.Change.to_json() of the metric on the aligned kernels
    boots: int  # of each side that ran
    line: str  # in words: "remains: -30.1% (95% CI ...)"


@dataclass
class ExplainBootRequest:
    repo: str
    commit: str
    testcase: str
    profile: str
    artifact: Artifact
    metric: str


@dataclass
class ExplainBootResult:
    commit: str
    status: str  # TestStatus
    samples: list[float] = field(default_factory=list)  # the metric's scored samples
    # each statistic's delta over the testcase, by source then name; "profile": shares of
    # the CPU samples (testcases.cpu_profile.shares)
    stats: dict[str, dict[str, float]] = field(default_factory=dict)
    stacks: dict[str, int] = field(default_factory=dict)  # folded, EXPLAIN_STACKS at most
    folder: str = ""  # on the VM host: the boot's statistics, folded stacks and console
    host: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)  # what of the guest's was left out: why


@dataclass
class ExplainProgress:
    status: str  # validating, building, booting, tracing, comparing, done, failed
    parent: str = ""
    culprit: str = ""
    testcase: str = ""
    planned: int = 0  # explain boots in all
    boots: list[str] = field(default_factory=list)  # each boot as a line, in order
    message: str = ""


@dataclass
class ExplainResult:
    # explained: statistics changed; unexplained: the effect shows, no statistic moved
    # beyond its noise; no-effect: the explain kernels do not show the job's change
    status: str
    repo: str
    testcase: str
    metric: str
    unit: str
    better: str
    parent: str
    culprit: str
    subjects: list[str]  # the parent's and the culprit's
    job: str = ""
    effect: dict[str, Any] = field(default_factory=dict)  # compare.Change.to_json()
    comparison: dict[str, Any] = field(default_factory=dict)  # compare.Comparison.to_json()
    why: list[str] = field(default_factory=list)  # the Why lines
    boots: int = 0  # of each side that ran
    failed: list[str] = field(default_factory=list)  # boots that did not run: why
    stacks: dict[str, dict[str, int]] = field(default_factory=dict)  # "parent"/"culprit"
    folders: list[str] = field(default_factory=list)  # each boot's, on its VM host
    message: str = ""
    alignment: AlignmentCheck | None = None  # asked for (--alignment)
    # a timing culprit whose diff touches none of its most sampled functions: the
    # alignment check suggested ("": not)
    suggestion: str = ""
    notes: list[str] = field(default_factory=list)  # what was left out, EXPLAIN_NOTES at most


# --- backports: the change a bisection found, taken to the kernel that ships ------------
BACKPORT_SIDES = ("without", "with")  # the target's kernels: 0 as it is, 1 with the series
# A pass/fail testcase's boots of each side, when its failure does not come and go: a
# failure that does is booted as often as a timing's budget allows (BackportRequest.boots).
PASS_FAIL_BOOTS = 3


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
