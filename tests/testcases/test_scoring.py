import pytest

from kbisect.errors import TestcaseFailedError
from kbisect.testcases import manifest, scoring


def _metric(rep: int, name: str, value: float) -> dict[str, object]:
    return {"event": "metric", "rep": rep, "name": name, "value": value}


def test_median_over_repetitions_with_units() -> None:
    m = manifest.load("nvme-snapshot-read")
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
