"""What a series watch's tick is asked and answers, beside its workflow (series_workflow).

A watch is a Temporal Schedule: each tick plans the new kernels of its tree or packages,
sweeps them against the last one measured (a sweep's types: sweep_types), and records the
changed pairs as alerts. Plain data only: the workflow sandbox shares this module.
"""

from dataclasses import dataclass, field

from kbisect.contract import DEFAULT_MIN_EFFECT, DEFAULT_QUEUE, DEFAULT_SWEEP_BOOTS, QueueKind
from kbisect.workflows.sweep_types import SweepPair, SweepResult


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
