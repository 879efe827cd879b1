"""InvestigationWorkflow: the whole chain of one regression, each stage a child job.

`kbisect bisect` and the doors start it and only follow it, so a closed terminal or a
restarted service drops nothing: the cross-tree check (a sweep of the distro endpoint
against the merge base), the bisection over prebuilt kernels then over the commits between
the two builds, the verification (inside the bisection), explain for a timing culprit,
and a backport to `--target`. Each stage keeps its own id, page and history (Pinpoint's
culprit finder: one parent, a child per stage); cancelling the investigation cancels the
running stage. The SRU draft is made from the stages' answers by `kbisect report`.
"""

import asyncio
from typing import TypeVar

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import (
        BACKPORT_CHANGE,
        BACKPORT_WORKFLOW,
        DEFAULT_SWEEP_BOOTS,
        EXPLAIN_WORKFLOW,
        INVESTIGATION_WORKFLOW,
        SWEEP_WORKFLOW,
        WORKFLOW,
        fit_summary,
    )
    from kbisect.summaries import Request, summary
    from kbisect.workflows.activity_calls import JobFailed, on_a_build_host, raise_if_cancelled
    from kbisect.workflows.backport_types import BackportResult
    from kbisect.workflows.bisect_types import BisectRequest, BisectResult, JobStatus
    from kbisect.workflows.explain_types import ExplainResult
    from kbisect.workflows.investigation_types import (
        NO_CHANGE,
        STATUS_HEAD,
        BackportChange,
        BackportChangeRequest,
        InvestigationProgress,
        InvestigationRequest,
        InvestigationResult,
        Stage,
        StageName,
        StageState,
        SweepBisect,
        backport_id,
        backport_request,
        explain_id,
        explain_request,
        stage_id,
    )
    from kbisect.workflows.search_attributes import (
        SA_CULPRIT,
        SA_STATUS,
        SA_SUMMARY,
        SA_TESTCASE,
    )
    from kbisect.workflows.sweep_types import PairWord, SweepResult

R = TypeVar("R")
# a stage job is a child: the investigation's cancel reaches it, and so does its end
CHILD_POLICY = workflow.ParentClosePolicy.REQUEST_CANCEL


def _why(err: ChildWorkflowError) -> str:
    """The stage job's own one-line failure, not Temporal's wrapping."""
    c: BaseException | None = err
    while isinstance(c, (ChildWorkflowError, ActivityError)) and c.cause is not None:
        c = c.cause
    return c.message if isinstance(c, ApplicationError) else str(c)


@workflow.defn(name=INVESTIGATION_WORKFLOW)
class InvestigationWorkflow:
    def __init__(self) -> None:
        self._progress = InvestigationProgress()
        self._sa = False

    @workflow.query(name="progress")
    def progress(self) -> InvestigationProgress:
        return self._progress

    def _set(self, status: str, message: str = "") -> None:
        p = self._progress
        p.status, p.message = status, message
        # the Web UI's "current details": which stage runs, and its job
        workflow.set_current_details(fit_summary(f"{status}: {message}" if message else status))
        if self._sa:
            workflow.upsert_search_attributes([SA_STATUS.value_set(STATUS_HEAD + status)])

    async def _stage(
        self, name: str, kind: str, req: Request, result_type: type[R], job: str = ""
    ) -> R | None:
        """Run one stage job to its answer; None: it failed (the stage says why)."""
        stage = Stage(name, job or stage_id(workflow.info().workflow_id, name), kind)
        self._progress.stages.append(stage)
        self._set(name, f"job {stage.job}")
        return await self._child(stage, req, result_type)

    async def _child(self, stage: Stage, req: Request, result_type: type[R]) -> R | None:
        line = fit_summary(summary(req))
        # the summary as a list column too, where the server has it (the client set the
        # investigation's own from the server's list of attributes)
        shown = workflow.info().typed_search_attributes.get(SA_SUMMARY) is not None
        try:
            result: R = await workflow.execute_child_workflow(
                stage.kind,
                req,
                id=stage.job,
                result_type=result_type,
                task_queue=workflow.info().task_queue,
                static_summary=line,
                search_attributes=TypedSearchAttributes([SearchAttributePair(SA_SUMMARY, line)])
                if shown
                else None,
                parent_close_policy=CHILD_POLICY,
            )
        except ChildWorkflowError as err:
            raise_if_cancelled(err)  # the stage was cancelled with the investigation
            stage.state, stage.line = StageState.FAILED, _why(err)
            return None
        stage.state = StageState.DONE
        return result

    def _end(
        self, status: str, message: str, bisection: str = "", culprit: str | None = None
    ) -> InvestigationResult:
        self._set("done" if status not in ("failed", "refused") else status, message)
        if self._sa and culprit:
            workflow.upsert_search_attributes([SA_CULPRIT.value_set(culprit)])
        return InvestigationResult(
            stages=self._progress.stages, status=status, message=message, culprit=culprit,
            bisection=bisection, testcase=self._testcase,
        )  # fmt: skip

    @workflow.run
    async def run(self, req: InvestigationRequest) -> InvestigationResult:
        self._testcase = req.testcase
        if req.search_attributes:
            self._sa = True
            workflow.upsert_search_attributes([SA_TESTCASE.value_set(req.testcase)])
        if req.sweep is not None:
            return await self._sweep_then_bisect(req.sweep)
        bisection = req.bisection
        assert bisection is not None
        if req.check is not None:
            sweep = await self._stage(StageName.CHECK, SWEEP_WORKFLOW, req.check.sweep, SweepResult)
            if sweep is None:
                raise self._failed()
            (pair,) = sweep.pairs
            stage = self._progress.stages[-1]
            effect = f" {pair.effect:+.1%}" if pair.effect is not None else ""
            stage.line = f"merge base {req.check.base[:12]}: {pair.metric} {pair.verdict}{effect}"
            if (why := req.check.refusal(pair)) is not None:
                stage.state = StageState.REFUSED
                return self._end("refused", why)
        first = StageName.KERNELS if req.kernels is not None else StageName.BISECT
        job, result = await self._bisect(first, bisection)
        if result is None:
            raise self._failed()
        if req.kernels is not None and (between := req.kernels.commits_between(result)):
            bisection = between
            job, result = await self._bisect(StageName.BISECT, between)
            if result is None:
                raise self._failed()
        if result.status != JobStatus.FOUND or result.culprit is None:
            return self._end(result.status, result.message, job)
        if req.explain and not result.pass_fail:
            ask = explain_request(result, job, bisection)
            ask.build_queue, ask.vm_queue = bisection.build_queue, bisection.vm_queue
            explained = await self._stage(
                StageName.EXPLAIN, EXPLAIN_WORKFLOW, ask, ExplainResult, explain_id(job)
            )
            if explained is not None:
                self._progress.stages[-1].line = explained.why[0] if explained.why else ""
        if req.target:
            await self._backport(req, bisection, job, result)
        return self._end(result.status, result.message, job, result.culprit)

    async def _sweep_then_bisect(self, asked: SweepBisect) -> InvestigationResult:
        """The series swept, then each change bisected, all at once (a farm takes them)."""
        sweep = await self._stage(StageName.SWEEP, SWEEP_WORKFLOW, asked.sweep, SweepResult)
        if sweep is None:
            raise self._failed()
        jobs = asked.bisections_of(sweep)
        changed = sum(p.verdict == PairWord.CHANGED for p in sweep.pairs)
        self._progress.stages[-1].line = f"{changed} of {len(sweep.pairs)} pairs changed"
        me = workflow.info().workflow_id
        stages = [
            Stage(f"{StageName.BISECT}-{n}", stage_id(me, f"{StageName.BISECT}-{n}"), WORKFLOW)
            for n in range(1, len(jobs) + 1)
        ]
        self._progress.stages += stages
        if stages:
            self._set(StageName.BISECT, ", ".join(s.job for s in stages))
        results = await asyncio.gather(
            *(self._child(st, job, BisectResult) for st, (_, job) in zip(stages, jobs, strict=True))
        )
        for stage, got in zip(stages, results, strict=True):
            if got is not None:
                stage.line = f"{got.status}: {got.message}"
        found = [r for r in results if r is not None and r.culprit]
        if not jobs:
            return self._end(NO_CHANGE, "no change to bisect")
        message = "; ".join(f"{s.name}: {s.line}" for s in stages)
        if len(jobs) == 1 and results[0] is not None:
            only = results[0]
            return self._end(only.status, only.message, stages[0].job, only.culprit)
        status = JobStatus.FOUND if len(found) == len(jobs) else "partly"
        return self._end(status, message)

    async def _bisect(self, name: str, req: BisectRequest) -> tuple[str, BisectResult | None]:
        result = await self._stage(name, WORKFLOW, req, BisectResult)
        stage = self._progress.stages[-1]
        if result is not None:
            stage.line = f"{result.status}: {result.message}"
        return stage.job, result

    async def _backport(
        self, req: InvestigationRequest, bisection: BisectRequest, job: str, result: BisectResult
    ) -> None:
        assert result.culprit is not None
        ask = BackportChangeRequest(result.repo, result.culprit, result.mode)
        try:
            change = await on_a_build_host(
                BACKPORT_CHANGE, ask, BackportChange, bisection.build_queue
            )
        except JobFailed as err:
            self._progress.stages.append(
                Stage(StageName.BACKPORT, "", BACKPORT_WORKFLOW, StageState.FAILED, err.message)
            )
            return
        target = (req.target, req.target_name)
        boots = req.backport_boots or DEFAULT_SWEEP_BOOTS
        backport = backport_request(result, job, change, target, boots, bisection)
        backport.build_queue, backport.vm_queue = bisection.build_queue, bisection.vm_queue
        backport.search_attributes = req.search_attributes
        done = await self._stage(
            StageName.BACKPORT, BACKPORT_WORKFLOW, backport, BackportResult,
            backport_id(job, backport),
        )  # fmt: skip
        if done is not None:
            said = done.message.startswith(done.word)  # "verified: ..." says its word
            self._progress.stages[-1].line = f"{'' if said else done.word + ': '}{done.message}"

    def _failed(self) -> JobFailed:
        """The chain stops at a failed stage: the investigation fails in its words."""
        stage = self._progress.stages[-1]
        message = f"the {stage.name} stage ({stage.job}) failed: {stage.line}"
        self._set("failed", message)
        return JobFailed(message)
