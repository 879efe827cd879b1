"""A draft Ubuntu SRU justification from a finished job: what to backport (or revert), the
evidence, and how to test it. A draft for a person to finish, never sent anywhere."""

from kbisect.builders.backport_found import upstream_fixes
from kbisect.builders.distro_series import sru_series
from kbisect.contract import Mode
from kbisect.errors import KbisectError, UserError
from kbisect.reports.answer import commit_info
from kbisect.reports.backport_report import before_after, left_out, role
from kbisect.reports.job_report import repo_output
from kbisect.reports.sru_risk import kernels_booted, where_problems
from kbisect.testcases import manifest as manifests
from kbisect.workflows.backport_types import BackportResult
from kbisect.workflows.bisect_types import BisectResult, Step

BUGLINK = "https://bugs.launchpad.net/bugs/{bug}"


def buglink(bug: int | None) -> str:
    return "BugLink: " + BUGLINK.format(bug=bug if bug is not None else "<bug number>")


def _endpoint(result: BisectResult, side: str) -> Step | None:
    commit = result.old[0] if side == "old" and result.old else result.new
    return next((s for s in result.steps if s.source == "endpoint" and s.commit == commit), None)


def _value(step: Step | None, metric: str) -> str:
    """The step's value of the job's metric: the median of its boots (a step from before
    the median was kept: its last boot's)."""
    if step is not None and step.value is not None:
        return f"{step.value:g}"
    if step is None or metric not in step.values:
        return "?"
    return f"{step.values[metric]:g}"


def _files(repo: str, commit: str) -> list[str]:
    out = repo_output(repo, "show", "--format=", "--stat=100", "--first-parent", commit) or ""
    return [line.strip() for line in out.splitlines() if line.strip()]


def _tree(result: BisectResult) -> str:
    """The endpoint the fix goes to: the one that has the problem."""
    return result.new if result.mode == Mode.REGRESSION else result.old[0]


def sru_note(
    result: BisectResult,
    job_id: str,
    bug: int | None = None,
    patch: bytes | None = None,
    provenance: str = "cherry picked",
    series: str | None = None,
    why: list[str] | None = None,
    backport: BackportResult | None = None,
) -> str:
    """The justification; `series` (jammy) names the release the fix goes to (None: the
    tree's own, from its debian/changelog, or none named where it has none); `why`: the
    Why lines of the job's explain job (kbisect explain), for the Impact; `backport`: a
    verified backport job, whose series is the Fix and whose figures the Test Plan."""
    if not result.culprit:
        raise UserError(
            f"job {job_id} did not name one commit ({result.status}): an SRU note needs one; "
            "narrow the candidates with 'kbisect mark' in a new job"
        )
    broken, fixed = (
        (_endpoint(result, "new"), _endpoint(result, "old"))
        if result.mode == Mode.REGRESSION
        else (_endpoint(result, "old"), _endpoint(result, "new"))
    )
    series = sru_series(series, result.repo, backport.target if backport else _tree(result))
    sections = [
        ("Impact", _impact(result, broken, fixed) + _why(why)),
        (
            "Fix",
            _backport_fix(backport, series) if backport else _fix(result, bug, provenance, series),
        ),
        ("Test Plan", _test_plan(result, broken, fixed) + _measured(backport)),
        ("Where problems could occur", where_problems(result, patch)),
        ("Other Info", _other(result, job_id)),
    ]
    lines = ["SRU Justification", ""]
    for title, body in sections:
        lines += [f"[{title}]", "", *body, ""]
    return "\n".join(lines)


def _unit(result: BisectResult) -> str:
    return f" {result.unit}" if result.unit else ""


def _impact(result: BisectResult, broken: Step | None, fixed: Step | None) -> list[str]:
    """The measured effect, in the testcase's own words."""
    c, metric, unit = result.culprit or "", result.metric, _unit(result)
    subject = result.subjects.get(c, "")
    try:
        m = manifests.load(result.testcase)
        what, metric_text = m.description, m.metrics[metric].description or metric
    except (KbisectError, KeyError):
        what, metric_text = result.testcase, metric
    counts = [s.boots for s in (broken, fixed) if s is not None and s.boots]
    if len(counts) == 2 and counts[0] == counts[1] == 1:
        boots = " (one boot of each)."
    elif len(counts) == 2:
        boots = f" (medians of {counts[0]} and {counts[1]} boots)."
    else:
        boots = "."
    impact = [
        f"{what}: {metric_text} is {_value(broken, metric)}{unit} on affected kernels, "
        f"against {_value(fixed, metric)}{unit} on good ones{boots}",
    ]
    if result.effect:
        impact.append(f"The new endpoint against the old: {result.effect}.")
    if result.mode == Mode.REGRESSION:
        impact.append(f'The change came with commit {c[:12]} ("{subject}").')
    else:
        impact.append(f'Commit {c[:12]} ("{subject}") fixed it; affected kernels lack it.')
    return impact


def _why(why: list[str] | None) -> list[str]:
    """What the culprit changed in the running system, measured on its explain boots."""
    if not why:
        return []
    return ["", "What changed with it, the culprit's boots against its parent's:", *why]


def _fix(result: BisectResult, bug: int | None, provenance: str, series: str | None) -> list[str]:
    """What to ship: the upstream fix or a revert (regression), the backport (fix mode)."""
    c = result.culprit or ""
    subject = result.subjects.get(c, "")
    to, into = (f" to {series.capitalize()}", f" in {series.capitalize()}") if series else ("", "")
    if result.mode != Mode.REGRESSION:
        fix = [
            f'Backport commit {c} ("{subject}"){to}, with the trailers',
            "",
            f"    {buglink(bug)}",
            f"    ({provenance} from commit {c})",
            "",
        ]
    elif fixes := [f'{h} ("{subj}")' for h, subj in upstream_fixes(result.repo, c)]:
        fix = [
            f"Backport{to} the commit that fixes it (its Fixes: tag names {c[:12]}):",
            "",
            *(f"    {f}" for f in fixes),
            "",
            f'or revert commit {c} ("{subject}"){into}.',
        ]
    else:
        fix = [
            f'Revert commit {c} ("{subject}"){into}, or backport an upstream fix: no branch '
            f"or tag here has a commit with 'Fixes: {c[:12]}'."
        ]
    info = commit_info(result.repo, c)
    if info is not None:
        fix.append(f"Author and date: {info.author}, {info.date}.")
    v = result.verification
    if v is not None:
        fix.append(f"kbisect verification ({v.kind}): {v.status}: {v.message}.")
    files = _files(result.repo, c)
    if files:
        fix += ["", "Touches:", "", *(f"    {f}" for f in files)]
    return fix


def _test_plan(result: BisectResult, broken: Step | None, fixed: Step | None) -> list[str]:
    metric, unit = result.metric, _unit(result)
    profile = f" --profile {result.profile}" if result.profile else ""
    reps = f" --repetitions {result.repetitions}" if result.repetitions else ""
    return [
        f"Run the kbisect testcase {result.testcase} on the kernel without and with the patch "
        "(REV: each kernel's commit):",
        "",
        f"    kbisect try --repo KERNEL_TREE REV --testcase {result.testcase}{profile}{reps}",
        "",
        f"Without the patch {metric} is about {_value(broken, metric)}{unit}; with it, about "
        f"{_value(fixed, metric)}{unit}.",
    ]


def _backport_fix(b: BackportResult, series: str | None) -> list[str]:
    """The verified series, in the order it applies, each with its provenance (a revert:
    the culprit reverted on the target, there being no upstream fix)."""
    to = f" to {series.capitalize()}" if series else ""
    name = b.shown_target
    if b.plan.revert:
        (c,) = b.plan.series
        subject = b.plan.subjects.get(c, "")
        return [
            f'Revert commit {c[:12]} ("{subject}"){to}: no upstream commit\'s Fixes: tag '
            f"names the culprit; the revert applies to {name} ({b.target[:12]})."
        ]
    lines = [f"Backport{to}, in this order (checked to apply on {name}, {b.target[:12]}):", ""]
    for n, c in enumerate(b.plan.series, start=1):
        lines.append(f'    {n}. {c[:12]} ("{b.plan.subjects.get(c, "")}"): {role(b.plan, c)}')
        lines.append(f"       (cherry picked from commit {c})")
    if left := left_out(b.plan):
        lines += ["", "Follow-ups upstream (their Fixes: names the series), not included:", ""]
        lines += [f'    {c[:12]} ("{b.plan.subjects.get(c, "")}")' for c in left]
    return lines


def _measured(b: BackportResult | None) -> list[str]:
    """The backport job's before and after on the target, as kbisect measured them."""
    if b is None:
        return []
    name = b.shown_target
    return [
        "",
        f"Measured on {name} ({b.target[:12]}) without and with the series by kbisect "
        f"job {b.id} (backport of job {b.job}), the two kernels booted in turn on one host:",
        "",
        *(f"    {line}" for line in before_after(b)),
        f"    {b.message}",
    ]


def _other(result: BisectResult, job_id: str) -> list[str]:
    return [
        f"Found by kbisect job {job_id} ({result.mode} mode) between "
        f"{', '.join(o[:12] for o in result.old)} and {result.new[:12]}: "
        f"{len(result.steps)} commits judged, {kernels_booted(result)} kernels booted.",
        "`kbisect report " + job_id + " --bisect-log FILE` gives a log for `git bisect replay`.",
    ]
