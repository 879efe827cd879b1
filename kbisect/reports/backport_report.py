"""A backport job's answer in words: what was taken to the target (prerequisites first),
the test kernel, and the target measured without and with it; as JSON for tools. Pure."""

import dataclasses
import statistics
from typing import Any

from kbisect.decide.backport import side_values
from kbisect.reports.sweep_report import boot_word
from kbisect.workflows.backport_types import (
    BACKPORT_SIDES,
    BackportPlan,
    BackportProgress,
    BackportResult,
)
from kbisect.workflows.sweep_types import is_cannot_test


def _commit(r: BackportResult, c: str) -> str:
    return f'{c[:12]} ("{r.plan.subjects.get(c, "")}")'


def role(plan: BackportPlan, commit: str) -> str:
    """What a commit of the series is there for."""
    if commit in plan.prerequisites:
        return "prerequisite (the change's context)"
    if commit in plan.followups:
        return "follow-up (its Fixes: names the series)"
    return "the change"


def left_out(plan: BackportPlan) -> list[str]:
    """The follow-ups the series does not take."""
    return [c for c in plan.followups if c not in plan.series]


def before_after(r: BackportResult) -> list[str]:
    """Each side's median over its boots, with their count: the [Test Plan]'s figures."""
    if r.failures:
        return [
            f"{side} the backport: {r.testcase} failed {r.failures[side][0]} of "
            f"{r.failures[side][1]} boots"
            for side in BACKPORT_SIDES
            if side in r.failures
        ]
    pair = r.pair
    if pair is None:
        return []
    lines = []
    for k, side in enumerate(BACKPORT_SIDES):
        values = side_values(r.boots, k)
        if values:
            lines.append(
                f"{side} the backport: {pair.metric} {statistics.median(values):.6g} {pair.unit} "
                + (f"(median of {len(values)} boots)" if len(values) > 1 else "(1 boot)")
            )
    return lines


def boot_line(p: BackportProgress, n: int) -> str:
    b = p.boots[n]
    side = BACKPORT_SIDES[b.kernel]
    if p.pass_fail:
        what = "good" if b.value is not None else f"bad: {b.error}"
        if b.value is None and is_cannot_test(b.error):
            what = b.error  # no verdict: the kernel cannot test
    else:
        what = boot_word(b)
    return f"boot {n + 1}: {side} the backport: {b.testcase} {what}" + (
        f" on {b.host}" if b.host else ""
    )


def outcome_lines(r: BackportResult) -> list[str]:
    """The answer as plain lines: the verdict, the series, the test kernel, the figures."""
    name = r.shown_target
    lines = [f"{r.word}: {r.message}" if not r.message.startswith(r.word) else r.message]
    verb = "revert" if r.plan.revert else "apply"
    for n, c in enumerate(r.plan.series, start=1):
        lines.append(f"{verb} {n}: {_commit(r, c)}: {role(r.plan, c)}")
    for c in left_out(r.plan):
        lines.append(f"follow-up not taken: {_commit(r, c)} (--with-followups takes it)")
    if r.plan.patched:
        built = r.kernels.get(BACKPORT_SIDES[1], "")
        lines.append(  # never the built kernel's path: a host's, in words meant for others
            f"test kernel: {name} with the series, commit {r.plan.patched}"
            + (", built" if built else "")
        )
    lines += before_after(r)
    return lines


def to_json(r: BackportResult, job_id: str) -> dict[str, Any]:
    return {"id": job_id, **dataclasses.asdict(r)}
