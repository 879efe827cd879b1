"""SweepWorkflow: a series of kernels measured side by side, each neighbouring pair judged.

`kbisect sweep` starts it (and a Schedule can): every kernel is built once per testcase,
then booted in rounds of a random order (workflows.sweep decides what and when), one guest
at a time, so that no build or other guest shares a timed boot's host. The answer is a
verdict per neighbouring pair and testcase: changed (worse or better), same, or cannot
tell, with the effect's interval.
"""

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import SWEEP_WORKFLOW, BuildResult
    from kbisect.decide.sweep import Sweep, verdicts_text
    from kbisect.workflows.activity_calls import (
        Blocking,
        JobActivities,
        JobFailed,
        JobSite,
        ShowsStatus,
        cause,
        raise_if_cancelled,
        testcase_job,
        validate_sweep,
    )
    from kbisect.workflows.search_attributes import SA_STATUS, SA_TESTCASE
    from kbisect.workflows.series_measure import build_series, measure_series
    from kbisect.workflows.sweep_types import (
        PairWord,
        SweepJob,
        SweepPair,
        SweepProgress,
        SweepRequest,
        SweepResult,
        SweepTrace,
    )


@workflow.defn(name=SWEEP_WORKFLOW)
class SweepWorkflow(ShowsStatus):
    _progress: SweepProgress
    _noun = "sweep"

    def __init__(self) -> None:
        self._progress = SweepProgress(status="validating")
        self._blocking = Blocking(self._on_blocked, self._on_clear)
        self._status = "validating"

    @workflow.query(name="progress")
    def progress(self) -> SweepProgress:
        return self._progress

    @workflow.run
    async def run(self, req: SweepRequest) -> SweepResult:
        p = self._progress
        p.kernels, p.names = list(req.kernels), list(req.names)
        p.testcases = list(req.testcases)
        if req.search_attributes:
            self._sa = True
            testcases = SA_TESTCASE.value_set(",".join(req.testcases))
            workflow.upsert_search_attributes([testcases, SA_STATUS.value_set("sweep validating")])
        try:
            job = await validate_sweep(req)
        except JobFailed as err:
            self._set("failed", err.message)
            raise
        p.planned = len(job.kernels) * len(job.testcases) * req.boots
        calls = JobActivities(JobSite.of(req), self._blocking)
        calls.subjects = dict(zip(job.kernels, job.subjects, strict=False))
        sweep = Sweep(len(job.kernels), job.testcases, req.boots, req.min_effect, req.max_boots)
        self._set("building", f"{len(set(job.kernels)) * len(job.testcases)} kernels")
        builds = await build_series(calls, sweep, job)
        self._set("measuring")
        await measure_series(calls, sweep, job, builds, p.boots)
        pairs = sweep.pairs()
        traces = await self._trace(calls, job, builds, pairs) if req.trace else []
        self._set("done", verdicts_text(pairs))
        return SweepResult(
            repo=req.repo,
            kernels=job.kernels,
            names=req.names or job.subjects,
            subjects=job.subjects,
            testcases=job.testcases,
            pairs=pairs,
            boots=p.boots,
            budget=req.boots,
            message=self._progress.message,
            traces=traces,
            max_boots=sweep.cap,
            min_effect=req.min_effect,
        )

    async def _trace(
        self,
        calls: JobActivities,
        job: SweepJob,
        builds: dict[tuple[str, str], BuildResult],
        pairs: list[SweepPair],
    ) -> list[SweepTrace]:
        """One traced boot of both kernels of each changed pair, one after another, after
        every scored boot (the tracer slows I/O down: never scored). A kernel that cannot
        be traced says why; the verdicts stand without it."""
        testcases = {tc.name: tc for tc in job.testcases}
        wanted = [
            (p.testcase, k) for p in pairs if p.verdict == PairWord.CHANGED for k in (p.old, p.new)
        ]
        done: list[SweepTrace] = []
        for name, k in dict.fromkeys(wanted):
            commit, tc = job.kernels[k], testcases[name]
            self._set("tracing", f"{name} on kernel {k + 1} (blktrace)")
            art = builds[name, commit].artifact
            assert art is not None  # a changed pair's kernels were built and booted
            try:
                traced = await calls.trace(testcase_job(tc), commit, art)
                found = traced.diagnostics or {"error": traced.error}
            except ActivityError as err:
                raise_if_cancelled(err)
                found = {"error": cause(err)}
            done.append(SweepTrace(name, k, found))
        return done
