"""benchmarks.duet_correlation's figures on boots whose shared part is known."""

import math
import random

import pytest

from benchmarks.duet_correlation import figures


def test_the_figures_recover_the_share_the_halves_and_the_cost() -> None:
    rng = random.Random(7)
    host, own, halves, cost = 0.06, 0.06, 0.02, -0.05  # equal parts: R = 0.5
    pairs, singles = [], []
    for _ in range(4000):
        shared = cost + rng.gauss(0, host)  # what the host gives both guests of a duet
        first = math.exp(shared + rng.gauss(0, own))
        second = math.exp(shared + halves + rng.gauss(0, own))
        pairs.append((first, second))
        singles.append(math.exp(rng.gauss(0, host) + rng.gauss(0, own)))
    f = figures(pairs, singles)
    assert f.duets == 4000
    assert f.r == pytest.approx(0.5, abs=0.05)
    assert f.halves == pytest.approx(halves, abs=2 * f.halves_half_width)
    assert f.cost == pytest.approx(cost + halves / 2, abs=0.01)
    assert f.single_cv == pytest.approx(math.hypot(host, own), rel=0.05)
    # a duet's difference keeps only the guests' own noise; successive singles keep all
    assert f.duet_diff_sd == pytest.approx(own * math.sqrt(2), rel=0.05)
    assert f.single_diff_sd == pytest.approx(math.hypot(host, own) * math.sqrt(2), rel=0.05)
