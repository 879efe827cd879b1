"""A backport's verdict from its boots: the target (kernel 0) against the target with the
series (kernel 1). Pure: the workflow decides with it, the reports show its figures."""

import statistics

from kbisect.workflows.backport_types import BACKPORT_SIDES
from kbisect.workflows.sweep_types import SweepBoot


def side_values(boots: list[SweepBoot], kernel: int) -> list[float]:
    """The values of one side's boots that gave one (a pass/fail side: its good boots)."""
    return [b.value for b in boots if b.kernel == kernel and b.value is not None]


def failures(boots: list[SweepBoot]) -> dict[str, list[int]]:
    """A pass/fail testcase's bad boots and boots, by side (a bad boot has no value)."""
    out = {}
    for k, side in enumerate(BACKPORT_SIDES):
        mine = [b for b in boots if b.kernel == k]
        out[side] = [sum(b.value is None for b in mine), len(mine)]
    return out


def unlike_the_job(good: float | None, bad: float | None, boots: list[SweepBoot]) -> str:
    """Why the two kernels do not sit on the job's sides ("": they do, or the job's
    endpoints' values are not known): the target nearer the job's good endpoint than its
    bad, or the target with the series nearer its bad one."""
    if good is None or bad is None or good == bad:
        return ""
    mid, up = (good + bad) / 2, 1.0 if good > bad else -1.0
    ends = {"good": good, "bad": bad}
    for k, side in enumerate(BACKPORT_SIDES):
        values = side_values(boots, k)
        if not values:
            continue
        want_good, median = k == 1, statistics.median(values)
        if ((median - mid) * up > 0) != want_good:
            near, far = ("bad", "good") if want_good else ("good", "bad")
            return (
                f"{side} the series the target reads {median:.6g}, nearer the job's {near} "
                f"side ({ends[near]:.6g}) than its {far} ({ends[far]:.6g})"
            )
    return ""
