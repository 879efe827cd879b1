"""Each culprit hypothesis weighed on the split it makes of every boot, the noise not
known but integrated out. Pure (kbisect.decide.levels weighs with it).

Hypothesis c splits the booted commits into an old side (those that do not descend from
c) and a new side (those that do). Under it each boot (less the host's level where it
ran) is Gaussian with one noise sigma about its side's mean: the old mean with a flat
prior, the new one a step away whose prior is a normal of scale tau (mostly;
STEP_SCALES), kept to steps at least `least` the expected way (a smaller or opposite
change is "no culprit"). A commit's mean also carries the error of the level it was
judged against (`extra`, the trend's uncertainty where it was booted): many boots of
one commit booted close together share that error, so they cannot be surer than the
level. "No culprit" puts every commit about one mean. With w_c = 1 / (sigma^2 / n_c +
extra_c), the old mean and the step integrated out:

    log P(boots | c, sigma) = -(N - C) log sigma - RSS_within / 2 sigma^2
                              - 1/2 sum log(1 / w_c) - 1/2 log W - WRSS_c / 2
                              + log of the step's prior integral (d_c, the split's
                              weighted mean difference, of variance 1/W_new + 1/W_old)

(N boots of C commits; RSS_within about each commit's own mean; WRSS_c the weighted
residual about each side's mean), and sigma is integrated on a log grid (Jeffreys' 1/sigma
prior) around each split's own estimate. The noise figure is each hypothesis's own
residual, not one fitted to the settled sides, so it does not flatten as a t on one
difference of means does (docs/measurements.md, "The posterior engine, revision 5").
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.decide.stats import log_phi

SIGMA_POINTS = 16  # the noise grid's points
SIGMA_SPAN = 6.0  # the grid spans this many of log sigma's standard errors either side
LEAST_BOOTS = 4  # fewer boots in all: no noise figure to integrate over
# The step's prior: normals of these multiples of tau, with these weights. One normal of
# tau (0.15 in log units) made a 98% drop (a counter-like metric, a few boots) 28 of its
# scales away, and "no culprit" won; the wide ones cost a small step 0.2 nats.
STEP_SCALES = ((0.8, 1.0), (0.1, 8.0), (0.1, 64.0))


@dataclass(frozen=True)
class Commit:
    """One commit's boots, signed so that the expected step is upward."""

    n: int
    mean: float
    rss: float  # about their own mean
    extra: float = 0.0  # variance its mean carries beyond the boots' noise
    # a boot's noise variance in sigma^2 (below 1: what the references showed of the
    # host's swing at its boots taken off them)
    scale: float = 1.0

    @staticmethod
    def of(values: Sequence[float], extra: float = 0.0, scale: float = 1.0) -> "Commit":
        mean = math.fsum(values) / len(values)
        rss = math.fsum((v - mean) ** 2 for v in values)
        return Commit(len(values), mean, rss, extra, scale)


def _logsumexp(terms: list[float]) -> float:
    top = max(terms)
    if top == -math.inf:
        return top
    return top + math.log(math.fsum(math.exp(t - top) for t in terms))


def split_loglik(
    commits: Sequence[Commit],
    splits: Sequence[Sequence[int]],
    least: float,
    tau: float,
    lost: int = 0,
) -> tuple[list[float], float] | None:
    """Each split's log likelihood of all the boots (a split: the positions in `commits`
    of those it puts on the new side), and that of "no culprit", on one scale. `lost`:
    degrees of freedom the boots' values already gave to levels fitted to them (a farm's
    hosts beyond the first: each host's level took one from its references, whose spread
    it shrank). None: too few boots."""
    n = sum(c.n for c in commits) - lost  # the boots' worth of noise left in them
    if n < LEAST_BOOTS:
        return None
    within = math.fsum(c.rss / c.scale for c in commits)
    dof = max(n - len(commits), 0)
    # log sigma's standard error is about 1/sqrt(2 df); each hypothesis integrates over a
    # grid of its own about its own residual (sums on one spacing: the same multiple of
    # the integral), as one grid about the best split cut off the others' noise and
    # favoured the best by up to 0.6 nats (tests/decide/test_split_likelihood.py)
    # the grids are windows on one lattice of log sigma, so the splits share its points
    width = SIGMA_SPAN / math.sqrt(2 * (n - 2))
    spacing = 2 * width / (SIGMA_POINTS - 1)
    Row = tuple[float, float, float]
    shared: dict[int, tuple[float, list[Row], Row]] = {}
    scales = [(math.log(w), (tau * k) ** 2, log_phi(-least / (tau * k))) for w, k in STEP_SCALES]

    def at(log_sigma: float) -> tuple[float, list[Row], Row]:
        """The part every split shares at this sigma, each commit's weight, weighted mean
        and weighted square, and their sums over all commits (every split reads them)."""
        s2 = math.exp(2 * log_sigma)
        rows, log_var = [], 0.0
        for c in commits:
            var = s2 * c.scale / c.n + c.extra
            log_var += math.log(var)
            rows.append((1 / var, c.mean / var, c.mean * c.mean / var))
        w, s, q = (math.fsum(r[k] for r in rows) for k in range(3))
        return -dof * log_sigma - within / (2 * s2) - 0.5 * log_var, rows, (w, s, q)

    def weighed(new: Sequence[int], grid_rss: float) -> float:
        terms = []
        centre = 0.5 * math.log(max(grid_rss, 1e-18) / (n - 2))
        first = round((centre - width) / spacing)
        for k in range(first, first + SIGMA_POINTS):
            if k not in shared:
                shared[k] = at(k * spacing)
            base, rows, (w_all, s_all, q_all) = shared[k]
            base -= 0.5 * math.log(w_all)
            if not new:  # "no culprit": one mean
                terms.append(base - (q_all - s_all * s_all / w_all) / 2)
                continue
            w_new, s_new, q_new = (math.fsum(rows[p][k] for p in new) for k in range(3))
            w_old, s_old, q_old = w_all - w_new, s_all - s_new, q_all - q_new
            wrss = q_old - s_old * s_old / w_old + q_new - s_new * s_new / w_new
            d, var_d = s_new / w_new - s_old / w_old, 1 / w_new + 1 / w_old
            base -= wrss / 2
            for log_w, tau2, beyond in scales:
                spread = var_d + tau2
                post_mean, post_var = d * tau2 / spread, var_d * tau2 / spread
                terms.append(
                    base
                    + log_w
                    + 0.5 * math.log(var_d / spread)
                    - d * d / (2 * spread)
                    + log_phi((post_mean - least) / math.sqrt(post_var))
                    - beyond
                )
        return _logsumexp(terms)

    def pooled_rss(new: set[int]) -> float:
        """The residual about each side's plain mean: where the noise grid is centred."""
        rss = within
        for side in ([c for p, c in enumerate(commits) if p not in new], [commits[p] for p in new]):
            if side:
                total = sum(c.n for c in side)
                mean = math.fsum(c.n * c.mean for c in side) / total
                rss += math.fsum(c.n * (c.mean - mean) ** 2 for c in side)
        return rss

    out = []
    for split in splits:
        if not split or len(split) == len(commits):
            out.append(-math.inf)  # one side empty: not a split of these boots
        else:
            out.append(weighed(split, pooled_rss(set(split))))
    return out, weighed((), pooled_rss(set()))
