"""A job's knobs checked against its testcase: the CLI and the doors check them before a
job starts, the worker again when it validates the job."""

from kbisect.errors import UserError
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.trace_run import check_traceable


def check_tuning(
    manifest: "Manifest", metric: str | None, min_effect: float, max_boots: int, trace: bool
) -> str:
    """A job's knobs against its testcase (here and again in the worker); the metric the
    verdicts are made on."""
    primary = metric or manifest.primary
    if primary not in manifest.metrics:
        known = ", ".join(sorted(manifest.metrics))
        raise UserError(f"{manifest.name} has no metric {primary!r}: pick one of {known}")
    if not 0 < min_effect < 1:
        raise UserError(f"--min-effect {min_effect * 100:g}: give a percentage under 100, e.g. 5")
    if max_boots < 3:
        raise UserError(f"--max-boots {max_boots}: give 3 or more")
    if trace:
        check_traceable(manifest)
    return primary
