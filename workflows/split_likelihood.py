"""Each culprit hypothesis weighed on the split it makes of every boot, the noise not
known but integrated out. Pure (the engine's revision 5; workflows.posterior_engine).

Hypothesis c splits the level-adjusted boots into an old side (commits that do not descend
from c) and a new side (those that do). Under it the boots are Gaussian with one noise
sigma about two means: the old mean with a flat prior, the new one a step away whose prior
is a normal of scale tau (mostly; STEP_SCALES), kept to steps at least `least` the
expected way (a smaller or opposite change is "no culprit"). "No culprit" puts every
boot about one mean. Then

    log P(boots | c, sigma) = -(N - 1) log sigma - RSS_c / 2 sigma^2
                              + log of the step's prior integral (d, the split's mean
                              difference, and its variance sigma^2 h)

and sigma is integrated on a log grid (Jeffreys' 1/sigma prior) around each split's own
estimate. Weighed this way a commit's boots cannot be surer than the split they make:
the noise figure is each hypothesis's own residual, not one fitted to the settled sides,
so it does not flatten as a t on one difference of means does (docs/measurements.md,
"each split's noise marginalised").

A hypothesis's split is three sums (boots, their sum, their sum of squares) over the
commits that descend from it: workflows.posterior sums them over each commit's ancestors.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

SIGMA_POINTS = 16  # the noise grid's points
SIGMA_SPAN = 6.0  # the grid spans this many of log sigma's standard errors either side
LEAST_BOOTS = 4  # fewer boots in all: no noise figure to integrate over
# The step's prior: normals of these multiples of tau, with these weights. One normal of
# tau (0.15 in log units) made a 98% drop (a counter-like metric, a few boots) 28 of its
# scales away, and "no culprit" won; the wide ones cost a small step 0.2 nats.
STEP_SCALES = ((0.8, 1.0), (0.1, 8.0), (0.1, 64.0))


@dataclass(frozen=True)
class Sums:
    """Boots, their sum and their sum of squares."""

    n: float
    s: float
    q: float

    def __add__(self, other: "Sums") -> "Sums":
        return Sums(self.n + other.n, self.s + other.s, self.q + other.q)

    @property
    def rss(self) -> float:
        """The sum of squares about their own mean."""
        return self.q - self.s * self.s / self.n if self.n else 0.0


def of(values: Sequence[float]) -> Sums:
    return Sums(len(values), math.fsum(values), math.fsum(v * v for v in values))


def log_phi(x: float) -> float:
    """log of the standard normal CDF, also far in its lower tail."""
    if x > -5:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2)))
    return -0.5 * x * x - math.log(-x) - 0.5 * math.log(2 * math.pi)


def _logsumexp(terms: list[float]) -> float:
    top = max(terms)
    if top == -math.inf:
        return top
    return top + math.log(math.fsum(math.exp(t - top) for t in terms))


def split_loglik(
    new_side: Sequence[Sums], total: Sums, least: float, tau: float
) -> tuple[list[float], float] | None:
    """Each hypothesis's log likelihood of all the boots (new_side[i]: the sums of the
    boots that hypothesis i puts on the new side; values signed so that the expected
    step is upward), and that of "no culprit", on one scale. None: too few boots."""
    n = total.n
    if n < LEAST_BOOTS:
        return None
    # Hypotheses between the same booted commits make the same split: each is weighed once
    # (a 1,024-commit range has as many splits as booted commits, not 1,024).
    splits: dict[Sums, tuple[float, float, float] | None] = {}
    for new in new_side:
        n_old = n - new.n
        if new in splits:
            continue
        if not new.n or not n_old:
            splits[new] = None
            continue
        mean_new, mean_old = new.s / new.n, (total.s - new.s) / n_old
        rss = total.q - new.s * mean_new - (total.s - new.s) * mean_old
        splits[new] = (mean_new - mean_old, max(rss, 0.0), 1 / new.n + 1 / n_old)
    # log sigma's standard error is about 1/sqrt(2 df); each hypothesis integrates over a
    # grid of its own about its own residual (sums on one spacing: the same multiple of
    # the integral), as one grid about the best split cut off the others' noise and
    # favoured the best by up to 0.6 nats (tests/workflows/test_split_likelihood.py)
    width = SIGMA_SPAN / math.sqrt(2 * (n - 2))
    offsets = [width * (2 * k / (SIGMA_POINTS - 1) - 1) for k in range(SIGMA_POINTS)]

    def grid(rss: float) -> list[tuple[float, float]]:
        """(log sigma, sigma^2) about this residual's estimate."""
        centre = 0.5 * math.log(max(rss, 1e-18) / (n - 2))
        return [(centre + o, math.exp(2 * (centre + o))) for o in offsets]

    none = _logsumexp([-(n - 1) * ls - total.rss / (2 * s2) for ls, s2 in grid(total.rss)])
    # each scale of the step's prior: its weight, tau^2 and its mass beyond `least`
    scales = [(math.log(w), (tau * k) ** 2, log_phi(-least / (tau * k))) for w, k in STEP_SCALES]
    weighed: dict[Sums, float] = {}
    for key, split in splits.items():
        if split is None:
            weighed[key] = -math.inf
            continue
        d, rss, h = split
        terms = []
        for log_sigma, s2 in grid(rss):
            var_d = s2 * h
            noise = -(n - 1) * log_sigma - rss / (2 * s2)
            for log_w, tau2, beyond in scales:
                spread = var_d + tau2
                post_mean, post_var = d * tau2 / spread, var_d * tau2 / spread
                terms.append(
                    noise
                    + log_w
                    + 0.5 * math.log(var_d / spread)
                    - d * d / (2 * spread)
                    + log_phi((post_mean - least) / math.sqrt(post_var))
                    - beyond
                )
        weighed[key] = _logsumexp(terms)
    return [weighed[new] for new in new_side], none
