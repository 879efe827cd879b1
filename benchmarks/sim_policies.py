"""Bisection policies driven by simulated boots: kbisect's engine and five baselines.

Each policy gets the history, a `boot(commit) -> repetitions` function and returns what it
named, with the builds (distinct commits booted, endpoints included) and boots it spent.
The baselines follow their published rules as closely as a simulator allows:
- today: kbisect before the engine (1 boot of 3 repetitions per commit, the endpoint
  gate `Calibration.differs()`, a retest of 6 when unsure);
- lkp: Intel LKP's rule: 3 boots per commit, changed when the ranges do not overlap and
  the means differ by 5% or more, and the run is stable (stddev under 20% of the mean);
- syzbot: a fixed 10 boots per commit, endpoints included; Welch's t-test at 5% on the
  endpoints; each commit goes to the endpoint whose mean is nearer;
- pinpoint: Chromium Pinpoint's comparison (Kolmogorov-Smirnov and Mann-Whitney U on
  samples grown 10, 20, 40, 80, 160) of each commit against both endpoints;
- facf: Henderson et al.'s flake-aware culprit finding (ICST 2023) on boots binarized at
  a threshold learned once from the endpoints.
"""

import itertools
import math
import statistics
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.contract import DEFAULT_MAX_BOOTS, DEFAULT_MIN_EFFECT, commit_boots_cap
from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.posterior import NONE, Posterior
from kbisect.decide.stats import t_sf2
from kbisect.decide.strategy import Graph, Search, State, next_commits, outcome
from kbisect.decide.terms import EngineConfig

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
    moments: int = 0  # boot times the host was busy (duets: two boots at once); 0: boots


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
    """The posterior engine, as a job started today runs it; in duets where the machine
    boots two guests at once (a host with room for both: accuracy.Cell.duet)."""
    least = getattr(boot, "min_effect", DEFAULT_MIN_EFFECT)
    cap = getattr(boot, "max_boots", DEFAULT_MAX_BOOTS)
    config = EngineConfig(
        min_effect=least, max_endpoint_boots=cap, max_commit_boots=commit_boots_cap(cap)
    )
    engine = Engine(graph, new=graph.order[0], old=[old], config=config)
    if getattr(boot, "duet", 0.0):
        return _drive_duets(engine, boot)
    return _drive(engine, boot)


def _drive_duets(engine: Engine, machine: Any) -> Outcome:
    """The workflow's duets (Engine.duet_pairs), each pair at one moment."""
    _tell_inert(engine, machine)
    boots, moments, built = 0, 0, set[str]()
    while commits := engine.wants():
        for pair in engine.duet_pairs(commits):
            for i, (c, samples) in enumerate(zip(pair, machine.together(pair), strict=True)):
                engine.observe(c, Boot(samples, beside=i > 0))
                built.add(c)
            boots, moments = boots + len(pair), moments + 1
    return _outcome(engine, len(built), boots, moments)


def _drive(engine: Engine, boot: BootFn) -> Outcome:
    count = Counter(boot)
    _tell_inert(engine, boot)
    while commits := engine.wants():
        for c in commits:
            engine.observe(c, Boot(count(c)))
    return _outcome(engine, len(count.built), count.boots)


def _tell_inert(engine: Engine, machine: object) -> None:
    """The commits the machine's config does not compile, as a build's files tell them."""
    for commit, parent in getattr(machine, "inert", {}).items():
        engine.same_kernel(commit, parent, "touches no file the config compiles")


def _outcome(engine: Engine, builds: int, boots: int, moments: int = 0) -> Outcome:
    r = engine.result()
    found = r.culprit if r.status == "found" else None
    return Outcome(found, builds, boots, r.confidence, moments)


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


# Pinpoint (catapult dashboard/pinpoint/models/compare): attempts per commit grow by rounds;
# p is the smaller of the two tests' (KS catches a change of spread, MWU one of a discrete
# metric), "different" at or under LOW, "same" over the round's HIGH, else more attempts.
PINPOINT_ROUNDS = (10, 20, 40, 80, 160)  # cumulative attempts per commit
PINPOINT_LOW = 0.01
PINPOINT_HIGH = {10: 0.5, 20: 0.3, 40: 0.2, 80: 0.15, 160: 0.1}
DIFFERENT, SAME, UNKNOWN = "different", "same", "unknown"


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) of the values, and the ties' sum of t^3 - t."""
    ranks, ties = [0.0] * len(values), 0.0
    order = sorted(range(len(values)), key=values.__getitem__)
    start = 0
    for _, group in itertools.groupby(order, key=values.__getitem__):
        size = len(list(group))
        for i in order[start : start + size]:
            ranks[i] = start + (size + 1) / 2
        ties += size**3 - size
        start += size
    return ranks, ties


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of the Mann-Whitney U test: normal approximation, tie-corrected, with
    continuity correction."""
    n1, n2 = len(a), len(b)
    n = n1 + n2
    ranks, ties = _ranks([*a, *b])
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0  # every value the same
    z = max(0.0, abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2))


def _kolmogorov_sf(lam: float) -> float:
    """P(K > lam) of Kolmogorov's distribution, each series where it converges fast."""
    if lam <= 0:
        return 1.0
    if lam < 1.18:
        y = math.exp(-(math.pi**2) / (8 * lam * lam))
        cdf = math.sqrt(2 * math.pi) / lam * (y + y**9 + y**25 + y**49)
        return min(1.0, max(0.0, 1 - cdf))
    x = math.exp(-2 * lam * lam)
    return min(1.0, max(0.0, 2 * (x - x**4 + x**9 - x**16)))


def ks_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided asymptotic p of the two-sample Kolmogorov-Smirnov test (with Stephens'
    small-sample correction, as Numerical Recipes gives it)."""
    xs, ys = sorted(a), sorted(b)
    n, m = len(xs), len(ys)
    d = max(abs(bisect_right(xs, v) / n - bisect_right(ys, v) / m) for v in xs + ys)
    en = math.sqrt(n * m / (n + m))
    return _kolmogorov_sf((en + 0.12 + 0.11 / en) * d)


def _pinpoint_compare(a: Sequence[float], b: Sequence[float], attempts: int) -> str:
    p = min(ks_p(a, b), mann_whitney_p(a, b))
    if p <= PINPOINT_LOW:
        return DIFFERENT
    return UNKNOWN if p <= PINPOINT_HIGH[attempts] else SAME


def pinpoint(graph: Graph, old: str, boot: BootFn) -> Outcome:
    count = Counter(boot)
    new = graph.order[0]
    samples: defaultdict[str, list[float]] = defaultdict(list)

    def upto(commit: str, n: int) -> list[float]:
        """The commit's boot medians, booted up to n of them."""
        have = samples[commit]
        have += count.many(commit, n - len(have))
        return have

    gate = UNKNOWN
    for n in PINPOINT_ROUNDS:
        if (gate := _pinpoint_compare(upto(old, n), upto(new, n), n)) != UNKNOWN:
            break
    if gate != DIFFERENT:
        return Outcome(None, len(count.built), count.boots)

    def verdict(c: str) -> State:
        for n in PINPOINT_ROUNDS:
            probe = upto(c, n)
            from_old = _pinpoint_compare(upto(old, n), probe, n) == DIFFERENT
            from_new = _pinpoint_compare(upto(new, n), probe, n) == DIFFERENT
            if from_old != from_new:  # unlike one endpoint, not shown unlike the other
                return State.NEW if from_old else State.OLD
        return State.SKIP

    return Outcome(_search(graph, old, verdict), len(count.built), count.boots)


# Flake-aware culprit finding: each boot is pass/fail against a threshold and flake rates
# learned once from the endpoints' first boots, which are kept out of the evidence (a
# threshold fitted to them would count them twice).
FACF_LEARN = 6  # boots of each endpoint
FACF_RATES = (0.02, 0.98)  # the flake rates' clamp: 6 boots cannot show a rate of 0
FACF_LEVEL = 0.995  # the top hypothesis's mass that ends the job
FACF_CAP = 2000  # boots
FACF_NONE_PRIOR = 0.5


def _clamp(rate: float) -> float:
    return min(FACF_RATES[1], max(FACF_RATES[0], rate))


def facf(graph: Graph, old: str, boot: BootFn) -> Outcome:
    count = Counter(boot)
    new = graph.order[0]
    learn_old, learn_new = count.many(old, FACF_LEARN), count.many(new, FACF_LEARN)
    a, b = statistics.median(learn_old), statistics.median(learn_new)
    middle = (a + b) / 2

    def fails(value: float) -> bool:
        """Reads as the new endpoint: on its side of the threshold."""
        return (value - middle) * (b - a) > 0

    # An old-like boot fails with f_old; a new-like one passes with f_new: learned from
    # boots the threshold was not fitted to (those would always look apart).
    held_old, held_new = count.many(old, FACF_LEARN), count.many(new, FACF_LEARN)
    f_old = _clamp(sum(map(fails, held_old)) / FACF_LEARN)
    f_new = _clamp(sum(not fails(v) for v in held_new) / FACF_LEARN)
    llr_fail, llr_pass = math.log((1 - f_new) / f_old), math.log(f_new / (1 - f_old))
    posterior = Posterior(graph, none_prior=FACF_NONE_PRIOR)
    llr: defaultdict[str, float] = defaultdict(float)
    llr[new] = sum(llr_fail if fails(v) else llr_pass for v in held_new)
    posterior.update(llr)
    while (top := posterior.top()).p < FACF_LEVEL and count.boots < FACF_CAP:
        (commit,) = posterior.quantiles(1, graph.order)  # where P(new-like) crosses 1/2
        llr[commit] += llr_fail if fails(statistics.median(count(commit))) else llr_pass
        posterior.update(llr)
    # At the cap, the top hypothesis stands when it holds the majority.
    found = top.commit if top.commit != NONE and top.p >= 0.5 else None
    return Outcome(found, len(count.built), count.boots, top.p if found else 0.0)


POLICIES: dict[str, Callable[[Graph, str, BootFn], Outcome]] = {
    "kbisect": kbisect,
    "today": today,
    "lkp": lkp,
    "syzbot": syzbot,
    "pinpoint": pinpoint,
    "facf": facf,
}
