"""Each hypothesis weighed on its split of every boot, the noise integrated out: checked
against a brute-force integral over the old mean, the step and the noise."""

import math
import random

import numpy as np
import pytest

from kbisect.decide.split_likelihood import STEP_SCALES, Commit, split_loglik
from kbisect.decide.stats import log_phi

LEAST, TAU = 0.05, 0.15


def _boots(step_at: int, step: float, n: int = 30, seed: int = 1) -> list[list[float]]:
    """n boots spread over 6 commits in order (oldest first), new-like from step_at."""
    rng = random.Random(seed)
    return [
        [(step if c >= step_at else 0.0) + rng.gauss(0, 0.1) for _ in range(n // 6)]
        for c in range(6)
    ]


def _weigh(
    commits: list[list[float]], scale: float = 1.0, extra: float = 0.0
) -> tuple[list[float], float]:
    """Hypothesis i (1..5): commits i.. are new-like."""
    boots = [
        Commit.of([v * scale for v in c], extra if 0 < i < 5 else 0.0)
        for i, c in enumerate(commits)
    ]
    weighed = split_loglik(boots, [range(i, 6) for i in range(1, 6)], LEAST * scale, TAU * scale)
    assert weighed is not None
    return weighed


def _brute(commits: list[list[float]], first_new: int | None) -> float:
    """log of the integral over sigma (1/sigma), the step (normal, tau, beyond LEAST) and
    the old mean (flat) of the boots' Gaussian likelihood, on fine grids."""
    y = np.array([v for c in commits for v in c])
    z = np.array(
        [
            1.0 if first_new is not None and i >= first_new else 0.0
            for i, c in enumerate(commits)
            for _ in c
        ]
    )
    n = len(y)
    log_sigma = np.linspace(math.log(0.02), math.log(1.0), 1500)
    sigma = np.exp(log_sigma)[:, None]
    steps = (
        np.linspace(LEAST, LEAST + 10 * TAU, 3000)[None, :]
        if first_new is not None
        else np.zeros((1, 1))
    )
    # the old mean integrated in closed form: residuals about their own mean
    r = y[None, None, :] - steps[..., None] * z
    rss = (r**2).sum(-1) - r.sum(-1) ** 2 / n
    log_l = -(n - 1) * np.log(sigma) - rss / (2 * sigma**2)
    if first_new is not None:
        # the step's prior: a mixture of normals, each kept to steps beyond LEAST
        prior = sum(
            w
            * np.exp(-(steps**2) / (2 * (TAU * k) ** 2))
            / (TAU * k * math.sqrt(2 * math.pi) * math.exp(log_phi(-LEAST / (TAU * k))))
            for w, k in STEP_SCALES
        )
        log_l = log_l + np.log(prior)
        row_top = log_l.max(axis=1, keepdims=True)
        log_l = np.log(np.trapezoid(np.exp(log_l - row_top), steps[0], axis=1)) + row_top[:, 0]
    else:
        log_l = log_l[:, 0]
    top = log_l.max()
    return float(np.log(np.trapezoid(np.exp(log_l - top), log_sigma)) + top)


@pytest.mark.parametrize("boots", [12, 30, 90])
def test_each_hypothesis_weighs_as_the_integral_over_mean_step_and_noise(boots: int) -> None:
    commits = _boots(step_at=3, step=0.12, n=boots)
    hypotheses, none = _weigh(commits)
    # Likelihood ratios against "no culprit": the grid's constants cancel in them.
    for i in range(1, 6):
        want = _brute(commits, i) - _brute(commits, None)
        got = hypotheses[i - 1] - none
        assert abs(got - want) < 0.01, (i, got, want)


def test_the_split_at_the_step_is_likeliest_and_beats_no_culprit() -> None:
    hypotheses, none = _weigh(_boots(step_at=3, step=0.15))
    assert max(range(5), key=lambda i: hypotheses[i]) == 2  # commits 3.. new-like
    assert hypotheses[2] - none > math.log(100)


def test_a_step_the_wrong_way_leans_no_culprit() -> None:
    hypotheses, none = _weigh(_boots(step_at=3, step=-0.15))
    assert all(h < none for h in hypotheses)


def test_only_the_step_in_noise_sigmas_matters() -> None:
    # The noise is not a fitted figure: the same boots on another scale (and the least
    # step and the prior with them) weigh the hypotheses the same against each other.
    commits = _boots(step_at=2, step=0.1, seed=4)
    one, none_one = _weigh(commits)
    other, none_other = _weigh(commits, scale=37.0)
    for a, b in zip(one, other, strict=True):
        assert math.isclose(a - none_one, b - none_other, abs_tol=1e-3)  # the grid's error


def test_the_level_s_error_makes_a_commit_s_boots_count_for_less() -> None:
    # Boots of one commit judged against an uncertain level share its error: with that
    # error in the commit's mean, the split at the step leads its neighbours by less.
    commits = _boots(step_at=3, step=0.15, n=60)
    sure, _ = _weigh(commits)
    level_bound, _ = _weigh(commits, extra=0.05**2)
    assert (
        level_bound[2] - max(level_bound[1], level_bound[3]) < sure[2] - max(sure[1], sure[3]) - 1
    )


def test_too_few_boots_weigh_nothing() -> None:
    assert split_loglik([Commit.of([1.0, 2.0]), Commit.of([1.0])], [[1]], LEAST, TAU) is None


def _farm_first_blocks(rng: random.Random, lost: int, hosts: int = 8) -> float:
    """P(no culprit) from the endpoints' first block on each of `hosts` VM hosts (one old
    and one new boot each, 5% apart in level; the new endpoint 10% slower, noise 12%),
    each host's level fitted to its own two boots and taken off them, as a farm's are."""
    old, new = [], []
    for _ in range(hosts):
        level = rng.gauss(0, 0.05)
        old.append(level + rng.gauss(0, 0.12))
        new.append(level - 0.10 + rng.gauss(0, 0.12))
    mean_old, mean_new = sum(old) / hosts, sum(new) / hosts
    levels = [((o - mean_old) + (n - mean_new)) / 2 for o, n in zip(old, new, strict=True)]
    # signed so that the expected step is upward
    olds = Commit.of([lv - o for o, lv in zip(old, levels, strict=True)])
    news = Commit.of([lv - n for n, lv in zip(new, levels, strict=True)])
    weighed = split_loglik([olds, news], [[1]], LEAST, TAU, lost)
    assert weighed is not None
    (split,), none = weighed
    return 1 / (1 + math.exp(split - none))


def test_levels_fitted_to_the_boots_take_their_degrees_of_freedom() -> None:
    # A farm's first blocks: each host's level fitted to its two boots halves their
    # spread. Weighed as if the boots still held all their noise, a real 10% step reads
    # "no culprit" at 99% in several jobs of 400 (a farm's false "no difference"); with the
    # 7 levels beyond the first counted as lost, in none.
    sure = {
        lost: sum(_farm_first_blocks(rng, lost) >= 0.99 for _ in range(400))
        for lost, rng in ((0, random.Random(3)), (7, random.Random(3)))
    }
    assert sure[7] == 0 and sure[0] >= 3, sure
