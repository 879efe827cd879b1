"""The contract between the front doors, the workflows and the workers: what they share.

Activity and workflow names, the task queue each activity runs on, the defaults and
limits, the words a job uses (StrEnums: Temporal stores them as their string values, so
histories recorded with plain strings still decode), the error-type names that travel as
Temporal failure types, and the requests and results more than one workflow passes to
its activities (the validated job, a build, a boot, a traced boot). What one workflow is
asked and answers is beside it: kbisect.workflows.bisect_types, sweep_types,
series_types, explain_types, backport_types and investigation_types. Plain data only:
the workflow sandbox shares this module.
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
# A backport's pass/fail testcase: its boots of each side, when its failure does not come
# and go (a failure that does is booted as often as a timing's budget allows).
PASS_FAIL_BOOTS = 3
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
# The job's one-line summary, set as it starts where the server has it: the Web UI's
# workflow list shows it as a column (docs/usage.md). A server kbisect starts has all four.
SA_SUMMARY_NAME = "KbisectSummary"
SERVER_ATTRIBUTE_NAMES = (*SEARCH_ATTRIBUTE_NAMES, SA_SUMMARY_NAME)

# kbisect's results pages: where the Web UI front serves them, and the application it
# mounts there (named, not imported: the front is the lowest layer's)
RESULTS_PATH = "/kbisect"
RESULTS_APP = "kbisect.doors.web.app:results_app"

LIKELIEST = 8  # a noisy job's likeliest answers its progress shows, with their probability
# Temporal refuses a workflow's or activity's summary longer than this, JSON-encoded
# (its limit.userMetadataSummarySize): a job would not start, a workflow task would fail
SUMMARY_BYTES = 400
GC_DAYS = 14.0  # `kbisect gc`'s and the workers' timer's age: what is older goes
# A console, result file or build log the results pages serve: its last this many bytes
EVIDENCE_FILE_BYTES = 4 << 20


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


class TestStatus(StrEnum):
    __test__ = False

    OK = "ok"
    BOOT_FAILED = "boot-failed"
    TESTCASE_FAILED = "testcase-failed"


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


@dataclass(frozen=True)
class Fixup:
    """A patch a job applies to each commit it builds where it applies (--fixup): the
    user's name for it, and where it is kept in the shared cache (builders.patched_commit)."""

    name: str
    path: str


@dataclass
class BuildRequest:
    repo: str
    commit: str
    testcase: str
    config: str = ""  # the job's --config (a path in the shared cache); "": tinyconfig
    explain: bool = False  # with the diagnostics fragment merged last (an explain boot's)
    aligned: bool = False  # every function aligned to EXPLAIN_ALIGNMENT bytes
    fixups: list[Fixup] = field(default_factory=list)  # applied where they apply, in order


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
    fixups: list[str] = field(default_factory=list)  # the names of the fixups built with


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
