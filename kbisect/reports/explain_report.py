"""An explain job's answer in words: the effect on the explain kernels, the Why lines, the
boots; as JSON for tools. Pure."""

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from kbisect.reports.flame_diff import flame_diff_svg, write_flame_diff
from kbisect.workflows.explain_types import ExplainResult


def headline(r: ExplainResult) -> str:
    """One line: what was compared and the outcome."""
    culprit, parent = r.culprit[:12], r.parent[:12]
    subject = r.subjects[1] if len(r.subjects) > 1 else ""
    return f"{r.status}: {culprit} ({subject}) against its parent {parent}: {r.message}"


def outcome_lines(r: ExplainResult, notes: bool = True) -> list[str]:
    """The answer as plain lines: the headline, Why, and what the boots were; `notes`:
    what of the guest's was left out too (a page folds them, from r.notes)."""
    lines = [headline(r), "Why:"]
    lines += [f"  {w}" for w in r.why]
    lines.append(
        f"{r.boots} explain boots of each (parent and culprit in turn, A B B A), "
        f"{r.testcase} on kernels with the diagnostics options"
    )
    lines += [f"failed boot: {f}" for f in r.failed]
    if r.notes and notes:  # what of the guest's was not read or kept
        lines += ["Left out:", *(f"  {n}" for n in r.notes)]
    if r.alignment is not None:
        lines.append(f"Alignment: {r.alignment.line}")
    if r.suggestion:
        lines.append(f"Suggested: {r.suggestion}")
    return lines


def to_json(r: ExplainResult, job_id: str) -> dict[str, Any]:
    """The result as the workflow returned it, with its job id; the stacks left out (a
    flame graph's input: --flame draws them)."""
    out = dataclasses.asdict(r)
    out.pop("stacks")
    return {"id": job_id, **out}


def _flame_input(r: ExplainResult) -> tuple[Counter[str], Counter[str], str]:
    title = f"{r.testcase}: {r.culprit[:12]} against {r.parent[:12]}"
    return Counter(r.stacks.get("parent", {})), Counter(r.stacks.get("culprit", {})), title


def flame_svg(r: ExplainResult) -> str:
    """The differential flame graph of the two sides' CPU samples, as SVG text."""
    return flame_diff_svg(*_flame_input(r))


def write_flame(r: ExplainResult, path: Path) -> Path:
    """flame_svg() in a file (its folders made); the path."""
    return write_flame_diff(*_flame_input(r), path)
