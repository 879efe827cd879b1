"""Calibration of a bisector's claims: (claimed confidence, right) pairs binned, each bin's
observed rate with its 95% Wilson interval. Shared by benchmarks.accuracy and
benchmarks.pass_fail."""

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

# Claimed confidence bins: most claims are >= 0.995, so deciles would lump them together.
BINS = ((0.0, 0.5), (0.5, 0.9), (0.9, 0.99), (0.99, 0.995), (0.995, 0.999), (0.999, 1.0))
# The test: every decile of claimed confidence holding DECILE_LEAST jobs or more has
# its observed rate inside the 95% interval.
DECILES = tuple((i / 10, (i + 1) / 10) for i in range(10))
DECILE_LEAST = 50
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    jobs: int
    claimed: float  # mean claimed confidence
    right: float  # observed rate right
    interval: tuple[float, float]  # 95% Wilson interval of the rate

    @property
    def inside(self) -> bool:
        return self.interval[0] <= self.claimed <= self.interval[1]


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a binomial rate (sound at rates near 0 or 1)."""
    if n == 0:
        return 0.0, 1.0
    rate, zz = successes / n, z * z / n
    centre = (rate + zz / 2) / (1 + zz)
    half = z / (1 + zz) * math.sqrt(rate * (1 - rate) / n + zz / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _bin(low: float, high: float, pairs: list[tuple[float, bool]]) -> Bin:
    hits = sum(right for _, right in pairs)
    claimed = statistics.fmean(p for p, _ in pairs)
    return Bin(low, high, len(pairs), claimed, hits / len(pairs), wilson(hits, len(pairs)))


def calibration(
    claims: Iterable[tuple[float, bool]], bins: tuple[tuple[float, float], ...] = BINS
) -> list[Bin]:
    """The non-empty bins of (claimed confidence, right) pairs; the last bin is closed."""
    held: list[list[tuple[float, bool]]] = [[] for _ in bins]
    for p, right in claims:
        i = next((i for i, (lo, hi) in enumerate(bins) if lo <= p < hi), len(bins) - 1)
        held[i].append((p, right))
    return [_bin(lo, hi, h) for (lo, hi), h in zip(bins, held, strict=True) if h]


def print_claims(claims: list[tuple[float, bool]], policy: str) -> None:
    """The calibration table of (claimed confidence, right) pairs, then the deciles."""
    print(f"calibration of {policy} ({len(claims)} jobs that named a commit, all its cells):")
    line = "{:>14} {:>6} {:>9} {:>8} {:>17} {:>7}"
    print(line.format("claimed", "jobs", "mean", "right", "95% interval", "inside"))
    for bins in (BINS, DECILES):
        if bins is DECILES:
            print(f"deciles (the test: every one with {DECILE_LEAST} jobs or more inside):")
        for b in calibration(claims, bins):
            print(
                line.format(
                    f"[{b.low:g}, {b.high:g}{']' if b.high == 1 else ')'}",
                    b.jobs,
                    f"{b.claimed:.4f}",
                    f"{b.right:.4f}",
                    f"{b.interval[0]:.4f}-{b.interval[1]:.4f}",
                    ("yes" if b.inside else "NO")
                    if b.jobs >= DECILE_LEAST or bins is BINS
                    else "-",
                )
            )
