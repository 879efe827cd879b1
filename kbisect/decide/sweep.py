"""A sweep's decisions: which boots come next, and what each neighbouring pair says.

Pure and deterministic (the workflow sandbox shares it). Boots go in rounds: a round boots
each kernel still needed once per testcase, in a random order, so a host whose level
drifts spreads the drift over the whole series instead of reading as a step between two
neighbours (randomized interleaved trials). Each neighbouring pair goes to the engine's
gate (endpoints.compare_scores) at its looks, 3, 6, 12... boots each, until the budget;
the gate's ALPHA is split over the pairs, so a long series of equal kernels raises no
more false alerts than one pair does.
"""

import math
import random
from dataclasses import dataclass, field
from statistics import NormalDist

from kbisect.decide.endpoints import (
    ALPHA,
    LOOKS,
    EndpointVerdict,
    Gate,
    Pooled,
    compare_scores,
    next_look,
    noise_free,
)
from kbisect.decide.evidence import Boot, log_scale, mean_score, within_spread
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepTestcase

# A kernel whose first boots all fail this many times is given up on (its pairs cannot
# tell); fewer failures are retried within the budget.
MAX_FAILURES_IN_A_ROW = 3
# The false-alert rate the looks past a sweep's budget may spend in all (--max-boots): half
# of the budget's own.
EXTENSION_ALPHA = ALPHA / 2
CONFIDENCE_Z = 1.96  # an Effect's interval is 95%
SAME_Z = 1.645  # "same" is its 90% interval inside the floor (two one-sided tests)
# A pair past its budget stops undecided once more boots decide it with less chance
FUTILITY = 0.1
WORDS = {
    Gate.DIFFERENT: (PairWord.CHANGED, "worse"),
    Gate.WRONG_WAY: (PairWord.CHANGED, "better"),
    Gate.SAME: (PairWord.SAME, ""),
    Gate.UNDECIDED: (PairWord.CANNOT_TELL, ""),
}


def _z(alpha: float) -> float:
    """The two-sided normal quantile of a significance alpha."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def _looks_to(cap: int) -> list[int]:
    """The looks up to cap (the gate's, doubling past its last), and cap itself."""
    looks, n = [], 0
    while n < cap:
        n = min(next_look(n), cap)
        looks.append(n)
    return looks


@dataclass
class _Pair:
    testcase: int
    old: int  # the new kernel is old + 1
    verdict: EndpointVerdict | None = None
    want: int = 1  # boots each before the gate is read again
    why: str = ""  # a kernel of the pair cannot be measured

    @property
    def open(self) -> bool:
        return not self.why and (self.verdict is None or self.verdict.gate == Gate.MORE)


@dataclass
class _Kernel:
    boots: list[Boot] = field(default_factory=list)
    attempts: int = 0
    failures_in_a_row: int = 0


class Sweep:
    """The boots of a series of `kernels` under each testcase, and the pairs' verdicts."""

    def __init__(
        self,
        kernels: int,
        testcases: list[SweepTestcase],
        budget: int,
        min_effect: float,
        cap: int = 0,
    ) -> None:
        """`budget`: every pair's boots (a kernel's, each testcase); `cap`: a pair still
        undecided then goes on to this many (0: the budget)."""
        self.testcases = testcases
        self.budget = budget
        self.cap = max(budget, cap)
        self.min_effect = min_effect
        self.kernels = kernels
        self._k = {(t, k): _Kernel() for t in range(len(testcases)) for k in range(kernels)}
        self._pairs = [_Pair(t, k) for t in range(len(testcases)) for k in range(kernels - 1)]
        # ALPHA spent over the pairs and each pair's looks (Bonferroni): about one
        # false alert in 75 sweeps of 5 equal kernels (simulated, CV 15%). The looks past
        # the budget share half as much again (EXTENSION_ALPHA): the looks within it are
        # as strict as before, so a sweep that decides within its budget boots as before.
        pairs = max(1, len(self._pairs))
        looks = max(1, sum(look <= budget for look in LOOKS))
        self.alpha = ALPHA / (pairs * looks)
        beyond = sum(budget < look <= self.cap for look in _looks_to(self.cap))
        self.alpha_beyond = EXTENSION_ALPHA / (pairs * max(1, beyond))

    def _alpha(self, n: int) -> float:
        return self.alpha if n <= self.budget else self.alpha_beyond

    # --- what the boots said ---------------------------------------------------------
    def boot(self, t: int, k: int, samples: list[float], host: str = "") -> None:
        kernel = self._k[t, k]
        kernel.attempts += 1
        kernel.failures_in_a_row = 0
        kernel.boots.append(Boot(samples, host))
        self._judge(t)

    def failed(self, t: int, k: int, why: str) -> None:
        """A boot that did not give the metric (the kernel did not boot, the testcase
        failed); the cap counts it."""
        kernel = self._k[t, k]
        kernel.attempts += 1
        kernel.failures_in_a_row += 1
        if kernel.failures_in_a_row >= MAX_FAILURES_IN_A_ROW and not kernel.boots:
            self.give_up(t, k, f"{kernel.attempts} boots failed: {why}")

    def give_up(self, t: int, k: int, why: str) -> None:
        """The kernel cannot be measured (it does not build, or never boots)."""
        for p in self._pairs:
            if p.testcase == t and k in (p.old, p.old + 1) and p.open:
                p.why = f"kernel {k + 1} {why}"

    # --- what to boot next -----------------------------------------------------------
    def wanted(self) -> list[tuple[int, int]]:
        """(testcase, kernel) that an open pair needs another boot of, once each."""
        need: set[tuple[int, int]] = set()
        for p in self._pairs:
            if not p.open:
                continue
            for k in (p.old, p.old + 1):
                kernel = self._k[p.testcase, k]
                if len(kernel.boots) < p.want and kernel.attempts < self.cap:
                    need.add((p.testcase, k))
        return sorted(need)

    def round(self, rng: random.Random) -> list[tuple[int, int]]:
        """The next round's boots in a random order ([]: the sweep is over)."""
        order = self.wanted()
        rng.shuffle(order)
        return order

    # --- the verdicts ----------------------------------------------------------------
    def _series(self, t: int) -> tuple[bool, list[list[float]], Pooled | None]:
        """Testcase t's scale (log for a positive metric), each kernel's boot scores (as
        the engine's revision 4 scores a boot: the within-boot spread pooled over every
        boot of the series) and the series' pooled noise."""
        boots = [b for (tt, _), kernel in self._k.items() if tt == t for b in kernel.boots]
        log = log_scale(boots)
        spread = within_spread(boots, log)
        scores = [
            [mean_score(b, log, spread) for b in self._k[t, k].boots] for k in range(self.kernels)
        ]
        return log, scores, Pooled.of(scores)

    def _gate(
        self, p: _Pair, cap: int, series: tuple[bool, list[list[float]], Pooled | None]
    ) -> EndpointVerdict:
        """The gate on the pair, with the noise of the whole series (one testcase on one
        host: the kernels share one noise, known from many more boots than a pair's)."""
        tc = self.testcases[p.testcase]
        log, scores, pooled = series
        old, new = (self._k[p.testcase, k].boots for k in (p.old, p.old + 1))
        return compare_scores(
            scores[p.old],
            scores[p.old + 1],
            exact=noise_free(old) and noise_free(new),
            log=log,
            worse_is_lower=tc.better == "higher",
            regression=True,  # DIFFERENT: the newer kernel is worse; WRONG_WAY: better
            min_effect=self.min_effect,
            max_boots=cap,
            alpha=self._alpha(min(len(old), len(new))),
            pooled=pooled,
        )

    def _judge(self, t: int) -> None:
        """Read the gate of each open pair of testcase t whose kernels reached its look."""
        series = None  # scored once, and only when a pair reaches its look
        for p in self._pairs:
            if p.testcase != t or not p.open:
                continue
            n = min(len(self._k[t, k].boots) for k in (p.old, p.old + 1))
            if n >= p.want:
                series = series or self._series(t)
                p.verdict = self._gate(p, self.cap, series)
                # the budget is a look of its own, whatever the gate's next one
                p.want = min(p.verdict.want, self.budget) if n < self.budget else p.verdict.want
                if p.verdict.gate == Gate.MORE and n >= self.budget:
                    p.verdict = self._futile(p.verdict, n) or p.verdict

    def _futile(self, verdict: EndpointVerdict, n: int) -> EndpointVerdict | None:
        """Past the budget, a pair goes on only while the cap's boots could still decide
        it (Pinpoint's futility: no repeats that cannot change the answer). Its estimate
        at the cap is predicted from today's, with the spread the boots to come add; the
        chance that it then reads "changed" or "same" must be FUTILITY at least."""
        e = verdict.effect
        if not (math.isfinite(e.low) and math.isfinite(e.high)) or n >= self.cap:
            return None
        se_now = standard_error(e.low, e.high)
        se_cap = se_now * math.sqrt(n / self.cap)
        later = NormalDist(e.value, se_now * math.sqrt(1 - n / self.cap))
        bar = max(self.min_effect, _z(self.alpha_beyond) * se_cap)
        changed = later.cdf(-bar) + 1 - later.cdf(bar)
        inside = self.min_effect - SAME_Z * se_cap  # "same" once the estimate is within
        same = later.cdf(inside) - later.cdf(-inside) if inside > 0 else 0.0
        if changed + same >= FUTILITY:
            return None
        bound = max(abs(e.low), abs(e.high))
        return EndpointVerdict(
            Gate.UNDECIDED,
            e,
            f"cannot decide: the effect is under {bound:.0%} at 95% ({e.describe()}), and "
            f"{self.cap} boots a kernel would hardly decide it at this noise",
        )

    def pairs(self) -> list[SweepPair]:
        """Every pair's verdict; a pair still open at the end (its budget spent on failed
        boots) is read at what it has."""
        out = []
        series = {t: self._series(t) for t in range(len(self.testcases))}
        for p in self._pairs:
            tc = self.testcases[p.testcase]
            old, new = (self._k[p.testcase, k].boots for k in (p.old, p.old + 1))
            n = min(len(old), len(new))
            verdict = p.verdict if n else None
            if n and (p.open or p.why):  # the gate at its cap: decided, or cannot tell
                verdict = self._gate(p, n, series[p.testcase])
            pair = SweepPair(
                testcase=tc.name,
                metric=tc.metric,
                unit=tc.unit,
                old=p.old,
                new=p.old + 1,
                verdict=PairWord.CANNOT_TELL,
                boots_old=len(old),
                boots_new=len(new),
                message=p.why,
            )
            if verdict is not None:
                word, direction = WORDS.get(verdict.gate, (PairWord.CANNOT_TELL, ""))
                e = verdict.effect
                pair.verdict, pair.direction = word, direction
                pair.effect = e.value
                if math.isfinite(e.low) and math.isfinite(e.high):
                    pair.low, pair.high = e.low, e.high
                    pair.bound = max(abs(e.low), abs(e.high))
                pair.message = f"{p.why}; {verdict.message}" if p.why else verdict.message
            out.append(pair)
        return out


def verdicts_text(pairs: list[SweepPair]) -> str:
    """The pairs summed up: "no change" only when every pair is the same; a pair that
    cannot tell is never read as no change (its largest effect not ruled out said)."""
    changed = sum(p.verdict == PairWord.CHANGED for p in pairs)
    unsure = [p for p in pairs if p.verdict == PairWord.CANNOT_TELL]
    if not changed and not unsure:
        return "no change"
    head = f"{changed} of {len(pairs)} pairs changed"
    if not unsure:
        return head
    bounds = sorted(p.bound for p in unsure if p.bound is not None)
    head += f", {len(unsure)} cannot tell"
    if bounds:
        said = ", ".join(f"{b:.0%}" for b in bounds[:-1])
        said = f"{said} and {bounds[-1]:.0%}" if said else f"{bounds[-1]:.0%}"
        head += f" (effects up to {said} not ruled out)"
    return head


def boots_to_settle(low: float, high: float, boots: int, min_effect: float) -> int | None:
    """About how many boots a kernel would put a pair's 90% interval inside the floor,
    were its effect nothing, from the pair's own 95% interval after `boots` a kernel (it
    narrows as 1/sqrt(boots)): the engine's interval is wider than the kernels' CV alone
    says (its references against drift), so this is the figure the futility rule sees."""
    if not (math.isfinite(low) and math.isfinite(high)) or boots < 1 or high <= low:
        return None
    return math.ceil(boots * (SAME_Z * standard_error(low, high) / min_effect) ** 2)


def standard_error(low: float, high: float) -> float:
    """An effect's standard error, from its 95% interval."""
    return (high - low) / 2 / CONFIDENCE_Z


def boots_to_rule_out(cv: float, min_effect: float) -> int:
    """About how many boots a kernel rule out a change of min_effect between two equal
    kernels whose boots spread by cv (the equivalence test's 90% interval of their
    difference inside the floor)."""
    return math.ceil(2 * (SAME_Z * cv / min_effect) ** 2)
