"""Evidence from boots: one boot is one unit of evidence, its repetitions combined.

Scores are worked on a log scale when the metric is positive (a regression is a ratio:
throughput x0.8 is the same step at 100 or 1,000 MB/s), else as they are. The two
endpoints' boots give a model of "behaves like old" and "behaves like new"; a commit's
boots are weighed between the two with a heavy-tailed (Student t) likelihood, so one
outlier boot moves the verdict a little, not all the way.
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.decide.stats import robust_mean, t_logpdf

LIKELIHOOD_DF = 5.0  # the t likelihood's degrees of freedom: robust, still efficient
# A noise-free metric still gets a scale, a small fraction of the step, so that one boot
# decides (and a value at neither endpoint does not).
MIN_NOISE_FRACTION = 0.02
# A repetition further than this many within-boot spreads from its boot's median is
# taken at that distance (see mean_score).
CLIP_SPREADS = 4.0


@dataclass(frozen=True)
class Boot:
    """One boot's scored repetitions of the primary metric."""

    samples: list[float]
    host: str = ""  # the machine that booted it: references are judged per host
    # Exact by declaration: a deterministic pass/fail verdict (one run, 1 or 0) is as
    # exact as a counter whose repetitions agree.
    exact: bool = False
    # Booted beside the boot observed just before it, at the same moment on the same VM
    # host (a duet: two guests on separate reserved CPUs), so it shares that one's clock.
    beside: bool = False

    @property
    def spread(self) -> float:
        return max(self.samples) - min(self.samples) if self.samples else 0.0


def log_scale(boots: Sequence[Boot]) -> bool:
    """Whether these boots' samples are all positive, so ratios make sense."""
    return all(s > 0 for b in boots for s in b.samples)


def score(boot: Boot, log: bool) -> float:
    """The boot's median repetition, on the job's scale."""
    m = statistics.median(boot.samples)
    return math.log(m) if log else m


def relative(delta: float, base: float, log: bool) -> float:
    """A difference on the job's scale as a fraction of the base value (+0.1 = 10% more)."""
    if log:
        return math.expm1(delta)
    return delta / abs(base) if base else math.inf if delta else 0.0


def within_spread(boots: Sequence[Boot], log: bool) -> float:
    """How far one repetition strays from its boot's median, pooled over the boots:
    1.4826 times the median distance (each odd boot's median itself left out)."""
    distances: list[float] = []
    for b in boots:
        values = sorted(math.log(x) if log else x for x in b.samples)
        if len(values) < 2:
            continue
        mid = statistics.median(values)
        out = [abs(v - mid) for v in values]
        if len(values) % 2:
            out.pop(len(values) // 2)
        distances += out
    return 1.4826 * statistics.median(distances) if distances else 0.0


def mean_score(boot: Boot, log: bool, spread: float) -> float:
    """The boot's mean repetition on the job's scale, each repetition held within
    CLIP_SPREADS x `spread` of the boot's median. For normal noise, the within-boot part
    of a mean of three has 0.74 of a median of three's variance; one wild repetition
    moves it no further than the clip."""
    values = [math.log(x) if log else x for x in boot.samples]
    mid = statistics.median(values)
    reach = CLIP_SPREADS * spread
    return statistics.fmean(min(mid + reach, max(mid - reach, v)) for v in values)


def pooled_sigma(groups: Sequence[Sequence[float]]) -> float:
    """One boot's noise from several commits' boots: each boot's distance from its
    commit's mean (scaled up for small groups, as n-1 does), and 1.4826 times their
    median: consistent for normal noise, and a wild boot cannot inflate it."""
    residuals = []
    for g in groups:
        if len(g) > 1:
            mean, scale = statistics.fmean(g), math.sqrt(len(g) / (len(g) - 1))
            residuals += [abs(v - mean) * scale for v in g]
    return 1.4826 * statistics.median(residuals) if residuals else 0.0


@dataclass(frozen=True)
class Model:
    """What old-like and new-like boots look like, from the endpoints' boots."""

    old_mean: float
    new_mean: float
    sigma: float  # one boot's noise, pooled over both endpoints
    n_old: int
    n_new: int

    @classmethod
    def fit(cls, old: Sequence[Sequence[float]], new: Sequence[Sequence[float]]) -> "Model":
        """From groups of scores (one group per commit) known to be old-like or new-like:
        each side's mean over all its boots, and the noise pooled within the groups."""
        flat_old = [v for g in old for v in g]
        flat_new = [v for g in new for v in g]
        step = abs(robust_mean(flat_new) - robust_mean(flat_old))
        sigma = pooled_sigma([*old, *new])
        return cls(
            old_mean=robust_mean(flat_old),
            new_mean=robust_mean(flat_new),
            sigma=max(sigma, MIN_NOISE_FRACTION * step, 1e-12),
            n_old=len(flat_old),
            n_new=len(flat_new),
        )

    def llr(self, value: float) -> float:
        """log P(value | new-like) / P(value | old-like): positive leans new.

        Each side's spread includes the uncertainty of its mean (predictive: sigma^2 (1 + 1/n)).
        """
        s_new = self.sigma * math.sqrt(1 + 1 / self.n_new)
        s_old = self.sigma * math.sqrt(1 + 1 / self.n_old)
        return (
            t_logpdf((value - self.new_mean) / s_new, LIKELIHOOD_DF)
            - math.log(s_new)
            - t_logpdf((value - self.old_mean) / s_old, LIKELIHOOD_DF)
            + math.log(s_old)
        )

    def position(self, value: float) -> float:
        """0.0 at the old endpoint's mean, 1.0 at the new one's."""
        gap = self.new_mean - self.old_mean
        return (value - self.old_mean) / gap if gap else 0.5
