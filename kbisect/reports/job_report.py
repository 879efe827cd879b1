"""A finished job as markdown, as a `git bisect log` that `git bisect replay` accepts, as JSON."""

from collections import Counter
from dataclasses import asdict
from pathlib import Path

from kbisect.builders.kernel_list import builds_around, builds_line, is_kernel_list
from kbisect.contract import Mode
from kbisect.errors import KbisectError
from kbisect.infra.git import Git
from kbisect.reports.answer import Answer, answer_of
from kbisect.reports.lines import md_code, md_text, pass_fail_counts
from kbisect.testcases.blocktrace import compare, no_worse, traces_of
from kbisect.words import clip
from kbisect.workflows.bisect_types import BisectResult, Step, StepSource


def terms(mode: str) -> tuple[str, str]:
    """git bisect's words for the old and new sides."""
    return ("broken", "fixed") if mode == Mode.FIX else ("good", "bad")


def bisect_log(result: BisectResult) -> str:
    """The job in `git bisect log` form; `git bisect replay FILE` accepts it."""
    old_t, new_t = terms(result.mode)
    start = "git bisect start"
    if result.mode == Mode.FIX:
        start += f" '--term-old={old_t}' '--term-new={new_t}'"
    lines = [start]

    def word(step: Step) -> str:
        if step.verdict == "skip":
            return "skip"
        is_old = (step.verdict == "good") != (result.mode == Mode.FIX)
        return old_t if is_old else new_t

    for step in result.steps:
        lines.append(f"# {word(step)}: [{step.commit}] {step.subject}")
        lines.append(f"git bisect {word(step)} {step.commit}")
    if result.culprit:
        subject = result.subjects.get(result.culprit, "")
        lines.append(f"# first {new_t} commit: [{result.culprit}] {subject}")
    else:
        lines.append(f"# only skipped commits left to test; the first {new_t} commit is one of:")
        lines += [
            f"# possible first {new_t} commit: [{c}] {result.subjects.get(c, '')}"
            for c in result.candidates
        ]
    return "\n".join(lines) + "\n"


def to_json(result: BisectResult) -> dict[str, object]:
    return {
        "status": result.status,
        "mode": result.mode,
        "testcase": result.testcase,
        "culprit": result.culprit,
        "candidates": [] if result.culprit else result.candidates,
        "metric": result.metric,
        "unit": result.unit,
        "message": result.message,
        "old": result.old,
        "new": result.new,
        "steps": [asdict(s) for s in result.steps],
        "verification": asdict(result.verification) if result.verification else None,
        "boots": result.boots,
        "confidence": result.confidence,
        "effect": result.effect,
        "change": asdict(result.change) if result.change else None,
        "answer": answer_of(result).to_json(),
        "notes": result.notes,
        "diagnostics": result.diagnostics,
        "pass_fail": result.pass_fail,
        "bad_boot": asdict(result.bad_boot) if result.bad_boot else None,
    } | _builds_json(result)


def bad_boot_section(result: BisectResult) -> list[str]:
    """A pass/fail job's bad boot as its console showed it: what goes into a bug report."""
    b = result.bad_boot
    if b is None:
        return []
    return [
        f"## The bad boot ({b.bad}, `{b.commit[:12]}`)",
        "",
        *md_code(b.excerpt or "(the console said nothing)"),
        "",
    ]


def _builds_json(result: BisectResult) -> dict[str, object]:
    """A kernel list's answer in builds: the last old-like kernel and the first new-like."""
    around = builds_around(Path(result.repo), result.culprit) if result.culprit else None
    return {"builds": {"last_old": around[0], "first_new": around[1]}} if around else {}


def repo_output(repo: str, *args: str) -> str | None:
    """git's output in the job's repository, or None where it is not readable from here
    (a report read on another host): reports then leave that detail out."""
    try:
        return Git(Path(repo)).run(*args)
    except KbisectError:
        return None


def _commit_lines(a: Answer) -> list[str]:
    """The named commit; its author and date where its tree is readable here."""
    lines = [f"- commit `{a.commit}`", f"- subject: {md_text(a.subject)}"]
    if a.author:
        lines += [f"- author: {md_text(a.author)}", f"- date: {md_text(a.date)}"]
    return lines


def verification_lines(result: BisectResult) -> list[str]:
    v = result.verification
    if v is None:
        return []
    what = f"**{v.status}** ({v.kind} of `{v.change[:12]}`)"
    lines = ["## Verification", "", f"{what}: {md_text(v.message)}."]
    if v.commit:
        lines.append(f"Tested as `{v.commit}`, kept under `refs/kbisect/verify/`.")
    return [*lines, ""]


def trace_section(result: BisectResult) -> list[str]:
    """The old and new endpoints' traced boots side by side, disk by disk, and the named
    commit's against the old endpoint."""
    if not result.diagnostics:
        return []
    old, new = result.old[0], result.new
    lines = ["## Block-layer trace (one traced boot each)", ""]
    pairs = [(old, new, "old -> new endpoint")]
    if result.culprit and result.culprit != new:
        pairs.append((old, result.culprit, "old endpoint -> the named commit"))
    for a, b, label in pairs:
        da, db = result.diagnostics.get(a, {}), result.diagnostics.get(b, {})
        if "error" in da or "error" in db:
            why = da.get("error") or db.get("error")
            lines.append(f"- {label}: no comparison ({md_text(str(why))})")
            continue
        ta, tb = traces_of(da), traces_of(db)
        for name, trace in ta.items():
            if name in tb:
                lines.append(f"- {label}, {md_text(compare(trace, tb[name]))}")  # disk names
    lines += _above_the_block_layer(result)
    folders = {c: d.get("folder") for c, d in result.diagnostics.items() if d.get("folder")}
    lines += ["", *(f"Traces of `{c[:12]}`: `{f}`" for c, f in folders.items()), ""]
    return lines


def _above_the_block_layer(result: BisectResult) -> list[str]:
    """One line when the bad endpoint's block layer did as well as the good one's: then
    the trace rules the queue and the device out, which is worth saying."""
    good, bad = result.old[0], result.new
    if result.mode == Mode.FIX:
        good, bad = bad, good
    tg = traces_of(result.diagnostics.get(good, {}))
    tb = traces_of(result.diagnostics.get(bad, {}))
    shared = [name for name in tg if name in tb]
    if not shared or not all(no_worse(tg[n], tb[n]) for n in shared):
        return []
    metric = result.metric or "the score"
    return [
        f"- the block layer held up on the bad endpoint ({md_text(', '.join(shared))}: no "
        f"Q2C or D2C over 10% slower, requests not over 10% smaller), so what made {metric} worse "
        "happens above it (a lock, the page cache, the scheduler), not in the queue or the "
        "device; one traced boot each: a hint, not a verdict"
    ]


def _boots_in_all(result: BisectResult) -> str:
    """'62 boots to bisect, 3 to verify, 3 traced: 68 in all': what the answer cost."""
    verify = result.verification.boots if result.verification else 0
    traced = sum(1 for d in result.diagnostics.values() if "error" not in d)
    if not verify and not traced:
        return f"{result.boots} boots in all"
    parts = [f"{result.boots} boots to bisect"]
    parts += [f"{verify} to verify"] if verify else []
    parts += [f"{traced} traced"] if traced else []
    return f"{', '.join(parts)}: {result.boots + verify + traced} in all"


def builds_of(result: BisectResult) -> str:
    if not result.culprit:
        return ""
    return builds_line(Path(result.repo), result.culprit, Mode(result.mode))


def answer_parts(result: BisectResult) -> Answer | None:
    """The answer's parts when the job named one commit (a kernel list's answer is its
    builds: builds_of)."""
    return answer_of(result) if result.culprit and not builds_of(result) else None


NUMBERING = (
    "#: the order in which the verdicts were reached (as watch numbers its steps); the "
    "numbers missing here are commits that took a verdict with no boot, listed below."
)


def same_kernel_lines(shared: list[tuple[int, Step]]) -> list[str]:
    """The commits that took a verdict with no boot of their own, as a count and a folded
    list, each with the judged commit in the table whose kernel it makes, or the note
    that its kernel was never booted and where that kernel's commit lies."""
    if not shared:
        return []
    lines = [
        "",
        f"{len(shared)} more commits took a verdict with no build or boot of their own (they "
        "touch no file the config compiles, or build a byte-identical image): the verdict "
        "of the kernel they make, or where that kernel's commit lies when it was never "
        "booted.",
        "",
        f"<details><summary>the {len(shared)} commits</summary>",
        "",
        "| # | commit | subject | verdict | the verdict of | why |",
        "|---|---|---|---|---|---|",
    ]
    for number, s in shared:
        why, _, whence = s.note.partition(": ")
        of = f"`{s.same_as[:12]}`" if s.same_as else md_text(whence)
        subject = md_text(clip(s.subject, 60))
        lines.append(
            f"| {number} | `{s.commit[:12]}` | {subject} | {s.verdict} | {of} | {md_text(why)} |"
        )
    return [*lines, "", "</details>"]


def answer_head(result: BisectResult, a: Answer) -> list[str]:
    """The answer at a glance: the commit, then a line each for the effect, the
    verification, the certainty and the boots it took, and the job's notes."""
    quoted = md_text(f'"{a.subject}"')
    subject = f" ({quoted})" if a.subject else ""
    lines = [f"**{a.verdict}**: {a.word} `{a.commit}`{subject}", ""]
    if a.effect and not result.pass_fail:
        lines.append(f"- effect: {md_text(a.effect)}")
    elif a.effect:
        lines.append(f"- the endpoints: {md_text(result.effect or a.effect)}")
    v = result.verification
    if a.verification and v is not None:
        kept = f" (tested as `{v.commit}`, kept under `refs/kbisect/verify/`)" if v.commit else ""
        lines.append(f"- verification: **{a.verification}**, {md_text(a.verification_text)}{kept}")
    if a.certainty_text:
        lines.append(f"- certainty: {a.certainty_text}")
    if result.boots:
        lines.append(f"- boots: {_boots_in_all(result)}")
    return [*lines, *(f"- {md_text(n)}" for n in result.notes), ""]


def markdown(result: BisectResult, job_id: str, folded: bool = False) -> str:
    """The job's report; `folded`: its tested commits and bisect log folded (a page,
    which shows the commits as its steps already)."""
    metric, unit = result.metric or "score", result.unit
    what = "fixed it" if result.mode == Mode.FIX else "caused it"
    lines = [
        f"# kbisect {md_text(job_id)}: {md_text(result.testcase)} ({result.mode} mode)",
        "",
    ]
    builds = builds_of(result)
    answer = answer_of(result) if result.culprit and not builds else None
    if answer is not None:
        lines += answer_head(result, answer)
    else:
        lines += [f"**{result.status}**: {md_text(result.message)}", ""]
    if result.boots and answer is None:
        sure = f"; {result.confidence:.1%} sure" if result.confidence is not None else ""
        effect = (
            ""
            if result.pass_fail
            else f"; the endpoints' difference in {metric}: {result.effect or 'not measured'}"
        )
        lines += [
            f"{_boots_in_all(result)}{sure}{effect}.",
            "",
            *(f"- {md_text(n)}" for n in result.notes),
            *([""] if result.notes else []),
        ]
    if builds:  # a list of prebuilt kernels: its commits are builds
        lines += ["## The builds between which it changed", "", md_text(builds), ""]
    elif answer is not None:
        lines += [f"## The commit that {what}", "", *_commit_lines(answer), ""]
    elif result.candidates:
        lines += ["## Candidates (skipped commits leave it open)", ""]
        lines += [f"- `{c}` {md_text(result.subjects.get(c, ''))}" for c in result.candidates]
        lines.append("")
    if answer is None:  # else the answer's head said it
        lines += verification_lines(result)
    lines += bad_boot_section(result)
    lines += trace_section(result)
    judged = (
        "boots passed / failed" if result.pass_fail else f"{metric} ({unit})" if unit else metric
    )
    tested = sum(s.source != StepSource.SAME_KERNEL for s in result.steps)
    lines += [
        "## Tested commits",
        "",
        *(
            [f"<details><summary>the {tested} booted, with their other metrics</summary>", ""]
            if folded
            else []
        ),
        *([NUMBERING, ""] if any(s.source == StepSource.SAME_KERNEL for s in result.steps) else []),
        f"| # | commit | subject | verdict | {judged} | other metrics | how |",
        "|---|---|---|---|---|---|---|",
    ]
    several_hosts = len({h for s in result.steps for h in s.hosts}) > 1
    shared = [(i, s) for i, s in enumerate(result.steps, 1) if s.source == StepSource.SAME_KERNEL]
    for i, s in enumerate(result.steps, 1):
        if s.source == StepSource.SAME_KERNEL:
            continue  # folded below the table: they were neither built nor booted
        value = "" if s.value is None else f"{s.value:g}"
        if result.pass_fail and s.scores:
            value = "{} / {}".format(*pass_fail_counts(s))
        others = ", ".join(f"{k} {v:g}" for k, v in s.values.items() if k != metric)
        how = s.source + (f": {s.note}" if s.note else "")
        if s.fixups:  # --fixup patches this commit's kernel was built with
            how += "; built with " + ", ".join(s.fixups)
        if several_hosts and s.hosts:  # which VM host ran which boot
            how += "; booted on " + ", ".join(f"{h} ({n})" for h, n in Counter(s.hosts).items())
        lines.append(
            f"| {i} | `{s.commit[:12]}` | {md_text(clip(s.subject, 60))} | {s.verdict} | {value} | "
            f"{md_text(others)} | {md_text(how)} |"
        )
    lines += same_kernel_lines(shared)
    lines += ["", "</details>"] if folded else []
    if is_kernel_list(Path(result.repo)):  # builds, not commits: nothing to replay
        return "\n".join([*lines, ""])
    lines += [
        "",
        "## Bisect log (`git bisect replay` accepts it)",
        "",
        *(["<details><summary>the log</summary>", ""] if folded else []),
        *md_code(bisect_log(result).rstrip()),
        *(["", "</details>"] if folded else []),
        "",
    ]
    return "\n".join(lines)
