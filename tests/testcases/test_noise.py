"""A testcase's measured noise: the CV over boots and the boots a step would need."""

import math

import pytest

from kbisect.testcases.noise import TOO_NOISY_CV, boots_for, noise


def test_a_quiet_metric_needs_few_boots_and_a_noisy_one_many() -> None:
    quiet = noise("usecs_per_op", [100.0, 101.0, 99.0, 100.5, 99.5])
    loud = noise("seconds", [1.0, 1.6, 0.7, 1.3, 0.5])
    assert quiet is not None and loud is not None
    assert quiet.cv == pytest.approx(0.0079, abs=1e-3) and not quiet.too_noisy
    assert quiet.boots_for == {"5%": 2, "10%": 2}
    assert loud.too_noisy and loud.cv > TOO_NOISY_CV
    assert loud.boots_for["5%"] > loud.boots_for["10%"] > 50
    assert "too noisy" in loud.line("s") and "too noisy" not in quiet.line("us")


def test_the_boots_a_step_needs_grow_with_the_noise_squared() -> None:
    assert boots_for(0.10, 0.10) == pytest.approx(4 * boots_for(0.05, 0.10), rel=0.25)
    assert boots_for(0.05, 0.05) == pytest.approx(4 * boots_for(0.05, 0.10), rel=0.25)
    assert boots_for(0.001, 0.10) == 2


@pytest.mark.parametrize("scores", [[1.0], [1.0, math.nan], [1.0, math.inf]])
def test_noise_needs_two_finite_scores(scores: list[float]) -> None:
    with pytest.raises(ValueError):
        noise("x", scores)


def test_a_count_that_stays_0_is_quiet_and_one_about_0_has_no_cv() -> None:
    # ten boots of iperf3 with no TCP retransmit: a mean of 0 once overflowed boots_for
    none = noise("retransmits", [0.0] * 10)
    assert none is not None and none.cv == 0 and none.boots_for == {"5%": 2, "10%": 2}
    assert noise("delta", [-1.0, 1.0]) is None
