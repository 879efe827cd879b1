"""`sweep --bisect`: the investigation that sweeps a series and then bisects each pair that
changed (investigation_types.SweepBisect), its bisections checked here, before anything
starts: one per testcase over the series' outer revisions, whose endpoints and mode the
workflow sets for each change."""

from dataclasses import dataclass

from kbisect.jobs.request import JobOptions, checked_request
from kbisect.settings import Settings
from kbisect.workflows.investigation_types import SweepBisect
from kbisect.workflows.sweep_types import SweepRequest


@dataclass(frozen=True)
class Sources:
    """Where each kernel of the series was built from: a repository and one full hash
    per kernel (a series of revisions is its own source; prebuilt kernels need K=REV)."""

    repo: str
    revs: list[str]


def plan(req: SweepRequest, sources: Sources, settings: Settings) -> SweepBisect:
    """The sweep and each testcase's bisection, checked as `kbisect bisect` checks one."""
    first = sources.revs[0]
    other = next((r for r in sources.revs if r != first), None)
    jobs = {}
    if other is not None:  # else every kernel is one revision: nothing between to bisect
        for testcase in req.testcases:
            opts = JobOptions(
                good=[first], bad=other, testcase=testcase, repo=sources.repo,
                metric=req.metric, profile=req.profile, min_effect_pct=req.min_effect * 100,
            )  # fmt: skip
            jobs[testcase] = checked_request(opts, settings)
    return SweepBisect(req, list(sources.revs), jobs)
