"""A testcase's boot-to-boot noise, measured (`kbisect testcase check --boots N`): each
metric's coefficient of variation over the boots of one kernel, and how many boots a side a
5% and a 10% step would need to be told apart from it.

The per-boot figure is a boot's score (the median of its scored repetitions), the figure
the engine weighs. Boots a side: a two-sample test at 5% error and 80% power on the log
scale, n = 2 (z_0.975 + z_0.8)^2 (cv / log(1 + step))^2, at least 2. The engine needs about
as many (it is adaptive, so a clear step takes fewer): an estimate to pick a testcase by,
not a promise.
"""

import math
import statistics
from dataclasses import dataclass

# The noisiest boot-to-boot level the engine was simulated at (docs/measurements.md): a
# primary metric noisier than this is called too noisy for a bisection.
TOO_NOISY_CV = 0.25
STEPS = (0.05, 0.10)
Z = 1.959964 + 0.841621  # z at 97.5% (two-sided 5% error) + z at 80% (power)


@dataclass(frozen=True)
class Noise:
    metric: str
    boots: int
    mean: float
    cv: float  # standard deviation / mean over the boots' scores
    boots_for: dict[str, int]  # "5%" -> boots a side to tell a 5% step

    @property
    def too_noisy(self) -> bool:
        return self.cv > TOO_NOISY_CV

    def line(self, unit: str) -> str:
        needs = ", ".join(f"a {step} step {n} a side" for step, n in self.boots_for.items())
        verdict = f"; too noisy (over {TOO_NOISY_CV:.0%})" if self.too_noisy else ""
        return (
            f"{self.metric}: mean {self.mean:.6g} {unit}, boot-to-boot CV {self.cv:.1%} over "
            f"{self.boots} boots; boots needed: {needs}{verdict}"
        )


def boots_for(cv: float, step: float) -> int:
    """Boots a side to tell a relative `step` at this boot-to-boot CV (at least 2)."""
    sd = math.sqrt(math.log1p(cv * cv))  # the log-scale spread of a log-normal with this CV
    return max(2, math.ceil(2 * (Z * sd / math.log1p(step)) ** 2))


def noise(metric: str, scores: list[float]) -> Noise | None:
    """The noise of one metric's per-boot scores (two boots at least, all finite); None
    where a CV means nothing: scores that vary about a mean of 0. Scores that never vary
    (a count of TCP retransmits, 0 every boot) have a CV of 0."""
    if len(scores) < 2 or not all(math.isfinite(s) for s in scores):
        raise ValueError(f"{metric}: noise needs two finite scores at least")
    mean, sd = statistics.fmean(scores), statistics.stdev(scores)
    if sd and not mean:
        return None
    cv = sd / abs(mean) if sd else 0.0
    return Noise(metric, len(scores), mean, cv, {f"{s:.0%}": boots_for(cv, s) for s in STEPS})
