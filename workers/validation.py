"""Validate a job: resolve revisions, check ancestry, load the testcase, read the range.

Everything the workflow needs to decide comes back in one ValidatedJob, so the workflow
never touches git. Bad input is a UserError with one line that says what to do.
"""

from pathlib import Path

from kbisect.builders.kconfig import stored_config
from kbisect.builders.patched_commit import stored_patch
from kbisect.builders.trees import fetch_repo
from kbisect.contract import Mode, ValidatedJob
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.testcases import kselftest
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import profile
from kbisect.testcases.tuning import check_sweep, check_tuning
from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.sweep_types import SweepJob, SweepRequest, SweepTestcase

# Subjects of a larger range would take the job's first payload near Temporal's 2 MB limit.
MAX_SUBJECTS = 5000


def validate(req: BisectRequest) -> ValidatedJob:
    git = Git(Path(req.repo))
    git.check_repo()
    if req.tree is not None:  # a mirror: what was pushed since the job was asked for counts
        fetch_repo(Path(req.repo))
    if req.mode not in tuple(Mode):
        raise UserError(f"unknown mode {req.mode!r}: use regression or fix")
    if not req.good:
        raise UserError("give at least one --good revision")
    old, new = _endpoints(git, req)
    # a kselftest's selftests from the new end, unless the request pinned them (the doors)
    testcase = kselftest.job_testcase(req.testcase, Path(req.repo), new)
    manifest = manifests.load(testcase, Path(req.repo))
    stored_config(req.config)  # this host sees the job's --config (builds need it)
    for fixup in req.fixups:  # and its --fixup patches
        stored_patch(fixup.path, fixup.name)
    prof = profile(req.profile or manifest.profile)
    order, parent_index, subjects = _range(git, old, new)
    primary = check_tuning(
        manifest, req.metric, req.min_effect, req.max_boots, req.trace, req.min_rate_step
    )
    metric = manifest.metrics[primary]
    repetitions = req.repetitions or manifest.repetitions_for(primary)
    return ValidatedJob(
        old=old,
        new=new,
        order=order,
        parent_index=parent_index,
        subjects=subjects,
        testcase=manifest.name,
        primary=primary,
        unit=metric.unit,
        better=metric.better.value,
        profile=prof.name,
        repetitions=repetitions,
        test_timeout=manifest.timeout_for(repetitions),
        old_subjects={o: git.commit_info(o).subject for o in old},
        pass_fail=manifest.pass_fail,
        signature=manifests.job_signature(manifest, req.signature),
        flaky=manifests.job_flaky(manifest, req.flaky),
    )


def validate_sweep(req: SweepRequest) -> SweepJob:
    """A sweep's kernels (full hashes, as given) and each testcase's metric and timing."""
    git = Git(Path(req.repo))
    git.check_repo()
    check_sweep(None, len(req.kernels))
    kernels = [git.resolve(k) for k in req.kernels]
    testcases = []
    for name in req.testcases:  # a kselftest's selftests from the newest kernel
        pinned = kselftest.job_testcase(name, Path(req.repo), kernels[-1] if kernels else "HEAD")
        manifest = manifests.load(pinned, Path(req.repo))
        if not req.pass_fail_ok:
            check_sweep(manifest)
        primary = check_tuning(manifest, req.metric, req.min_effect, req.boots, False)
        repetitions = manifest.repetitions_for(primary)
        testcases.append(
            SweepTestcase(
                name=manifest.name,
                metric=primary,
                unit=manifest.metrics[primary].unit,
                better=manifest.metrics[primary].better.value,
                profile=profile(req.profile or manifest.profile).name,
                repetitions=repetitions,
                test_timeout=manifest.timeout_for(repetitions),
                exact=manifest.metrics[primary].exact,
                pass_fail=manifest.pass_fail,
                disks=bool(manifest.disks),
            )
        )
    if not testcases:
        raise UserError("give at least one --testcase")
    subjects = [git.commit_info(k).subject for k in kernels]
    return SweepJob(kernels=kernels, subjects=subjects, testcases=testcases)


def _endpoints(git: Git, req: BisectRequest) -> tuple[list[str], str]:
    """The old side (full hashes) and the new endpoint, by the job's mode."""
    goods = [git.resolve(g) for g in req.good]
    bad = git.resolve(req.bad)
    if req.mode == Mode.REGRESSION:
        old, new = goods, bad
        for g in goods:
            if not git.is_ancestor(g, bad):
                raise UserError(
                    f"good {g[:12]} is not an ancestor of bad {bad[:12]}: swap them, or pass "
                    "--mode fix if the newer revision is the good one"
                )
    else:
        if len(goods) != 1:
            raise UserError("fix mode takes one --good (the fixed, newer revision)")
        old, new = [bad], goods[0]
        if not git.is_ancestor(bad, new):
            raise UserError(
                f"in fix mode bad {bad[:12]} (still broken) must be an ancestor of good "
                f"{new[:12]} (fixed): swap them, or drop --mode fix"
            )
    if new in old:
        raise UserError("good and bad are the same commit: nothing to bisect")
    return old, new


def _range(git: Git, old: list[str], new: str) -> tuple[list[str], list[list[int]], dict[str, str]]:
    """The commits in new but not old: hashes newest first, parents as indices, subjects
    (only for ranges small enough to carry them; builds report the others)."""
    excluded = [f"^{o}" for o in old]
    out = git.run("rev-list", "--topo-order", "--parents", new, *excluded, "--")
    rows = [line.split() for line in out.splitlines() if line.strip()]
    order = [r[0] for r in rows]
    index = {h: i for i, h in enumerate(order)}
    parent_index = [[index[p] for p in r[1:] if p in index] for r in rows]
    subjects: dict[str, str] = {}
    if len(order) <= MAX_SUBJECTS:
        log = git.run("log", "--format=%H%x00%s", "--topo-order", new, *excluded, "--")
        subjects = dict(line.split("\0", 1) for line in log.splitlines() if "\0" in line)
    return order, parent_index, subjects
