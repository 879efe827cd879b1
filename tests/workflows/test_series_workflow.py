"""SeriesTickWorkflow on a real local Temporal dev server, with fake activities: a tick
with new kernels sweeps them against the last one measured (a child SweepWorkflow) and
returns its changes as alerts; one with nothing new sweeps nothing."""

import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.contract import SERIES_SWEEP_SUFFIX
from kbisect.workflows.series_types import SeriesTick, SeriesWatch
from kbisect.workflows.series_workflow import SeriesTickWorkflow
from kbisect.workflows.sweep_workflow import SweepWorkflow
from tests.workflows import fakes
from tests.workflows.fakes import SCENARIOS, Scenario
from tests.workflows.recording import keep

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def tick(
    env: WorkflowEnvironment, scenario: Scenario, record: str = ""
) -> tuple[SeriesTick, str]:
    """One tick of a watch over the scenario; what it did, and its status at the end."""
    key = f"scenario-{uuid.uuid4().hex[:8]}"
    SCENARIOS[key] = scenario
    queue = f"q-{uuid.uuid4().hex[:8]}"
    watch = SeriesWatch(
        "lab-watch", ["nvme-snapshot-read"], tree=key, build_queue=queue, vm_queue=queue
    )
    async with fakes.fake_worker(env.client, queue, SeriesTickWorkflow, SweepWorkflow):
        handle = await env.client.start_workflow(
            SeriesTickWorkflow.run, watch, id=f"tick-{key}", task_queue=queue
        )
        result = await handle.result()
        status = await handle.query(SeriesTickWorkflow.progress)
        await keep(handle, record)
    return result, status


async def test_new_kernels_are_swept_against_the_last_one_and_a_change_is_an_alert(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", series=["c5", "c8", "c9", "c12"])
    result, status = await tick(env, scenario, record="series-tick")
    assert [(a.old, a.new) for a in result.alerts] == [("c8", "c9")], result.alerts
    assert [k.name for k in result.series] == scenario.series
    # the last kernel measured is booted again beside the new ones, each built once
    assert scenario.builds == {k: 1 for k in scenario.series}
    assert all(scenario.tests[k] >= 1 for k in scenario.series)
    assert result.sweep.endswith(SERIES_SWEEP_SUFFIX) and result.message.startswith("3 new")
    assert status == result.message
    child = await env.client.get_workflow_handle(result.sweep).describe()
    assert child.status == WorkflowExecutionStatus.COMPLETED


async def test_a_tick_with_nothing_new_sweeps_nothing(env: WorkflowEnvironment) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    result, status = await tick(env, scenario)
    assert result == SeriesTick("lab-watch", message="nothing new") and status == "nothing new"
    assert not scenario.builds and not scenario.tests
