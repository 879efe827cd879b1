"""ExplainWorkflow: why the culprit changed the metric.

`kbisect explain` starts it once a bisection has named a commit (or for a pair given by
hand). The parent and the culprit are built with the diagnostics fragment (perf events,
kallsyms, schedstats), then booted in turn, A B B A, on one VM host at a time: each boot
runs the testcase between two reads of the guest's statistics and under perf. The answer
says whether the pair still shows the job's change on these kernels, which statistics
moved beyond their noise (kbisect.explain), and each side's CPU stacks for a differential
flame graph. A workflow of its own: the bisection's history stays as it was.
"""

import asyncio
import statistics

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import (
        CHANGED_FUNCTIONS,
        EXPLAIN_BOOTS_EXACT,
        EXPLAIN_BOOTS_TIMING,
        EXPLAIN_MAX_BOOTS,
        EXPLAIN_WORKFLOW,
        TestResult,
        TestStatus,
        TraceResult,
        ValidatedJob,
    )
    from kbisect.explain import layout, traced
    from kbisect.explain.compare import Change, change_of, interleaved
    from kbisect.explain.summary import ran, score, summarise
    from kbisect.model import Artifact
    from kbisect.workflows.activity_calls import (
        Blocking,
        JobActivities,
        JobFailed,
        JobSite,
        ShowsStatus,
        cause,
        on_a_build_host,
        raise_if_cancelled,
        testcase_job,
        validate_sweep,
    )
    from kbisect.workflows.explain_types import (
        AlignmentCheck,
        AlignmentWord,
        ChangedFunctionsRequest,
        ExplainBootResult,
        ExplainProgress,
        ExplainRequest,
        ExplainResult,
    )
    from kbisect.workflows.sweep_types import SweepRequest

# A job's --boots over EXPLAIN_MAX_BOOTS fails at once (its results would fill the history)
BOOTS_CAP_PATCH = "explain-boots-cap"


@workflow.defn(name=EXPLAIN_WORKFLOW)
class ExplainWorkflow(ShowsStatus):
    _progress: ExplainProgress
    _noun = "explain job"

    def __init__(self) -> None:
        self._progress = ExplainProgress(status="validating")
        self._blocking = Blocking(self._on_blocked, self._on_clear)
        self._status = "validating"

    @workflow.query(name="progress")
    def progress(self) -> ExplainProgress:
        return self._progress

    def _fail(self, message: str) -> JobFailed:
        self._set("failed", message)
        return JobFailed(message)

    @workflow.run
    async def run(self, req: ExplainRequest) -> ExplainResult:
        p = self._progress
        p.testcase = req.testcase
        # the doors refuse it; this is for a request by hand (patched: a job started with
        # more before the cap carries on as it began)
        if req.boots > EXPLAIN_MAX_BOOTS and workflow.patched(BOOTS_CAP_PATCH):
            raise self._fail(f"{req.boots} boots of each side: {EXPLAIN_MAX_BOOTS} at most")
        sweep = SweepRequest(
            req.repo, [req.parent, req.culprit], [req.testcase], metric=req.metric,
            profile=req.profile, build_queue=req.build_queue, vm_queue=req.vm_queue,
        )  # fmt: skip
        try:
            job = await validate_sweep(sweep)
        except JobFailed as err:
            self._set("failed", err.message)
            raise
        (parent, culprit), (tc,) = job.kernels, job.testcases
        p.parent, p.culprit = parent, culprit
        boots = req.boots or (EXPLAIN_BOOTS_EXACT if tc.exact else EXPLAIN_BOOTS_TIMING)
        p.planned = 2 * boots
        calls = JobActivities(JobSite.of(req, req.fixups), self._blocking)
        self._set("building", "the parent and the culprit with the diagnostics options")
        builds = await asyncio.gather(
            *(calls.build(commit, tc.name, explain=True) for commit in (parent, culprit))
        )
        built = {}
        for commit, side, b in zip((parent, culprit), ("parent", "culprit"), builds, strict=True):
            if not b.ok or b.artifact is None:
                raise self._fail(f"the {side} {commit[:12]} does not build with the "
                                 f"diagnostics options: {b.error} (log: {b.log})")  # fmt: skip
            built[commit] = b.artifact
        tested = testcase_job(tc)
        sides: dict[bool, list[ExplainBootResult]] = {False: [], True: []}
        failed: list[str] = []
        self._set("booting", f"{boots} explain boots of each, in turn")
        for n, is_culprit in enumerate(interleaved(boots), start=1):
            commit = culprit if is_culprit else parent
            name = "culprit" if is_culprit else "parent"
            try:
                got = await calls.explain(tested, commit, built[commit])
            except ActivityError as err:
                raise_if_cancelled(err)
                got = ExplainBootResult(commit, TestStatus.BOOT_FAILED, error=cause(err))
            sides[is_culprit].append(got)
            if got.status == TestStatus.OK and got.samples:
                value = score(got)
                line = f"boot {n}: {name} {commit[:12]} {tc.metric} {value:.6g} {tc.unit}"
                p.boots.append(line + (f" on {got.host}" if got.host else ""))
            else:
                failed.append(f"{name} {commit[:12]}: {got.status}: {got.error}")
                p.boots.append(f"boot {n}: {name} {commit[:12]} {got.status}: {got.error}")
        if tc.disks:
            await self._traced(calls, tested, built, sides, boots, failed)
        self._set("comparing")
        try:
            summary = summarise(sides[False], sides[True], tc.metric)
        except ValueError as err:
            raise self._fail(f"{err}: {'; '.join(failed)}") from None
        alignment, suggestion = None, ""
        if req.alignment:
            alignment = await self._aligned(calls, tested, parent, culprit, boots, summary.effect)
        elif not tc.exact:
            suggestion = await self._suggestion(req, parent, culprit, summary.stacks["culprit"])
        self._set("done", summary.message)
        return ExplainResult(
            status=summary.status,
            repo=req.repo,
            testcase=tc.name,
            metric=tc.metric,
            unit=tc.unit,
            better=tc.better,
            parent=parent,
            culprit=culprit,
            subjects=job.subjects,
            job=req.job,
            effect=summary.effect.to_json(),
            comparison=summary.comparison.to_json(),
            why=summary.why,
            boots=boots,
            failed=failed,
            stacks=summary.stacks,
            folders=[b.folder for side in sides.values() for b in side if b.folder],
            message=summary.message,
            alignment=alignment,
            suggestion=suggestion,
            notes=summary.notes,
        )

    async def _suggestion(
        self, req: ExplainRequest, parent: str, culprit: str, stacks: dict[str, int]
    ) -> str:
        """The alignment check suggested, or not, from the functions the diff touches; a
        hint: a diff git cannot give leaves it out, never the answer."""
        try:
            touched: list[str] = await on_a_build_host(
                CHANGED_FUNCTIONS, ChangedFunctionsRequest(req.repo, parent, culprit),
                list[str], req.build_queue,
            )  # fmt: skip
        except JobFailed:
            return ""
        return layout.suggestion(touched, stacks, req.job)

    async def _traced(
        self,
        calls: JobActivities,
        job: ValidatedJob,
        built: dict[str, Artifact],
        sides: dict[bool, list[ExplainBootResult]],
        boots: int,
        failed: list[str],
    ) -> None:
        """Traced boots of the explain kernels (blktrace, one repetition: the tracer slows
        I/O, so apart from the explain boots), in turn; each one's figures join the
        statistics of one explain boot of its side, as the source "blktrace"."""
        p = self._progress
        p.planned += 2 * boots
        self._set("tracing", f"{boots} traced boots of each (blktrace, one repetition)")
        commits = {False: p.parent, True: p.culprit}
        joined = {side: ran(sides[side]) for side in sides}
        for is_culprit in interleaved(boots):
            commit = commits[is_culprit]
            name = f"traced {'culprit' if is_culprit else 'parent'} {commit[:12]}"
            said = f"boot {len(p.boots) + 1}: {name}"
            try:
                got = await calls.trace(job, commit, built[commit])
            except ActivityError as err:
                raise_if_cancelled(err)
                got = TraceResult(commit, error=cause(err))
            if got.error or not got.diagnostics:
                failed.append(f"{name}: {got.error or 'no trace'}")
                p.boots.append(f"{said}: {got.error or 'no trace'}")
                continue
            if joined[is_culprit]:
                joined[is_culprit].pop(0).stats[traced.SOURCE] = traced.trace_stats(got.diagnostics)
            p.boots.append(f"{said}: {traced.trace_line(got.diagnostics)}")
        short = [side for side in (False, True) if joined[side]]
        if short:  # compare() takes a statistic only where every boot read it
            failed.append("blktrace not compared: a traced boot of the "
                          f"{'culprit' if short[-1] else 'parent'} did not run")  # fmt: skip

    async def _aligned(
        self,
        calls: JobActivities,
        job: ValidatedJob,
        parent: str,
        culprit: str,
        boots: int,
        effect: Change,
    ) -> AlignmentCheck:
        """The job's own kernels (not the diagnostics ones) rebuilt with aligned functions,
        then booted in turn as the explain boots were: does the metric's change remain?"""
        p = self._progress
        p.planned += 2 * boots
        self._set("building", "the parent and the culprit with aligned functions")
        builds = await asyncio.gather(
            *(calls.build(commit, job.testcase, aligned=True) for commit in (parent, culprit))
        )
        built = {}
        for commit, b in zip((parent, culprit), builds, strict=True):
            if not b.ok or b.artifact is None:
                p.planned -= 2 * boots
                line = f"{commit[:12]} does not build with aligned functions: {b.error}"
                return AlignmentCheck(AlignmentWord.UNMEASURED, {}, 0, line)
            built[commit] = b.artifact
        self._set("booting", f"{boots} boots of each aligned kernel, in turn")
        values: dict[bool, list[float]] = {False: [], True: []}
        for is_culprit in interleaved(boots):
            commit = culprit if is_culprit else parent
            said = f"boot {len(p.boots) + 1}: aligned {'culprit' if is_culprit else 'parent'} "
            said += commit[:12]
            try:
                got = await calls.test(job, commit, built[commit], job.repetitions)
            except ActivityError as err:
                raise_if_cancelled(err)
                got = TestResult(commit, TestStatus.BOOT_FAILED, error=cause(err))
            samples = got.samples_of(job.primary)
            if got.status != TestStatus.OK or not samples:
                p.boots.append(f"{said} {got.status}: {got.error}")
                continue
            values[is_culprit].append(statistics.median(samples))
            said += f" {job.primary} {values[is_culprit][-1]:.6g} {job.unit}"
            p.boots.append(said + (f" on {got.host}" if got.host else ""))
        olds, news = values[False], values[True]
        each = min(len(olds), len(news))
        if each < 2:
            line = f"{len(olds)} and {len(news)} aligned boots ran: two a side are the least"
            return AlignmentCheck(AlignmentWord.UNMEASURED, {}, each, line)
        try:
            aligned = change_of("metric", job.primary, olds, news)
        except ValueError as err:  # a guest's figures past comparing
            return AlignmentCheck(AlignmentWord.UNMEASURED, {}, each, str(err))
        return layout.alignment_check(aligned, effect, each)
