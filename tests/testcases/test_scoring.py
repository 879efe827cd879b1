import dataclasses
import math

import pytest

from kbisect.errors import TestcaseFailedError
from kbisect.testcases import manifest, scoring


def _metric(rep: int, name: str, value: float) -> dict[str, object]:
    return {"event": "metric", "rep": rep, "name": name, "value": value}


def test_median_over_repetitions_with_units() -> None:
    m = dataclasses.replace(manifest.load("nvme-snapshot-read"), warmup=0)
    records = [
        _metric(1, "avg_read_sectors", 8.0),
        _metric(2, "avg_read_sectors", 8.0),
        _metric(3, "avg_read_sectors", 512.0),
        _metric(1, "throughput", 10.0),
        _metric(2, "throughput", 30.0),
        _metric(3, "throughput", 20.0),
        _metric(1, "undeclared", 1.0),
    ]
    score = scoring.score(m, records)
    assert score.primary_metric.value == 8.0
    assert score.metrics["throughput"].value == 20.0
    assert score.metrics["throughput"].samples == [10.0, 30.0, 20.0]
    assert score.metrics["throughput"].unit == "MB/s"
    assert "undeclared" not in score.metrics


def test_no_primary_metric_is_a_testcase_failure() -> None:
    m = manifest.load("nvme-snapshot-read")
    with pytest.raises(TestcaseFailedError, match="avg_read_sectors"):
        scoring.score(m, [_metric(1, "throughput", 1.0)])


def test_warm_up_repetitions_are_reported_not_scored() -> None:
    m = manifest.load("nvme-snapshot-read")
    assert m.warmup == 1  # the first read of a boot is 20-40% low under TCG
    records = [
        _metric(r, "throughput", v) for r, v in ((1, 60.0), (2, 100.0), (3, 104.0), (4, 98.0))
    ]
    records += [_metric(r, "avg_read_sectors", 512.0) for r in range(1, 5)]
    t = scoring.score(m, records).metrics["throughput"]
    assert (t.warmup, t.samples, t.value) == ([60.0], [100.0, 104.0, 98.0], 100.0)


def test_only_warm_up_samples_is_a_testcase_failure() -> None:
    m = manifest.load("nvme-snapshot-read")
    with pytest.raises(TestcaseFailedError, match="warm-up repetitions only"):
        scoring.score(m, [_metric(1, "avg_read_sectors", 512.0)])


def test_a_value_that_is_not_a_finite_number_is_no_sample() -> None:
    """A guest's NaN, infinity (JSON's readers take both) or an integer past a float's
    range is no repetition's value: it would read as a median, or stop the boot."""
    m = dataclasses.replace(manifest.load("nvme-snapshot-read"), warmup=0)
    odd: list[object] = [math.nan, math.inf, -math.inf, 10**400, "8"]
    records = [_metric(1, "avg_read_sectors", 8.0)]
    records += [
        {**_metric(rep, "avg_read_sectors", 0.0), "value": v} for rep, v in enumerate(odd, 2)
    ]
    assert scoring.score(m, records).primary_metric.samples == [8.0]
    assert [scoring.sample(v) for v in odd] == [None] * len(odd)


def test_only_the_repetitions_the_boot_ran_are_samples() -> None:
    """A guest's flood of reps (80,000 of one metric made a 2 MB Score, Temporal's
    payload limit) keeps only the boot's: the warm-up and the scored ones, from 1."""
    m = manifest.load("nvme-snapshot-read")
    runs = m.warmup + m.repetitions
    flood = [_metric(rep, "avg_read_sectors", 8.0) for rep in range(-5, 100_000)]
    score = scoring.score(m, [*flood, _metric(2**70, "avg_read_sectors", 8.0)])
    assert len(score.primary_metric.samples) + len(score.primary_metric.warmup) == runs + 1
    score = scoring.score(m, flood, warmup=0, runs=2)
    assert score.primary_metric.samples == [8.0] * 3  # reps 0, 1 and 2
    more = [_metric(rep, "throughput", 1.0) for rep in range(100_000)]
    good = scoring.passed(m, more, 0, good=True, runs=2)  # a pass/fail boot's other metrics
    assert len(good.metrics["throughput"].samples) == 3
