"""The t distribution against published table values."""

import pytest

from kbisect.decide.stats import robust_mean, t_quantile, t_sf2, winsorized_ss


@pytest.mark.parametrize(
    ("p", "df", "t"),
    [(0.975, 1, 12.706), (0.975, 10, 2.228), (0.995, 20, 2.845), (0.95, 30, 1.697)],
)
def test_quantiles_match_the_tables(p: float, df: float, t: float) -> None:
    assert t_quantile(p, df) == pytest.approx(t, abs=1e-3)
    assert t_sf2(t, df) == pytest.approx(2 * (1 - p), rel=1e-3)


def test_tails() -> None:
    assert t_sf2(0.0, 5) == pytest.approx(1.0)
    assert t_sf2(50.0, 5) < 1e-6
    assert t_sf2(-2.228, 10) == pytest.approx(t_sf2(2.228, 10))


def test_robust_summaries_shrug_off_one_outlier() -> None:
    values = [10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.02, 9.98, 10.0, 1000.0]
    assert robust_mean(values) == pytest.approx(10.0, abs=0.05)
    assert winsorized_ss(values) < 1.0
