"""Which statistics moved between the parent's boots and the culprit's, beyond their
noise. Pure.

Each statistic is tested on its own (Welch's t on the boots' values: each side's spread
is its own), and all at once under a Benjamini-Hochberg cut, so that hundreds of
statistics read from an A/A pair list nothing but by the rate asked for. LKP calls a
change when the min-max ranges do not overlap; with 5 boots a side that is both blunt and,
over hundreds of statistics, not controlled. A listed change also has to be large enough
to explain something (EXPLAIN_LEAST_CHANGE). The figures are a guest's: one that is not
finite, or that overflows the arithmetic, leaves its statistic untested.
"""

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.contract import (
    EXPLAIN_CHANGES,
    EXPLAIN_FDR,
    EXPLAIN_LEAST_CHANGE,
    EXPLAIN_LEAST_POINTS,
)
from kbisect.decide.stats import t_quantile, t_sf2
from kbisect.model import Stats

# Sources whose values are shares of the samples (percent): their change is the
# difference in points, as "+18% of samples" reads, not a ratio of two shares
SHARE_SOURCES = frozenset({"profile"})
# A count's resolution: integer values spread at least as a rounding does (1/12), so two
# boots reading 2 and two reading 3 are not a certain change
COUNT_VARIANCE = 1.0 / 12.0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Change:
    """One statistic's parent and culprit means, and its change with a 95% interval:
    percent of the parent's value (None where the parent's is 0), or points for a share."""

    source: str
    name: str
    parent: float
    culprit: float
    change: float | None
    low: float | None
    high: float | None
    p: float

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Comparison:
    read: int  # statistics read in every boot
    tested: int  # of those, the ones that varied or differed at all
    changes: list[Change]  # listed: beyond the noise and large enough, largest first
    more: int = 0  # listed past the EXPLAIN_CHANGES largest: left out of `changes`

    @property
    def listed(self) -> int:
        return len(self.changes) + self.more

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)  # the changes as Change.to_json has them


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    mean = math.fsum(values) / len(values)
    var = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, var


@dataclass(frozen=True)
class _Test:
    """One statistic's means, their squared standard errors, Welch's df and p."""

    source: str
    name: str
    parent: float
    culprit: float
    sa: float
    sb: float
    df: float
    p: float

    @staticmethod
    def of(source: str, name: str, a: Sequence[float], b: Sequence[float]) -> "_Test":
        (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
        if all(float(v).is_integer() for v in (*a, *b)):
            va, vb = max(va, COUNT_VARIANCE), max(vb, COUNT_VARIANCE)
        sa, sb = va / len(a), vb / len(b)
        if sa + sb == 0:  # both sides read the same every boot
            return _Test(source, name, ma, mb, 0.0, 0.0, math.inf, 0.0 if ma != mb else 1.0)
        df = (sa + sb) ** 2 / (sa * sa / (len(a) - 1) + sb * sb / (len(b) - 1))
        return _Test(source, name, ma, mb, sa, sb, df, t_sf2((mb - ma) / math.sqrt(sa + sb), df))

    def change(self) -> Change:
        """The change and its 95% interval: points for a share; else percent of the
        parent's value, the ratio's error taken to first order in both means' errors."""
        ma, mb = self.parent, self.culprit
        t = t_quantile(0.5 + CONFIDENCE / 2, self.df) if self.sa + self.sb else 0.0
        at = (self.source, self.name, ma, mb)
        if self.source in SHARE_SOURCES:
            half = t * math.sqrt(self.sa + self.sb)
            return Change(*at, mb - ma, mb - ma - half, mb - ma + half, self.p)
        if ma == 0:
            return Change(*at, None, None, None, self.p)
        ratio = mb / ma
        half = t * math.sqrt(self.sb + ratio * ratio * self.sa) / abs(ma)
        low, high = 100 * (ratio - half - 1), 100 * (ratio + half - 1)
        if not all(math.isfinite(x) for x in (ratio, low, high)):
            return Change(*at, None, None, None, self.p)  # a parent's figure next to 0
        return Change(*at, 100 * (ratio - 1), low, high, self.p)


def size(c: Change) -> float:
    """How large a change is, to rank it: a share's in points (a fraction of all the
    samples); else the factor it moved by, as a logarithm, so that 512 -> 8 sectors ranks
    with 4,104 -> 262,656 reads (in percent, -98% sat under every rise past +98%, and a
    traced boot's request counts pushed the request size out of the Why lines). To or
    from nothing ranks first. Rounded: equal factors tie, and keep the statistics' order."""
    if c.change is None or c.change <= -100:
        return math.inf
    if c.source in SHARE_SOURCES:
        return round(abs(c.change) / 100, 9)
    return round(abs(math.log1p(c.change / 100)), 9)


def _large(c: Change) -> bool:
    if c.change is None:
        return True  # from nothing to something
    least = EXPLAIN_LEAST_POINTS if c.source in SHARE_SOURCES else EXPLAIN_LEAST_CHANGE
    return abs(c.change) >= least


def _tested(source: str, name: str, a: Sequence[float], b: Sequence[float]) -> _Test | None:
    """The statistic's test; None where a figure is not finite or the arithmetic
    overflows on them (a guest's absurd figures: no p-value to rank)."""
    if not all(math.isfinite(v) for v in (*a, *b)):
        return None
    try:
        test = _Test.of(source, name, a, b)
    except (ArithmeticError, ValueError):  # an overflow, a math domain error
        return None
    return test if all(math.isfinite(x) for x in (test.parent, test.culprit, test.p)) else None


def change_of(source: str, name: str, parent: Sequence[float], culprit: Sequence[float]) -> Change:
    """One statistic's change with its 95% interval, tested alone (the job's own metric on
    the explain kernels: do they still show its effect?). ValueError: the figures are not
    finite, or overflow the arithmetic."""
    test = _tested(source, name, parent, culprit)
    if test is None:
        raise ValueError(f"the {name} figures do not compare (not finite, or far too large)")
    return test.change()


def interleaved(boots: int) -> list[bool]:
    """The explain boots' order, True for the culprit's: A B B A, A B B A, ... so that a
    drift of the host through them weighs on both sides alike."""
    return [(i % 4) in (1, 2) for i in range(2 * boots)]


def benjamini_hochberg(ps: Sequence[float], q: float) -> list[bool]:
    """Which of the p-values are discoveries at false-discovery rate q."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    cut = 0
    for rank, i in enumerate(order, 1):
        if ps[i] <= q * rank / len(ps):
            cut = rank
    found = [False] * len(ps)
    for i in order[:cut]:
        found[i] = True
    return found


def compare(
    parent: Sequence[Stats], culprit: Sequence[Stats], fdr: float = EXPLAIN_FDR
) -> Comparison:
    """The statistics read in every boot of both sides, tested; those beyond their noise
    at false-discovery rate `fdr` and large enough listed, the largest change first. A
    share (a function's part of the profile) missing from a boot reads 0 there: it had
    no samples."""
    if len(parent) < 2 or len(culprit) < 2:
        raise ValueError("a comparison needs two boots a side at least")
    boots = [*parent, *culprit]
    keys = set().union(*boots)
    keys = {k for k in keys if k[0] in SHARE_SOURCES or all(k in b for b in boots)}
    tests = []
    for key in sorted(keys):
        a = [b.get(key, 0.0) for b in parent]
        c = [b.get(key, 0.0) for b in culprit]
        if len({*a, *c}) > 1 and (test := _tested(key[0], key[1], a, c)) is not None:
            tests.append(test)
    found = benjamini_hochberg([t.p for t in tests], fdr)
    # the intervals (a quantile each) only for the discoveries
    changes = [t.change() for t, f in zip(tests, found, strict=True) if f]
    listed = [c for c in changes if _large(c)]
    listed.sort(key=size, reverse=True)
    kept = listed[:EXPLAIN_CHANGES]
    return Comparison(len(keys), len(tests), kept, len(listed) - len(kept))
