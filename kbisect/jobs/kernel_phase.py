"""`bisect --kernels`: a job over prebuilt kernels first, then (with K=REV and --repo) a
job over the commits between the last old-like build and the first new-like one (the
investigation narrows it: investigation_types.KernelsPhase)."""

import dataclasses
from dataclasses import dataclass

from kbisect.builders import kernel_list
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.jobs.request import JobOptions, checked_request, repository
from kbisect.settings import Settings
from kbisect.testcases import kselftest
from kbisect.testcases import manifest as manifests
from kbisect.workflows.investigation_types import KernelsPhase


@dataclass(frozen=True)
class KernelPhase:
    kernels: kernel_list.KernelList
    options: JobOptions  # the job over the kernels
    phase: KernelsPhase  # what the investigation needs to go on to the commits between


def plan(text: str, opts: JobOptions, settings: Settings) -> KernelPhase:
    items = kernel_list.parse(text)
    mapped = [rev for _, rev in items if rev]
    if opts.good or opts.bad:
        raise UserError("--kernels takes the first kernel as the old side: drop --good/--bad")
    if mapped and len(mapped) != len(items):
        raise UserError("--kernels: map every kernel to its revision (K=REV), or none")
    if mapped and opts.repo is None and opts.tree is None:
        raise UserError("--kernels K=REV: give --repo (or --tree) where the revisions are")
    if not mapped and (opts.repo or opts.tree):
        raise UserError("--repo with --kernels needs K=REV for each kernel (its revision)")
    revs: list[str] = []
    if mapped:  # resolved now: a typo fails before the first job starts
        git = Git(repository(opts, settings))
        revs = [git.resolve(rev) for rev in mapped]
    if kselftest.is_kselftest(opts.testcase):  # its selftests from the tree, built now
        if not revs:
            raise UserError(
                f"{opts.testcase}: prebuilt kernels have no tree to take the selftests from: "
                "map each kernel to its revision (K=REV) and give --repo (or --tree)"
            )
        tree = repository(opts, settings)
        testcase = kselftest.job_testcase(opts.testcase, tree, revs[-1], opts.selftests_from)
        manifests.load(testcase, tree)
        opts = dataclasses.replace(opts, testcase=testcase, selftests_from="")
    kernels = kernel_list.make([spec for spec, _ in items], settings)
    old, new = kernels.first, kernels.last
    good, bad = ([old], new) if opts.mode == Mode.REGRESSION else ([new], old)
    job = dataclasses.replace(
        opts, repo=str(kernels.repo), tree=None, good=good, bad=bad, verify=False
    )
    between = None
    if revs:  # checked now with the outer revisions; the workflow narrows them
        ends = ([revs[0]], revs[-1]) if opts.mode == Mode.REGRESSION else ([revs[-1]], revs[0])
        outer = dataclasses.replace(opts, good=ends[0], bad=ends[1], fetch=False)
        between = checked_request(outer, settings)
    return KernelPhase(kernels, job, KernelsPhase(list(kernels.commits), revs, between))
