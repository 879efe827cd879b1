"""SeriesTickWorkflow: one look of a series watch, started by its Temporal Schedule.

It asks a build host for the kernels newer than the last one measured; when there are,
it sweeps them against that kernel (a child SweepWorkflow: fresh boots of the last
kernel, interleaved with the new ones, so no old figure stands in for a reference), then
keeps the sweep's boots by kernel and testcase and returns its changes as alerts. The
doors post the alerts (kbisect chat matrix --series). The Schedule skips a tick while the
last one still runs, so one watch never sweeps twice at once.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import SERIES_SWEEP_SUFFIX, SERIES_WORKFLOW, SWEEP_WORKFLOW
    from kbisect.summaries import summary
    from kbisect.workflows.activity_calls import series_plan, series_record
    from kbisect.workflows.series_types import SeriesRecord, SeriesTick, SeriesWatch
    from kbisect.workflows.sweep_types import SweepRequest, SweepResult


@workflow.defn(name=SERIES_WORKFLOW)
class SeriesTickWorkflow:
    def __init__(self) -> None:
        self._status = "looking for new kernels"

    @workflow.query(name="progress")
    def progress(self) -> str:
        return self._status

    @workflow.run
    async def run(self, watch: SeriesWatch) -> SeriesTick:
        plan = await series_plan(watch)
        if not plan.series:
            self._status = plan.message
            return SeriesTick(watch.name, message=plan.message)
        req = SweepRequest(
            repo=plan.repo,
            kernels=plan.kernels,
            testcases=list(watch.testcases),
            names=[k.name for k in plan.series],
            metric=watch.metric,
            profile=watch.profile,
            boots=watch.boots,
            min_effect=watch.min_effect,
            search_attributes=watch.search_attributes,
            build_queue=watch.build_queue,
            vm_queue=watch.vm_queue,
            trace=watch.trace,
            max_boots=watch.max_boots,
        )
        sweep = workflow.info().workflow_id + SERIES_SWEEP_SUFFIX
        self._status = f"{plan.message}: sweeping ({sweep})"
        result = await workflow.execute_child_workflow(
            SWEEP_WORKFLOW, req, id=sweep, result_type=SweepResult, static_summary=summary(req)
        )
        tick = await series_record(
            SeriesRecord(watch.name, sweep, plan.series, result), watch.build_queue
        )
        tick.message = f"{plan.message}: {tick.message}"
        self._status = tick.message
        return tick
