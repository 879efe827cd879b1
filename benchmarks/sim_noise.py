"""Simulated boots of a noisy throughput-like metric (higher is better; a culprit lowers it).

A boot returns its repetitions. Noise is multiplicative (lognormal), half its variance
between boots and half within a boot, on top of which a scenario adds heavy-tailed
outlier boots, a bimodal metric (each boot lands in one of two modes), slow drift, a
window of boots disturbed by another load on the host, a lasting change of its speed, a
steady fall of its speed over a stretch of the job, or
host swings that last a few boots (the between-boot half correlated from boot to boot).
"""

import math
import random
from dataclasses import dataclass

REPETITIONS = 3
BASE = 100.0
OUTLIER_RATE = 0.03  # outlier boots lose 30-50%
BIMODAL = 0.08  # each boot +-8%
DRIFT_PER_BOOT = 0.0005  # the metric rises 5% over 100 boots
# Another job's load on the host: boots 30 to 45 of the job read 25% low (seen here when a
# package install and a kernel tree grep shared the host with a bisection).
DISTURBED_BOOTS = range(30, 46)
DISTURBED_LOSS = 0.25
# The host faster for good from boot 30 on (seen in a real lab-103 run after calibration).
SHIFT_FROM, SHIFT = 30, 0.15
# The host slowing steadily from boot 20 to boot 80, then holding ("fall:P" says P%; seen
# in the lab-103 run of revision 7, whose host lost 46% over the job).
FALL_BOOTS = (20, 80)
# Wild boots: a disturbed host (a cron job, a noisy neighbour) makes one boot read 3 to
# 30 times slower (a real sched-pipe job here read 2,604 us/op against 97). "wild:P" in P%
# of boots anywhere; "burst" in WILD_BURST boots in a row from boot WILD_BURST_AT (early:
# the endpoints' first blocks, where one such boot stalled the real job).
WILD_FACTOR = (3.0, 30.0)
WILD_BURST_AT, WILD_BURST = 3, 3
# "burst-edges": the burst's boots just before and after it read this many times slower
# (real bursts here: a boot 1.15 times slow, under both wild bars, read halfway)
EDGE_FACTOR = (1.15, 1.3)
# "mimic": a burst the size of the step itself, on the job's first probe boots (lab 103's
# real burst read a good commit's two boots in a row 1.3-1.4 times slow, as its new side
# reads, and the job named that commit): under every wild bar, it reads as the other side
MIMIC_BOOTS, MIMIC_FACTOR = (9, 10), (1.3, 1.4)


@dataclass(frozen=True)
class Noise:
    cv: float  # total, per repetition
    # or "outliers", "bimodal", "drift" (0.05% a boot; "drift:0.1" says 0.1%), "disturbed",
    # "shifted", "fall:P" (P% slower from boot 80 on, reached steadily from boot 20),
    # "swing:R" (the between-boot half correlated R from one boot to the next), "wild:P"
    # (P% of boots 3-30 times slower), "burst" (3 such boots in a row, early),
    # "burst-edges" (the burst, and the boots either side of it 1.15-1.3 times slower),
    # "mimic" (boots 9 and 10 1.3-1.4 times slower)
    kind: str = "lognormal"

    @property
    def sigma(self) -> float:
        """Each half's sigma on the log scale (between boots, within one)."""
        return math.sqrt(math.log1p(self.cv * self.cv) / 2)

    @property
    def swing(self) -> float:
        """The lag-1 correlation of the between-boot half (0 but for "swing:R")."""
        return float(self.kind.partition(":")[2]) if self.kind.startswith("swing") else 0.0

    def swung(self, previous: float | None, rng: random.Random) -> float:
        """The host's next between-boot deviate, in sigmas: an AR(1) of lag-1 correlation
        `swing` (real labs here read 0.3-0.8 from one reference boot to the next, the
        host's speed swinging 10-15% for a minute or two), unchanged in size."""
        if previous is None:
            return rng.gauss(0, 1)
        r = self.swing
        return r * previous + math.sqrt(1 - r * r) * rng.gauss(0, 1)

    def boot(
        self, level: float, rng: random.Random, clock: int, host: float | None = None
    ) -> list[float]:
        """One boot's repetitions for a commit whose true value is `level`;
        `clock` counts the job's boots so far (for drift); `host` is the between-boot
        deviate when the caller keeps it (swung), else drawn afresh."""
        s = self.sigma
        value = level * math.exp(s * (rng.gauss(0, 1) if host is None else host))
        if self.kind == "outliers" and rng.random() < OUTLIER_RATE:
            value *= rng.uniform(0.5, 0.7)
        elif self.kind == "bimodal":
            value *= 1 + BIMODAL if rng.random() < 0.5 else 1 - BIMODAL
        elif self.kind.startswith("drift"):
            rate = float(self.kind.partition(":")[2] or DRIFT_PER_BOOT * 100) / 100
            value *= 1 + rate * clock
        elif self.kind == "disturbed" and clock in DISTURBED_BOOTS:
            value *= 1 - DISTURBED_LOSS
        elif self.kind == "shifted" and clock >= SHIFT_FROM:
            value *= 1 + SHIFT
        elif self.kind.startswith("fall:"):
            start, end = FALL_BOOTS
            done = min(max(clock - start, 0), end - start) / (end - start)
            value *= 1 - float(self.kind.partition(":")[2]) / 100 * done
        elif self.kind.startswith("wild:"):
            if rng.random() < float(self.kind.partition(":")[2]) / 100:
                value /= rng.uniform(*WILD_FACTOR)
        elif self.kind == "mimic" and clock in MIMIC_BOOTS:
            value /= rng.uniform(*MIMIC_FACTOR)
        elif self.kind.startswith("burst"):
            if WILD_BURST_AT <= clock < WILD_BURST_AT + WILD_BURST:
                value /= rng.uniform(*WILD_FACTOR)
            elif self.kind == "burst-edges" and clock in (
                WILD_BURST_AT - 1,
                WILD_BURST_AT + WILD_BURST,
            ):
                value /= rng.uniform(*EDGE_FACTOR)
        return [value * math.exp(rng.gauss(0, s)) for _ in range(REPETITIONS)]


def level_of(culprits_below: int, step: float) -> float:
    """The true value of a commit with this many culprits among its ancestors."""
    return BASE * (1 - step) ** culprits_below
