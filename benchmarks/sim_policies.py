"""Bisection policies driven by simulated boots: kbisect's engine and three baselines.

Each policy gets the history, a `boot(commit) -> repetitions` function and returns what it
named, with the builds (distinct commits booted, endpoints included) and boots it spent.
The baselines follow their published rules as closely as a simulator allows:
- today: kbisect before the engine (1 boot of 3 repetitions per commit, the endpoint
  gate `Calibration.differs()`, a retest of 6 when unsure);
- lkp: Intel LKP's rule: 3 boots per commit, changed when the ranges do not overlap and
  the means differ by 5% or more, and the run is stable (stddev under 20% of the mean);
- syzbot: a fixed 10 boots per commit, endpoints included; Welch's t-test at 5% on the
  endpoints; each commit goes to the endpoint whose mean is nearer.
"""

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from kbisect.workflows.engine import Engine, EngineConfig
from kbisect.workflows.evidence import Boot
from kbisect.workflows.posterior_engine import PosteriorEngine
from kbisect.workflows.stats import t_sf2
from kbisect.workflows.strategy import Graph, Search, State, next_commits, outcome

BootFn = Callable[[str], list[float]]


# The pre-engine rule the "today" baseline follows (it was kbisect's before the engine):
# a commit's median placed on the line from the old endpoint's median (0) to the new one's
# (1), skipped within AMBIGUOUS of the middle; the endpoints must differ by 10% and by 4
# times the repetitions' spread.
MIN_SEPARATION, MIN_RELATIVE_CHANGE, AMBIGUOUS = 4.0, 0.10, 0.2


@dataclass(frozen=True)
class Calibration:
    old: list[float]
    new: list[float]

    def differs(self) -> bool:
        a, b = statistics.median(self.old), statistics.median(self.new)
        noise = max(max(s) - min(s) for s in (self.old, self.new))
        gap = abs(b - a)
        return gap / max(abs(a), abs(b), 1e-9) >= MIN_RELATIVE_CHANGE and gap >= (
            MIN_SEPARATION * noise
        )

    def classify(self, value: float) -> State:
        a, b = statistics.median(self.old), statistics.median(self.new)
        position = (value - a) / (b - a) if b != a else 0.5
        if abs(position - 0.5) < AMBIGUOUS:
            return State.SKIP
        return State.OLD if position < 0.5 else State.NEW


@dataclass
class Outcome:
    found: str | None
    builds: int
    boots: int
    confidence: float = 0.0


class Counter:
    """Wraps the boot function: counts boots and distinct commits booted."""

    def __init__(self, boot: BootFn) -> None:
        self._boot, self.boots, self.built = boot, 0, set[str]()

    def __call__(self, commit: str) -> list[float]:
        self.boots += 1
        self.built.add(commit)
        return self._boot(commit)

    def many(self, commit: str, n: int) -> list[float]:
        """Boot medians of n boots."""
        return [statistics.median(self(commit)) for _ in range(n)]


def kbisect(graph: Graph, old: str, boot: BootFn) -> Outcome:
    """The posterior engine, as a job started today runs it."""
    return _drive(
        PosteriorEngine(graph, new=graph.order[0], old=[old], config=EngineConfig()), boot
    )


def v2(graph: Graph, old: str, boot: BootFn) -> Outcome:
    """The engine before the posterior: a sequential test per commit, controls."""
    config = EngineConfig.checked(follow_shifts=True, regate=True)
    return _drive(Engine(graph, new=graph.order[0], old=[old], config=config), boot)


def _drive(engine: Engine, boot: BootFn) -> Outcome:
    count = Counter(boot)
    for commit, parent in getattr(boot, "inert", {}).items():
        engine.same_kernel(commit, parent, "touches no file the config compiles")
    while commits := engine.wants():
        for c in commits:
            engine.observe(c, Boot(count(c)))
    r = engine.result()
    found = r.culprit if r.status == "found" else None
    return Outcome(found, len(count.built), count.boots, r.confidence)


def _search(graph: Graph, old: str, verdict: Callable[[str], State]) -> str | None:
    search = Search(graph=graph, new=graph.order[0], old={old})
    while nxt := next_commits(search):
        search.mark(nxt[0], verdict(nxt[0]))
    out = outcome(search)
    return out.culprit if out else None


def today(graph: Graph, old: str, boot: BootFn) -> Outcome:
    count = Counter(boot)
    cal = Calibration(old=count(old), new=count(graph.order[0]))
    if not cal.differs():
        return Outcome(None, len(count.built), count.boots)

    def verdict(c: str) -> State:
        first = count(c)
        state = cal.classify(statistics.median(first))
        if state == State.SKIP:  # the retest: 6 repetitions, two boots' worth
            state = cal.classify(statistics.median(first + count(c) + count(c)))
        return state

    return Outcome(_search(graph, old, verdict), len(count.built), count.boots)


def _lkp_changed(base: list[float], other: list[float]) -> bool:
    ratio = statistics.fmean(other) / statistics.fmean(base)
    apart = max(other) < min(base) or min(other) > max(base)
    stable = all(statistics.stdev(x) < 0.2 * statistics.fmean(x) for x in (base, other))
    return apart and abs(ratio - 1) >= 0.05 and stable


def lkp(graph: Graph, old: str, boot: BootFn) -> Outcome:
    count = Counter(boot)
    base = count.many(old, 3)
    if not _lkp_changed(base, count.many(graph.order[0], 3)):
        return Outcome(None, len(count.built), count.boots)
    found = _search(
        graph, old, lambda c: State.NEW if _lkp_changed(base, count.many(c, 3)) else State.OLD
    )
    return Outcome(found, len(count.built), count.boots)


def _welch_p(a: list[float], b: list[float]) -> float:
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0 if statistics.fmean(a) != statistics.fmean(b) else 1.0
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return t_sf2((statistics.fmean(a) - statistics.fmean(b)) / (va + vb) ** 0.5, df)


def syzbot(graph: Graph, old: str, boot: BootFn) -> Outcome:
    count = Counter(boot)
    a, b = count.many(old, 10), count.many(graph.order[0], 10)
    if _welch_p(a, b) >= 0.05:
        return Outcome(None, len(count.built), count.boots)
    ma, mb = statistics.fmean(a), statistics.fmean(b)

    def verdict(c: str) -> State:
        m = statistics.fmean(count.many(c, 10))
        return State.OLD if abs(m - ma) <= abs(m - mb) else State.NEW

    return Outcome(_search(graph, old, verdict), len(count.built), count.boots)


POLICIES: dict[str, Callable[[Graph, str, BootFn], Outcome]] = {
    "kbisect": kbisect,
    "v2": v2,
    "today": today,
    "lkp": lkp,
    "syzbot": syzbot,
}
