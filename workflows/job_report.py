"""A bisection's result as the contract has it: the job, its answer and its steps."""

from kbisect.workflows.bisect_types import BisectResult, JobStatus, Step, Verification
from kbisect.workflows.job_state import JobState


def result_of(
    state: JobState,
    status: JobStatus,
    culprit: str | None,
    candidates: list[str],
    steps: list[Step],
    message: str,
    verification: Verification | None,
    extra: dict[str, object],
) -> BisectResult:
    req, job, subjects = state.req, state.job, state.subjects
    named = sorted({*candidates, *(s.commit for s in steps)})
    return BisectResult(
        status=status,
        mode=req.mode,
        testcase=req.testcase,
        repo=req.repo,
        old=job.old,
        new=job.new,
        culprit=culprit,
        candidates=candidates,
        steps=steps,
        message=message,
        metric=job.primary,
        unit=job.unit,
        verification=verification,
        profile=job.profile,
        repetitions=job.repetitions,
        pass_fail=job.pass_fail,
        subjects={c: subjects.get(c, "") for c in named},
        **extra,  # type: ignore[arg-type]
    )
