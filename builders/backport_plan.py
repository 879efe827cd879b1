"""What a backport needs, found in the repository before anything is built: whether the
target already carries the change, else the series that applies there (its
prerequisites first), written as commits on the target: the test kernel's source."""

from pathlib import Path

from kbisect.builders.backport_found import find_in, fixes_naming
from kbisect.builders.backport_series import applies, plan_series, write_series
from kbisect.builders.verify_commit import make_verify_commit
from kbisect.infra.git import Git
from kbisect.workflows.backport_types import BackportPlan, BackportRequest, BackportWord


def plan_backport(req: BackportRequest) -> BackportPlan:
    git = Git(Path(req.repo))
    change, target = git.resolve(req.change), git.resolve(req.target)
    subjects = {change: git.commit_info(change).subject}
    if req.revert:
        return _revert(git, req, change, target, subjects)
    found = find_in(git, change, target)
    if found is not None:
        subjects[found.commit] = found.subject
        how = "" if found.how == "ancestor" else f" as {found.commit[:12]} ({found.how})"
        return BackportPlan(
            BackportWord.ALREADY, change, subjects, found.commit, found.how,
            message=f'{change[:12]} ("{subjects[change]}") is already in {req.shown_target}{how}: '
            "nothing to build",
        )  # fmt: skip
    series = plan_series(git, change, target)
    if not series.commits:
        return BackportPlan(BackportWord.CONFLICT, change, subjects, message=series.conflict)
    followups = _followups(git, series.commits, target)
    commits, note = series.commits, ""
    if followups and req.with_followups:
        fits = applies(git, target, [*series.commits, *followups])
        if fits.ok:
            commits = [*series.commits, *followups]
        else:
            note = f"; its follow-ups left out: {fits.failed[:12]} does not apply ({fits.error})"
    subjects |= {c: git.commit_info(c).subject for c in [*commits, *followups]}
    patched = write_series(git, target, commits)
    needs = (
        f" after {len(series.prerequisites)} prerequisite"
        f"{'s' * (len(series.prerequisites) != 1)}: "
        + ", ".join(f'{c[:12]} ("{subjects[c]}")' for c in series.prerequisites)
        if series.prerequisites
        else " as it is"
    )
    return BackportPlan(
        "", change, subjects, series=commits, prerequisites=series.prerequisites,
        followups=followups, patched=patched,
        message=f"{change[:12]} applies to {req.shown_target}{needs}{note}",
    )  # fmt: skip


def _followups(git: Git, series: list[str], target: str) -> list[str]:
    """Commits whose Fixes: names one of the series, that neither it nor the target has."""
    return [f for f in fixes_naming(git, series) if find_in(git, f, target) is None]


def _revert(
    git: Git, req: BackportRequest, culprit: str, target: str, subjects: dict[str, str]
) -> BackportPlan:
    """No upstream fix: the culprit (or the target's own copy of it) reverted there."""
    found = find_in(git, culprit, target)
    if found is None:
        return BackportPlan(
            BackportWord.NOT_AFFECTED, culprit, subjects, revert=True,
            message=f"{req.shown_target} does not carry {culprit[:12]} (\"{subjects[culprit]}\"): "
            "nothing to revert",
        )  # fmt: skip
    made = make_verify_commit(git, found.commit, target, revert=True)
    if made.commit is None:
        return BackportPlan(
            BackportWord.CONFLICT, culprit, subjects, message=made.error, revert=True
        )
    subjects[found.commit] = found.subject
    return BackportPlan(
        "", culprit, subjects, revert=True, series=[found.commit], patched=made.commit,
        message=f"{found.commit[:12]} reverts cleanly on {req.shown_target}",
    )  # fmt: skip
