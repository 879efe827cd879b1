"""Scores from result-channel records: the median of each metric over repetitions.

The first `manifest.warmup` repetitions of a boot warm caches and the emulator's code
translation (under TCG they read 20-40% low): they are kept, apart, and not scored."""

import math
import statistics

from kbisect.errors import TestcaseFailedError
from kbisect.model import Metric, Score
from kbisect.testcases.manifest import Manifest


def score(
    manifest: Manifest,
    records: list[dict[str, object]],
    warmup: int | None = None,
    runs: int | None = None,
) -> Score:
    """Each metric's median over the scored repetitions; the first `warmup` (default: the
    manifest's) are kept apart. `runs`: the repetitions the boot ran, warm-up ones
    included (default: the manifest's)."""
    warm = manifest.warmup if warmup is None else warmup
    samples = _samples(manifest, records, _ran(manifest, warm, runs))
    if manifest.primary not in samples:
        raise TestcaseFailedError(
            f"testcase {manifest.name} reported no '{manifest.primary}' (its primary metric)"
        )
    return _score(manifest, samples, warm)


def passed(
    manifest: Manifest,
    records: list[dict[str, object]],
    warmup: int,
    *,
    good: bool,
    runs: int | None = None,
) -> Score:
    """A pass/fail boot's score: `passed` 1 or 0, and what else a good boot's script
    reported (a bad one's may have stopped half-way); `runs` as for score."""
    samples = _samples(manifest, records, _ran(manifest, warmup, runs)) if good else {}
    samples[manifest.primary] = {rep: float(good) for rep in range(warmup + 1)}
    return _score(manifest, samples, warmup)


def _ran(manifest: Manifest, warmup: int, runs: int | None) -> int:
    return manifest.repetitions + warmup if runs is None else runs


def _samples(
    manifest: Manifest, records: list[dict[str, object]], runs: int
) -> dict[str, dict[int, float]]:
    """Each metric's value by repetition, from the guest's records: only the `runs`
    repetitions the boot ran, so a guest's flood of reps cannot fill the result. Scripts
    count them from 1 (kb_metric's REP); 0 is taken too, for a script counting from it."""
    samples: dict[str, dict[int, float]] = {}
    for rec in records:
        if rec.get("event") != "metric" or rec.get("name") not in manifest.metrics:
            continue
        value, rep = sample(rec.get("value")), rec.get("rep")
        if value is not None and isinstance(rep, int) and 0 <= rep <= runs:
            samples.setdefault(str(rec["name"]), {})[rep] = value
    return samples


def sample(value: object) -> float | None:
    """A guest's value as a sample: a finite number; NaN, an infinity or an integer past
    a float's range (JSON has them) is none."""
    if not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _score(manifest: Manifest, samples: dict[str, dict[int, float]], warmup: int) -> Score:
    metrics = {}
    for name, spec in manifest.metrics.items():
        by_rep = samples.get(name)
        if not by_rep:
            continue
        reps = sorted(by_rep)
        warm, scored = reps[:warmup], reps[warmup:]
        if not scored:
            raise TestcaseFailedError(
                f"testcase {manifest.name} reported '{name}' for warm-up repetitions only"
            )
        values = [by_rep[r] for r in scored]
        metrics[name] = Metric(
            name=name,
            unit=spec.unit,
            better=spec.better,
            value=round(statistics.median(values), 3),
            samples=values,
            warmup=[by_rep[r] for r in warm],
        )
    return Score(testcase=manifest.name, primary=manifest.primary, metrics=metrics)
