"""The job as markdown, for the Temporal Web UI's "current details" of the workflow."""

from kbisect.contract import Progress


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def details_markdown(p: Progress, subjects: dict[str, str]) -> str:
    lines = [
        f"**{p.status}** · {p.testcase} · {p.mode} mode · {p.message}",
        "",
        f"range: {', '.join(o[:12] for o in p.old)} .. {p.new[:12]} · "
        f"{p.candidates} candidates · {len(p.steps)} steps done · about {p.steps_left} to go",
    ]
    if p.verification is not None:
        v = p.verification
        lines.append(f"verification ({v.kind} of `{v.change[:12]}`): **{v.status}**, {v.message}")
    if p.current:
        lines.append("testing now: " + ", ".join(f"`{c[:12]}`" for c in p.current))
    if p.last_boot:
        lines.append(f"boots so far: {p.boots}; the latest: {p.last_boot}")
    lines += [
        "",
        f"| # | commit | subject | verdict | {p.metric} ({p.unit}) | position | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(p.steps, 1):
        subject = subjects.get(s.commit, s.subject).replace("|", "\\|")[:60]
        position = "" if s.position is None else f"{s.position + 0.0:.2f}"  # no "-0.00"
        lines.append(
            f"| {i} | `{s.commit[:12]}` | {subject} | {s.verdict} | {_fmt(s.value)} | "
            f"{position} | {s.source} |"
        )
    return "\n".join(lines)
