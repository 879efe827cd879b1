"""A job's knobs checked against its testcase: the CLI and the doors check them before a
job starts, the worker again when it validates the job."""

from kbisect.contract import (
    DEFAULT_MIN_EFFECT,
    DEFAULT_MIN_RATE_STEP,
    MAX_BOOTS,
    MAX_SWEEP_KERNELS,
    MIN_BOOTS,
)
from kbisect.errors import UserError
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.trace_run import check_traceable


def check_tuning(
    manifest: "Manifest",
    metric: str | None,
    min_effect: float,
    max_boots: int,
    trace: bool,
    min_rate_step: float = DEFAULT_MIN_RATE_STEP,
) -> str:
    """A job's knobs against its testcase (here and again in the worker); the metric the
    verdicts are made on."""
    primary = metric or manifest.primary
    if primary not in manifest.metrics:
        known = ", ".join(sorted(manifest.metrics))
        raise UserError(f"{manifest.name} has no metric {primary!r}: pick one of {known}")
    for least in (min_effect, min_rate_step):
        if not 0 < least < 1:
            raise UserError(f"--min-effect {least * 100:g}: give a percentage under 100, e.g. 5")
    check_boots(max_boots, "--max-boots")
    if trace:
        check_traceable(manifest)
    return primary


# --repetitions above this many times the testcase's own count is almost surely a typo
# (a job's test timeout grows with it); a manifest may set `max_repetitions`.
REPETITIONS_FACTOR = 10


def check_repetitions(manifest: "Manifest", repetitions: int | None) -> None:
    """--repetitions (None: the testcase's own) within 1 and its cap (UserError)."""
    if repetitions is None:
        return
    cap = int(getattr(manifest, "max_repetitions", 0) or REPETITIONS_FACTOR * manifest.repetitions)
    if not 1 <= repetitions <= cap:
        raise UserError(
            f"--repetitions {repetitions}: give 1 to {cap} for {manifest.name} "
            f"(its default is {manifest.repetitions})"
        )


def check_boots(boots: int, option: str) -> None:
    """A boot budget within the contract's bounds (UserError naming the option)."""
    if not MIN_BOOTS <= boots <= MAX_BOOTS:
        raise UserError(f"{option} {boots}: give {MIN_BOOTS} to {MAX_BOOTS}")


def check_sweep(manifest: "Manifest | None", kernels: int | None = None) -> None:
    """A sweep's testcase (one scored, not pass/fail) and its number of kernels."""
    if kernels is not None and not 2 <= kernels <= MAX_SWEEP_KERNELS:
        raise UserError(
            f"a sweep takes 2 to {MAX_SWEEP_KERNELS} kernels, oldest first ({kernels} given)"
        )
    if manifest is not None and manifest.pass_fail:
        raise UserError(
            f"{manifest.name} passes or fails: a sweep compares scores; find where it "
            "began to fail with 'kbisect bisect'"
        )


def least_changes(manifest: "Manifest", flaky: bool, pct: float | None) -> tuple[float, float]:
    """--min-effect as the job's kind reads it (None: not given): a metric's least relative
    change, or a flaky pass/fail job's least change in failure rate, in points. Returns
    (min_effect, min_rate_step)."""
    given = None if pct is None else pct / 100
    if not manifest.pass_fail:
        return (DEFAULT_MIN_EFFECT if given is None else given), DEFAULT_MIN_RATE_STEP
    if given is not None and not flaky:
        raise UserError(
            f"--min-effect: {manifest.name} passes or fails, with no size of change to "
            "weigh; drop it, or add --flaky to set the least change in failure rate (points)"
        )
    return DEFAULT_MIN_EFFECT, (DEFAULT_MIN_RATE_STEP if given is None else given)
