"""How pass/fail boots whose failure comes and goes are weighed: the engine's likelihood
for a flaky job. Pure.

Old-like kernels fail at the rate r_old (often 0, sometimes a flake rate of a few
percent), new-like ones at r_new. Both rates are learned as a metric's levels are: from
the endpoints' boots and from every commit whose side is settled, refitted every round,
each a Beta posterior from Jeffreys' Beta(1/2, 1/2) prior (never exactly 0 or 1: one
unexpected boot must not rule a hypothesis out). A commit with k bad boots of n weighs
the Beta-binomial likelihoods of k under the two sides' posteriors:

    llr = log BB(k, n | new side) - log BB(k, n | old side)

so a rate learned from few boots counts for less than one learned from many.

The least change that counts (RATE_FACTOR, and the job's min_rate_step: --min-effect,
3 points by default): a regression at least doubles the failure rate and adds 3 points to
it, a fix at least halves it and takes 3 points off. r_new is kept at least that far from
r_old, so an A/A range's new endpoint, whose own boots set r_new, leans "no culprit", and
a flaky A/A range (30% at both ends) can end "no difference" within the caps: a change
from 30% to 33% could not. No trend: a failure rate does not drift with the host's speed.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbisect.contract import Mode
from kbisect.decide.endpoints import Effect, EndpointVerdict, Gate
from kbisect.decide.evidence import Model
from kbisect.decide.strategy import State
from kbisect.decide.terms import Decision

if TYPE_CHECKING:
    from kbisect.decide.engine import Engine

PRIOR = 0.5  # Beta(1/2, 1/2): Jeffreys' prior on each side's failure rate
# The least change in failure rate that counts: RATE_FACTOR times the rate (a regression;
# divided by it for a fix) and the config's min_rate_step in absolute terms.
RATE_FACTOR = 2.0


@dataclass(frozen=True)
class RateFit:
    """Each side's failure rate this round, and the boots behind it."""

    old: float
    new: float
    n_old: int
    n_new: int
    fails_old: int
    fails_new: int

    def llr(self, fails: int, boots: int) -> float:
        """log P(these boots | new-like) / P(them | old-like), each side's rate as
        uncertain as the boots it was learned from."""
        return _bb(fails, boots, self.new, self.n_new) - _bb(fails, boots, self.old, self.n_old)


def _bb(k: int, n: int, mean: float, m: int) -> float:
    """log P(k bad of n | a rate with this mean, learned from m boots): Beta-binomial.
    With point rates, sides learned from a dozen boots were too sure: a side fitted at
    55% for a true 30% took five good boots for "old", and named wrong commits in 3 of
    100 simulated jobs (benchmarks.pass_fail, 1% -> 30%); with the rates' spread, none."""
    a, b = mean * (m + 2 * PRIOR), (1 - mean) * (m + 2 * PRIOR)
    return (
        math.lgamma(a + k)
        + math.lgamma(b + n - k)
        - math.lgamma(a + b + n)
        - math.lgamma(a)
        - math.lgamma(b)
        + math.lgamma(a + b)
    )


def fails(boots: list[float]) -> int:
    """Bad boots among a commit's pass/fail scores (1 passed, 0 failed)."""
    return sum(1 for v in boots if v <= 0)


def _entropy(p: float) -> float:
    return -sum(x * math.log(x) for x in (p, 1 - p) if x > 0)


def information(q: float, r_old: float, r_new: float) -> float:
    """What one pass/fail boot tells (nats) about whether a commit is new-like, when it is
    with probability q: the mutual information of the boot and the commit's side."""
    if q <= 0 or q >= 1:
        return 0.0
    mixed = _entropy(q * r_new + (1 - q) * r_old)
    return max(0.0, mixed - q * _entropy(r_new) - (1 - q) * _entropy(r_old))


def information_of(q: float, r_old: float, r_new: float, n: int) -> float:
    """What n pass/fail boots of one commit tell together (nats): the mutual information
    of their count of failures and the commit's side."""
    if q <= 0 or q >= 1 or n <= 0:
        return 0.0

    def pmf(r: float, k: int) -> float:
        return math.comb(n, k) * r**k * (1 - r) ** (n - k)

    told = 0.0
    for k in range(n + 1):
        new, old = pmf(r_new, k), pmf(r_old, k)
        mixed = q * new + (1 - q) * old
        told += sum(w * p * math.log(p / mixed) for w, p in ((q, new), (1 - q, old)) if p > 0)
    return max(0.0, told)


class Rates:
    """A flaky pass/fail job's likelihood: Bernoulli boots, Beta-binomial commits."""

    spread = 0.0  # a pass/fail boot is one value: nothing strays within it

    def __init__(self, engine: "Engine") -> None:
        self.e = engine
        self.rates: RateFit | None = None

    # --- weighing ---------------------------------------------------------------------
    def refresh(self) -> None:
        e = self.e
        e.log = False
        counts = {c: [b.samples[0] for b in bs] for c, bs in e.boots.items() if bs}
        rates = self._fit(counts, e.sides())
        self.rates = rates
        e.posterior.update(
            {c: rates.llr(fails(v), len(v)) for c, v in counts.items() if c != e.old_end}
        )

    def _fit(self, counts: dict[str, list[float]], sides: dict[str, bool]) -> RateFit:
        n = {False: 0, True: 0}
        k = {False: 0, True: 0}
        for commit, side in sides.items():
            values = counts.get(commit, [])
            n[side] += len(values)
            k[side] += fails(values)
        old = (k[False] + PRIOR) / (n[False] + 2 * PRIOR)
        new = (k[True] + PRIOR) / (n[True] + 2 * PRIOR)
        # A regression makes failures more likely; a fix, less.
        edge = PRIOR / (n[True] + 2 * PRIOR)  # the new side's rate stays off 0 and 1
        cfg = self.e.config
        if cfg.mode == Mode.REGRESSION.value:
            least = max(old + cfg.min_rate_step, old * RATE_FACTOR)
            new = max(new, min(least, 1 - edge))
        else:
            most = min(old - cfg.min_rate_step, old / RATE_FACTOR)
            new = min(new, max(most, edge))
        return RateFit(old, new, n[False], n[True], k[False], k[True])

    def level_bound(self, commit: str) -> bool:
        return False  # no level: a failure rate does not drift with the host's speed

    def ready(self, pairs: int) -> bool:
        return True  # no level to fit: the endpoints' first blocks are enough

    def ruled_out(self) -> bool:
        return True  # the rates' floor is in the likelihood itself (RATE_FACTOR)

    # --- choosing ---------------------------------------------------------------------
    def worth(self) -> Callable[[float], float] | None:
        """What one boot of a commit new-like with probability q tells."""
        r = self.rates
        if r is None:
            return None
        return lambda q: information(q, r.old, r.new)

    def told(self, q: float, running: int) -> float:
        """What one more boot of a commit tells when `running` of its boots are in flight."""
        r = self.rates
        assert r is not None, "choosing before the rates"
        return information_of(q, r.old, r.new, running + 1) - information_of(
            q, r.old, r.new, running
        )

    # --- the endpoints' difference ----------------------------------------------------
    def effect(self) -> Effect:
        """The failure rate's change, new less old, with a 95% interval (Wald's, on the
        rates behind the models)."""
        r = self.rates
        if r is None:
            return Effect(0.0, 0.0, 0.0, 1.0, 0, 0)
        diff = r.new - r.old
        se = math.sqrt(
            r.old * (1 - r.old) / max(r.n_old, 1) + r.new * (1 - r.new) / max(r.n_new, 1)
        )
        return Effect(diff, diff - 1.96 * se, diff + 1.96 * se, 0.0, r.n_old, r.n_new)

    def no_difference(self, p_none: float) -> EndpointVerdict:
        e = self.e
        effect = self.effect()
        words = self.words()
        if self._other_way():
            other = Mode.FIX if e.config.mode == Mode.REGRESSION.value else Mode.REGRESSION
            return EndpointVerdict(
                Gate.WRONG_WAY,
                effect,
                f"{words}: the change goes the other way; to bisect it, use --mode {other}",
            )
        if p_none >= e.level:
            return EndpointVerdict(
                Gate.SAME, effect, f"no difference: {words}, P(no culprit) {p_none:.1%}"
            )
        return EndpointVerdict(
            Gate.UNDECIDED,
            effect,
            f"cannot decide after {effect.boots_old + effect.boots_new} endpoint boots: "
            f"{words}, P(no culprit) {p_none:.0%}",
        )

    def _other_way(self) -> bool:
        """Whether the new endpoint clearly fails less often (regression mode; more often
        in fix mode) than the old: 95% Wald interval of the difference."""
        e = self.e
        counts = []
        for c in (e.old_end, e.new_end):
            values = self.scores(c)
            counts.append((fails(values) + PRIOR) / (len(values) + 2 * PRIOR))
            counts.append(float(len(values)))
        p_old, n_old, p_new, n_new = counts
        diff = p_new - p_old
        se = math.sqrt(p_old * (1 - p_old) / max(n_old, 1) + p_new * (1 - p_new) / max(n_new, 1))
        if e.config.mode == Mode.REGRESSION.value:
            return diff + 1.96 * se < 0
        return diff - 1.96 * se > 0

    def words(self) -> str:
        """The endpoints' bad boots, e.g. 'the new endpoint failed 9 of 30 boots, the
        old one 0 of 30'."""
        e = self.e
        new, old = self.scores(e.new_end), self.scores(e.old_end)
        return (
            f"the new endpoint failed {fails(new)} of {len(new)} boots, "
            f"the old one {fails(old)} of {len(old)}"
        )

    # --- reading ----------------------------------------------------------------------
    def model(self) -> Model:
        """Pass rates as the two sides' means (a verification's position between them)."""
        r = self.rates
        if r is None:
            return self.e.endpoint_model()
        spread = math.sqrt(max(r.old * (1 - r.old), r.new * (1 - r.new)))
        return Model(1 - r.old, 1 - r.new, spread, r.n_old, r.n_new)

    def scores(self, commit: str) -> list[float]:
        return [b.samples[0] for b in self.e.boots.get(commit, [])]

    def certainty(self, commit: str) -> float:
        q = self.e.posterior.p_new(commit)
        return max(q, 1 - q)

    def level_adjusted(self, scores: list[float]) -> list[float]:
        return list(scores)

    def judge(self, scores: list[float]) -> Decision | None:
        """Wald's test on a kernel outside the range (the culprit reverted): its bad
        boots weighed between the two rates, until the strong threshold or the cap."""
        r = self.rates
        if not scores or r is None:
            return None
        n = len(scores)
        llr = r.llr(fails(scores), n)
        if abs(llr) >= self.e.strong:
            return Decision(State.NEW if llr > 0 else State.OLD, n, llr, firm=True)
        if n < self.e.config.max_commit_boots:
            return None
        return Decision(State.SKIP, n, llr, f"after {n} boots, {fails(scores)} bad")

    def pairs_verification(self) -> bool:
        return False

    def set_aside(self) -> dict[str, list[int]]:
        return {}  # a pass or a fail is never far off: nothing is set aside

    def unfit(self) -> str:
        return ""

    def paired(self, score: float, beside: float, new_side: bool) -> float:
        return score

    def notes(self) -> list[str]:
        r = self.rates
        if r is None:
            return []
        return [
            f"failure rates: old-like {r.fails_old} of {r.n_old} boots ({r.old:.1%} with the "
            f"prior), new-like {r.fails_new} of {r.n_new} ({r.new:.1%})",
            self.words(),
        ]
