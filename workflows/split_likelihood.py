"""Each culprit hypothesis weighed on the split it makes of every boot, the noise not
known but integrated out. Pure (the engine's revision 5; workflows.posterior_engine).

Hypothesis c splits the level-adjusted boots into an old side (commits that do not descend
from c) and a new side (those that do). Under it the boots are Gaussian with one noise
sigma about two means: the old mean with a flat prior, the new one a step away whose prior
is a normal of scale tau, kept to steps at least `least` the expected way (a smaller or
opposite change is "no culprit"). "No culprit" puts every boot about one mean. Then

    log P(boots | c, sigma) = -(N - 1) log sigma - RSS_c / 2 sigma^2
                              + log of the step's prior integral (d, the split's mean
                              difference, and its variance sigma^2 h)

and sigma is integrated on a log grid (Jeffreys' 1/sigma prior) around the best split's
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

SIGMA_POINTS = 24  # the noise grid's points
SIGMA_SPAN = 3.0  # the grid spans this many of log sigma's standard errors either side
LEAST_BOOTS = 4  # fewer boots in all: no noise figure to integrate over


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
    splits: list[tuple[float, float, float] | None] = []
    for new in new_side:
        n_old = n - new.n
        if not new.n or not n_old:
            splits.append(None)
            continue
        mean_new, mean_old = new.s / new.n, (total.s - new.s) / n_old
        rss = total.q - new.s * mean_new - (total.s - new.s) * mean_old
        splits.append((mean_new - mean_old, max(rss, 0.0), 1 / new.n + 1 / n_old))
    best = min([s[1] for s in splits if s] + [total.rss])
    centre = math.sqrt(max(best, 1e-18) / (n - 2))
    # log sigma's standard error is about 1/sqrt(2 df)
    width = SIGMA_SPAN / math.sqrt(2 * (n - 2))
    sigmas = [
        centre * math.exp(width * (2 * k / (SIGMA_POINTS - 1) - 1)) for k in range(SIGMA_POINTS)
    ]
    base = [-(n - 1) * math.log(s) for s in sigmas]
    none = _logsumexp([b - total.rss / (2 * s * s) for b, s in zip(base, sigmas, strict=True)])
    tau2 = tau * tau
    beyond = log_phi(-least / tau)  # the step prior's mass at least `least` the right way
    out = []
    for split in splits:
        if split is None:
            out.append(-math.inf)
            continue
        d, rss, h = split
        terms = []
        for b, s in zip(base, sigmas, strict=True):
            var_d = s * s * h
            spread = var_d + tau2
            post_mean, post_var = d * tau2 / spread, var_d * tau2 / spread
            terms.append(
                b
                - rss / (2 * s * s)
                + 0.5 * math.log(var_d / spread)
                - d * d / (2 * spread)
                + log_phi((post_mean - least) / math.sqrt(post_var))
                - beyond
            )
        out.append(_logsumexp(terms))
    return out, none
