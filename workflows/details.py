"""The job as markdown, for the Temporal Web UI's "current details" of the workflow: a
compact table that fits its half-width panel (short columns, one line a commit booted;
the commits that took a booted kernel's verdict are a count)."""

from kbisect.workflows.bisect_types import Progress, StepSource


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
    if p.building:
        lines.append("building now: " + ", ".join(f"`{c[:12]}`" for c in p.building))
    if p.current:
        lines.append("testing now: " + ", ".join(f"`{c[:12]}`" for c in p.current))
    if p.last_boot:
        lines.append(f"boots so far: {p.boots}; the latest: {p.last_boot}")
    unit = f" ({p.unit})" if p.unit else ""
    lines += [
        "",
        f"score: {p.metric}{unit}",
        "",
        "| # | commit | subject | verdict | score | boots |",
        "|---|---|---|---|---|---|",
    ]
    shared = 0
    for i, s in enumerate(p.steps, 1):
        if s.source == StepSource.SAME_KERNEL:
            shared += 1
            continue
        subject = subjects.get(s.commit, s.subject).replace("|", "\\|")[:32]
        plain = s.source in (StepSource.TEST, StepSource.ENDPOINT)
        verdict = s.verdict if plain else f"{s.verdict}: {s.source}"
        lines.append(
            f"| {i} | `{s.commit[:12]}` | {subject} | {verdict} | {_fmt(s.value)} | {s.boots} |"
        )
    if shared:
        lines += ["", f"{shared} more: commits that share a booted kernel (its verdict, no boot)"]
    return "\n".join(lines)
