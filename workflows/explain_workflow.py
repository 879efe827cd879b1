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

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import (
        EXPLAIN_BOOTS_EXACT,
        EXPLAIN_BOOTS_TIMING,
        EXPLAIN_WORKFLOW,
        BisectRequest,
        ExplainBootResult,
        ExplainProgress,
        ExplainRequest,
        ExplainResult,
        SweepRequest,
        TestStatus,
    )
    from kbisect.explain.compare import interleaved
    from kbisect.explain.summary import score, summarise
    from kbisect.workflows.activity_calls import (
        Blocking,
        JobActivities,
        JobFailed,
        ShowsStatus,
        cause,
        testcase_job,
        validate_sweep,
    )


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
        shim = BisectRequest(
            repo=req.repo, good=[], bad="", testcase=tc.name, config=req.config,
            build_queue=req.build_queue, vm_queue=req.vm_queue,
        )  # fmt: skip
        calls = JobActivities(shim, self._blocking)
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
                got = ExplainBootResult(commit, TestStatus.BOOT_FAILED, error=cause(err))
            sides[is_culprit].append(got)
            if got.status == TestStatus.OK and got.samples:
                value = score(got)
                line = f"boot {n}: {name} {commit[:12]} {tc.metric} {value:.6g} {tc.unit}"
                p.boots.append(line + (f" on {got.host}" if got.host else ""))
            else:
                failed.append(f"{name} {commit[:12]}: {got.status}: {got.error}")
                p.boots.append(f"boot {n}: {name} {commit[:12]} {got.status}: {got.error}")
        self._set("comparing")
        try:
            summary = summarise(sides[False], sides[True], tc.metric)
        except ValueError as err:
            raise self._fail(f"{err}: {'; '.join(failed)}") from None
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
        )
