"""The host level fitted to references: drift followed, outliers resisted, jumps found."""

import random

import pytest

from kbisect.workflows.trend import Model, fit_trend

SIGMA = 0.1


def references(level, n: int = 300, every: int = 3, seed: int = 1):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    return [(t, level(t) + rng.gauss(0, SIGMA)) for t in range(1, n + 1, every)]


def test_a_steady_host_has_a_flat_level() -> None:
    trend = fit_trend(references(lambda t: 0.0), SIGMA, 300, 0.04 * SIGMA)
    assert max(abs(x) for x in trend.level[20:280]) < 0.05
    assert not trend.jumps


def test_slow_drift_is_followed() -> None:
    drift = 0.001  # a boot: 30% over the job, three times a 10% step
    trend = fit_trend(references(lambda t: drift * t), SIGMA, 300, 0.04 * SIGMA)
    errors = [abs(trend.level[t] - drift * t) for t in range(30, 271)]
    assert max(errors) < 0.05  # half a sigma, where the level moved 3 sigmas
    assert sum(errors) / len(errors) < 0.03  # about the estimate's own noise


def test_a_lasting_shift_is_a_jump() -> None:
    trend = fit_trend(references(lambda t: 0.3 if t >= 150 else 0.0), SIGMA, 300, 0.04 * SIGMA)
    assert trend.jumps and 140 <= trend.jumps[0] <= 160
    assert trend.level[200] == pytest.approx(0.3, abs=0.05)
    assert trend.level[100] == pytest.approx(0.0, abs=0.05)


def test_a_disturbed_stretch_is_a_jump_down_and_back() -> None:
    def level(t: int) -> float:
        return -0.3 if 100 <= t < 150 else 0.0

    trend = fit_trend(references(level, every=2), SIGMA, 300, 0.04 * SIGMA)
    assert len(trend.jumps) >= 2
    assert trend.level[125] == pytest.approx(-0.3, abs=0.07)
    assert trend.level[200] == pytest.approx(0.0, abs=0.05)


def test_one_wild_reference_moves_the_level_little() -> None:
    obs = references(lambda t: 0.0)
    obs[50] = (obs[50][0], -0.5)  # five sigmas off
    trend = fit_trend(obs, SIGMA, 300, 0.04 * SIGMA)
    assert not trend.jumps
    assert abs(trend.level[obs[50][0]]) < 0.06


def test_boots_spread_in_time_share_less_level_error_than_boots_together() -> None:
    trend = fit_trend(references(lambda t: 0.0), SIGMA, 300, 0.04 * SIGMA)
    together = trend.mean_var(list(range(100, 120)))
    spread = trend.mean_var(list(range(10, 300, 15)))
    assert spread < together / 2


def test_a_steady_slope_is_fitted_as_one() -> None:
    drift = 0.0005  # a boot: 15% over the job, as a host that warms steadily
    sparse = references(lambda t: drift * t, every=9)
    trend = fit_trend(sparse, SIGMA, 300)  # the model chosen by the references

    def worst(fit):  # type: ignore[no-untyped-def]
        return max(abs(fit.level[t] - drift * t) for t in range(30, 271))

    assert trend.model.slope
    assert worst(trend) < 0.05  # half a sigma, where the level moved 1.5


def test_a_steady_host_gets_no_slope() -> None:
    for seed in range(5):
        trend = fit_trend(references(lambda t: 0.0, seed=seed), SIGMA, 300)
        assert trend.model == Model(0.0, slope=False), seed
