"""The host level fitted to references: drift followed, outliers resisted, jumps found,
a swing of the host's speed told from independent noise."""

import math
import random

import pytest

from kbisect.decide.trend import (
    RIVAL_LEAST,
    Model,
    Swing,
    Trend,
    fit_swing,
    fit_trend,
    swing_means,
)

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


def test_a_drift_the_references_cannot_yet_show_stays_a_rival() -> None:
    # 0.1% a boot seen by 20 references: a still level is likeliest, but a moving one is
    # not ruled out, and it says so with its weight. 100 references make it the choice.
    drift = 0.001
    few = fit_trend(references(lambda t: drift * t, n=60), SIGMA, 60)
    assert not few.model.walk and not few.model.slope
    moving = sum(w for m, w in few.rivals if m.walk or m.slope)
    assert 0.05 < moving < 0.5, few.rivals
    assert all(m != few.model and w >= RIVAL_LEAST for m, w in few.rivals)
    many = fit_trend(references(lambda t: drift * t), SIGMA, 300)
    assert many.model.walk or many.model.slope
    assert all(w < 0.5 for _, w in many.rivals)


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


def swinging(phi: float, share: float, seed: int, n: int = 300) -> list[tuple[int, float]]:
    """References as the engine boots them (an old-new block every 4 boots: two in a
    row) on a host whose speed swings: an AR(1) of `share` of the variance, correlated
    `phi` from one boot to the next, plus each boot's own noise."""
    rng = random.Random(seed)
    swing, out = rng.gauss(0, 1), []
    for t in range(1, n + 1):
        swing = phi * swing + math.sqrt(1 - phi * phi) * rng.gauss(0, 1)
        if t % 4 in (1, 2):
            own = rng.gauss(0, math.sqrt(1 - share))
            out.append((t, SIGMA * (math.sqrt(share) * swing + own)))
    return out


def test_a_swinging_host_is_told_from_independent_noise() -> None:
    # the simulator's swing:0.7 (benchmarks.sim_noise): 3/4 of a boot's variance swings
    for seed in range(5):
        swing = fit_swing(swinging(0.7, 0.75, seed))
        assert swing is not None, seed
        assert 0.5 <= swing.phi <= 0.85, (seed, swing)
        assert 0.4 * SIGMA**2 <= swing.var <= 1.3 * SIGMA**2, (seed, swing)
    for seed in range(20):  # boots as many, independent: no swing
        assert fit_swing(references(lambda t: 0.0, every=2, seed=seed)) is None, seed


def test_boots_close_together_on_a_swinging_host_count_partly_as_one() -> None:
    trend = Trend([0.0] * 301, [0.0] * 301, swing=Swing(0.7, 0.75 * SIGMA**2, SIGMA**2))
    # two boots in a row share 0.7 of the swing's variance: their mean's variance gains
    # 2 * 0.7 * var / 4 over independent boots'
    assert trend.swing_var([10, 11]) == pytest.approx(2 * 0.7 * 0.75 * SIGMA**2 / 4)
    together = trend.swing_var(list(range(100, 110)))
    spread = trend.swing_var(list(range(10, 300, 30)))
    assert spread < together / 20
    assert Trend([0.0] * 301, [0.0] * 301).swing_var(list(range(100, 110))) == 0.0


def test_the_swing_is_read_from_the_references_around_a_boot() -> None:
    swing = Swing(0.7, 0.75 * SIGMA**2, SIGMA**2)
    # one reference at clock 10 read 2 sigmas high: the swing there is its share of it
    # (var / total), less further away as the swing forgets, both ways in time
    means, left = swing_means([(10, 2 * SIGMA)], swing, 20)
    assert means[10] == pytest.approx(0.75 * 2 * SIGMA)
    assert left[10] == pytest.approx(0.75 * 0.25 * SIGMA**2)  # var * own / total
    assert means[11] == pytest.approx(0.7 * means[10]) == means[9]
    assert means[0] < 0.1 * means[10] and left[0] > 0.99 * swing.var
    # a boot right between two references learns more of it than beside one
    two = swing_means([(9, SIGMA), (11, SIGMA)], swing, 20)
    one = swing_means([(9, SIGMA)], swing, 20)
    assert two[1][10] < one[1][10] < swing.var
    # a duet's part that lasts one moment: only the boot beside the reference learns it
    moment = Swing(0.0, 0.5 * SIGMA**2, SIGMA**2)
    means, left = swing_means([(5, SIGMA)], moment, 10)
    assert means[5] == pytest.approx(0.5 * SIGMA) and means[4] == means[6] == 0.0
    assert left[6] == moment.var


def test_what_the_references_leave_of_a_swing_is_what_boots_share() -> None:
    swing = Swing(0.7, 0.75 * SIGMA**2, SIGMA**2)
    means, left = swing_means([(t, 0.0) for t in range(0, 200, 3)], swing, 200)
    trend = Trend([0.0] * 201, [0.0] * 201, swing=swing, swing_mean=means, swing_left=left)
    clocks = list(range(100, 106))
    assert 0 < trend.swing_var(clocks, left=True) < 0.6 * trend.swing_var(clocks)
    # after the last boot the swing fades back to unknown
    assert trend.swing_at(200)[1] < trend.swing_at(210)[1] < swing.var
