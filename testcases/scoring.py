"""Scores from result-channel records: the median of each metric over repetitions."""

import statistics

from kbisect.errors import TestcaseFailedError
from kbisect.model import Metric, Score
from kbisect.testcases.manifest import Manifest


def score(manifest: Manifest, records: list[dict[str, object]]) -> Score:
    samples: dict[str, dict[int, float]] = {}
    for rec in records:
        if rec.get("event") != "metric" or rec.get("name") not in manifest.metrics:
            continue
        value, rep = rec.get("value"), rec.get("rep")
        if isinstance(value, int | float) and isinstance(rep, int):
            samples.setdefault(str(rec["name"]), {})[rep] = float(value)
    if manifest.primary not in samples:
        raise TestcaseFailedError(
            f"testcase {manifest.name} reported no '{manifest.primary}' (its primary metric)"
        )
    metrics = {}
    for name, spec in manifest.metrics.items():
        by_rep = samples.get(name)
        if not by_rep:
            continue
        values = [by_rep[r] for r in sorted(by_rep)]
        metrics[name] = Metric(
            name=name,
            unit=spec.unit,
            better=spec.better,
            value=round(statistics.median(values), 3),
            samples=values,
        )
    return Score(testcase=manifest.name, primary=manifest.primary, metrics=metrics)
