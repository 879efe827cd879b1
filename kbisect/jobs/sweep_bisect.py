"""From a sweep's changes to bisections: one job per neighbouring pair that changed,
between the two kernels' source revisions (a commit bisection), in regression mode when
the newer kernel is worse and in fix mode when it is better."""

from dataclasses import dataclass

from kbisect.contract import Mode, PairWord, SweepPair, SweepResult
from kbisect.jobs.request import JobOptions


@dataclass(frozen=True)
class Sources:
    """Where each kernel of the series was built from: a repository and one full hash
    per kernel (a series of revisions is its own source; prebuilt kernels need K=REV)."""

    repo: str
    revs: list[str]


def bisection(
    pair: SweepPair, sources: Sources, profile: str | None, min_effect: float
) -> JobOptions:
    old, new = sources.revs[pair.old], sources.revs[pair.new]
    fix = pair.direction == "better"
    return JobOptions(
        good=[new] if fix else [old],
        bad=old if fix else new,
        testcase=pair.testcase,
        repo=sources.repo,
        mode=(Mode.FIX if fix else Mode.REGRESSION).value,
        metric=pair.metric,
        profile=profile,
        min_effect_pct=min_effect * 100,
    )


def bisections(
    result: SweepResult, sources: Sources, profile: str | None, min_effect: float
) -> list[tuple[SweepPair, JobOptions]]:
    """A job for each pair that changed and whose two kernels come from different
    revisions (the same revision twice has nothing between to bisect)."""
    return [
        (p, bisection(p, sources, profile, min_effect))
        for p in result.pairs
        if p.verdict == PairWord.CHANGED and sources.revs[p.old] != sources.revs[p.new]
    ]
