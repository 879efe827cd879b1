"""A job's record: what its decisions are made from, in the order it came.

The workflow keeps it and hands it whole to decide() (kbisect.decide.decider) for each
decision; the answer is written into the job's history, so a replay reads it and never
runs the decision code again. Facts (a boot, a failure, a person's mark, a kernel that is
another's) and the questions asked (the next round, a pick for a free host, pairs for
duets, builds ahead) are both events: the engine is a state machine, and replaying the
questions too rebuilds exactly the state the job saw. Plain data: it crosses the data
converter.
"""

from dataclasses import dataclass, field
from enum import StrEnum

from kbisect.decide.evidence import Boot
from kbisect.decide.strategy import Graph, State
from kbisect.decide.terms import EngineConfig


class Kind(StrEnum):
    # facts
    BOOT = "boot"  # commit, samples, host, exact, beside
    FAILED = "failed"  # commit: no score (it did not build, boot or run)
    MARK = "mark"  # commit, state: a person's verdict
    TWIN = "twin"  # commit makes the kernel of `of` (why)
    IDENTICAL = "identical"  # the endpoints' images are byte-identical
    BUILT_AHEAD = "built-ahead"  # commit: built before a round asked for it
    # questions
    WANTS = "wants"  # the next round's boots; none: the answer
    NEXT_FOR = "next-for"  # one boot for `host` (may be ""), `commits` in flight
    PAIRS = "pairs"  # `commits` paired for duets
    AHEAD = "ahead"  # up to `n` commits worth building now
    LOOK = "look"  # nothing asked: the view as the facts so far leave it
    JUDGE = "judge"  # a verification's boots (`runs`), as the engine's test reads them


QUESTIONS = frozenset({Kind.WANTS, Kind.NEXT_FOR, Kind.PAIRS, Kind.AHEAD, Kind.LOOK, Kind.JUDGE})


@dataclass(frozen=True)
class Run:
    """One boot of a verification kernel: its samples, and those of the boot of the
    endpoint it was made from that ran just before it (an empty list: none)."""

    samples: list[float]
    beside: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Event:
    kind: Kind
    commit: str = ""
    samples: list[float] = field(default_factory=list)
    host: str | None = None  # BOOT: its VM host; NEXT_FOR: the free one (None: not known)
    run: str = ""  # BOOT: its run folder, under its VM host's cache (console, results)
    exact: bool = False
    beside: bool = False
    of: str = ""  # TWIN: the commit whose kernel it is
    why: str = ""
    state: State | None = None  # MARK: the person's verdict
    commits: list[str] = field(default_factory=list)
    n: int = 0
    runs: list[Run] = field(default_factory=list)
    new_side: bool = False  # JUDGE: the runs' base kernel is the new endpoint

    def boot(self) -> Boot:
        return Boot(list(self.samples), self.host or "", exact=self.exact, beside=self.beside)


@dataclass(frozen=True)
class Setup:
    """What the job's engine is made of: its range and its rules."""

    job: str  # the workflow's id: the decider's cache is kept per job
    order: list[str]  # the range, newest first (Graph.order)
    parent_index: list[list[int]]  # each commit's parents in the range, as places in order
    new: str
    old: list[str]
    config: EngineConfig
    flaky: bool = False  # a flaky pass/fail job: boots are pass or fail

    @classmethod
    def of(
        cls, job: str, graph: Graph, new: str, old: list[str], config: EngineConfig, flaky: bool
    ) -> "Setup":
        at = graph.index
        parents = [[at[p] for p in graph.parents[c]] for c in graph.order]
        return cls(job, list(graph.order), parents, new, list(old), config, flaky)

    def graph(self) -> Graph:
        order = tuple(self.order)
        pairs = zip(order, self.parent_index, strict=True)
        parents = {c: tuple(order[i] for i in idx) for c, idx in pairs}
        return Graph(parents=parents, order=order)


@dataclass
class Record:
    setup: Setup
    events: list[Event] = field(default_factory=list)
