"""The comparison of a parent's boots and a culprit's: what it lists, and what it must not."""

import math
import random

import pytest

from kbisect.contract import EXPLAIN_CHANGES
from kbisect.explain.compare import benjamini_hochberg, change_of, compare, interleaved
from kbisect.explain.why import WHY_LINES, why_lines
from kbisect.model import Stats


def boots(rng: random.Random, statistics: int, n: int, shift: dict[int, float]) -> list[Stats]:
    """n boots of a guest's statistics: lognormal figures of many sizes and noises,
    Poisson-like counts, and constants; `shift` multiplies some of them."""
    out = []
    for _ in range(n):
        b: Stats = {}
        for i in range(statistics):
            size = 10 ** (i % 7)
            noise = 0.02 + 0.3 * ((i * 37) % 11) / 10
            factor = shift.get(i, 1.0)
            if i % 5 == 0:  # a small count
                value = float(sum(rng.random() < 0.3 for _ in range(10 + i % 13)))
            elif i % 5 == 1:  # a constant
                value = float(size)
            else:
                value = size * math.exp(rng.gauss(0, noise))
            b[("vmstat", f"s{i}")] = value * factor
        out.append(b)
    return out


def test_an_aa_pair_lists_nothing_at_the_rate_asked_over_hundreds_of_statistics() -> None:
    rng = random.Random(5)
    listed, tested = 0, 0
    for _ in range(200):
        result = compare(boots(rng, 250, 5, {}), boots(rng, 250, 5, {}))
        listed += bool(result.changes)
        tested = result.tested
    assert tested >= 190  # the constants are read, not tested
    # Benjamini-Hochberg at 5% under no change at all: a listing in 5% of pairs at most
    assert listed <= 0.08 * 200


def test_real_changes_are_listed_largest_first_and_small_ones_are_not() -> None:
    rng = random.Random(9)
    # s3 (5% noise) halves, s6 (8% noise) grows 60%, the constant s1 grows 4%: a sure
    # change, but below the least change worth listing. Halved is the larger factor
    # (-50% against +60% in percent)
    shift = {3: 0.5, 6: 1.6, 1: 1.04}
    result = compare(boots(rng, 250, 5, {}), boots(rng, 250, 5, shift))
    assert [c.name for c in result.changes] == ["s3", "s6"]
    s3 = result.changes[0]
    assert s3.change is not None and s3.low is not None and s3.high is not None
    assert s3.low <= -50 <= s3.high and s3.change == pytest.approx(-50, abs=5)


def test_a_deterministic_change_of_two_boots_a_side_is_listed() -> None:
    # The seed's story: requests of 512 sectors became requests of 8, merges stopped
    parent = [{("diskstats", "nvme0n1 rareq-sz sectors"): 512.0, ("diskstats", "m"): 64638.0}] * 2
    culprit = [{("diskstats", "nvme0n1 rareq-sz sectors"): 8.0, ("diskstats", "m"): 0.0}] * 2
    result = compare(parent, culprit)
    by_name = {c.name: c for c in result.changes}
    assert by_name["nvme0n1 rareq-sz sectors"].change == pytest.approx(-98.4375)
    assert by_name["m"].change == -100


def test_counts_a_unit_apart_are_not_a_certain_change() -> None:
    parent = [{("interrupts", "nvme0q1"): 2.0}] * 2
    culprit = [{("interrupts", "nvme0q1"): 3.0}] * 2
    assert compare(parent, culprit).changes == []


def test_a_function_with_no_samples_in_the_parent_reads_as_its_share_in_points() -> None:
    parent = [{("profile", "memcpy"): 10.0 + d} for d in (0.1, -0.2, 0.1, 0.0, 0.2)]
    culprit = [
        {("profile", "memcpy"): 8.0 + d, ("profile", "nvme_pace_read"): 18.0 + d}
        for d in (0.3, -0.1, 0.2, -0.3, 0.0)
    ]
    result = compare(parent, culprit)
    pace = next(c for c in result.changes if c.name == "nvme_pace_read")
    assert pace.parent == 0 and pace.change == pytest.approx(18.02)
    assert pace.low is not None and pace.high is not None and pace.low < 18.02 < pace.high


def test_benjamini_hochberg_cuts_at_the_largest_rank_under_its_line() -> None:
    # ranks 1..5 against 0.05 * k / 5: 0.01, 0.02, 0.03, 0.04, 0.05; 0.025 misses its
    # line at rank 2 but goes with 0.028, under its line at rank 3
    assert benjamini_hochberg([0.025, 0.001, 0.2, 0.028, 0.5], 0.05) == [
        True,
        True,
        False,
        True,
        False,
    ]
    assert benjamini_hochberg([0.3, 0.4], 0.05) == [False, False]


def test_the_jobs_metric_on_the_explain_kernels_has_its_change_and_interval() -> None:
    slower = change_of("metric", "throughput", [83.5, 84.0, 82.9], [69.3, 70.1, 68.8])
    assert slower.change == pytest.approx(-16.85, abs=0.01)
    assert slower.high is not None and slower.high < 0 and slower.p < 0.001
    same = change_of("metric", "throughput", [83.5, 84.0, 82.9], [83.9, 82.7, 84.1])
    assert same.low is not None and same.high is not None and same.low < 0 < same.high


def test_the_boots_alternate_so_that_a_drift_weighs_on_both_sides_alike() -> None:
    order = interleaved(5)
    assert order[:4] == [False, True, True, False] and sum(order) == 5 and len(order) == 10


def test_a_side_of_one_boot_is_refused() -> None:
    with pytest.raises(ValueError, match="two boots"):
        compare([{("stat", "user"): 1.0}], [{("stat", "user"): 2.0}] * 2)


def test_a_figure_that_is_not_finite_or_overflows_is_not_tested() -> None:
    """A guest's NaN or infinity would be a p of NaN, listed "+inf points, 95% CI +nan to
    +nan"; figures near a float's range overflow the variance: neither is tested."""
    figures = {
        ("profile", "nan_function"): ([1.0, 2.0, 3.0], [math.nan, 50.0, 60.0]),
        ("profile", "inf_function"): ([1.0, 2.0, 3.0], [math.inf, 50.0, 60.0]),
        ("vmstat", "huge"): ([1e300, 2e300, 3e300], [-1e300, -2e300, -3e300]),
        ("stat", "real"): ([100.0, 101.0, 99.0], [200.0, 201.0, 199.0]),
    }
    parent = [{k: a[i] for k, (a, _) in figures.items()} for i in range(3)]
    culprit = [{k: c[i] for k, (_, c) in figures.items()} for i in range(3)]
    result = compare(parent, culprit)
    assert [c.name for c in result.changes] == ["real"] and result.tested == 1
    with pytest.raises(ValueError, match="do not compare"):
        change_of("metric", "throughput", [1.0, 2.0, 3.0], [math.nan, 2.0, 3.0])


def test_the_listed_changes_kept_are_the_largest_and_the_rest_are_counted() -> None:
    n = EXPLAIN_CHANGES + 10
    parent = [{("vmstat", f"s{i}"): 100.0 + d for i in range(n)} for d in (0, 1, -1)]
    culprit = [{("vmstat", f"s{i}"): 200.0 + i + d for i in range(n)} for d in (0, 1, -1)]
    result = compare(parent, culprit)
    assert len(result.changes) == EXPLAIN_CHANGES and result.more == 10 == n - EXPLAIN_CHANGES
    assert result.changes[0].name == f"s{n - 1}"  # the largest kept
    lines = why_lines(result)
    where = f"the {EXPLAIN_CHANGES} largest in the job's JSON"
    assert lines[-2] == f"... and {n - WHY_LINES} more ({where})"
    assert lines[-1].startswith(f"{n} of {n} statistics changed")
