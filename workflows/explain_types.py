"""What an explain job is asked and answers, beside its workflow (explain_workflow).

Why the culprit changed the metric: the culprit and its parent booted in turn under
statistics and a CPU profile, the functions its diff touches, and with --alignment the
pair rebuilt with aligned functions. Its limits are kbisect.contract's (EXPLAIN_*).
Plain data only: the workflow sandbox shares this module.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kbisect.contract import DEFAULT_QUEUE, Fixup, QueueKind
from kbisect.model import Artifact


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
    fixups: list[Fixup] = field(default_factory=list)  # the bisection's --fixup, as it built


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
