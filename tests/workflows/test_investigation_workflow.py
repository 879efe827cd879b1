"""InvestigationWorkflow on a real local Temporal dev server, with fake activities: the
chain runs as child jobs in order (check, bisection, explain, backport), a check that
changed stops it before any bisection, the kernels phase leads to the commits between, a
failed stage fails it in that stage's words, and a cancel reaches the running stage."""

import asyncio
import dataclasses
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.contract import BACKPORT_WORKFLOW, EXPLAIN_WORKFLOW, SWEEP_WORKFLOW, WORKFLOW
from kbisect.workflows.backport_types import BackportResult
from kbisect.workflows.backport_workflow import BackportWorkflow
from kbisect.workflows.bisect_types import BisectRequest, BisectResult, JobStatus
from kbisect.workflows.bisect_workflow import BisectWorkflow
from kbisect.workflows.explain_workflow import ExplainWorkflow
from kbisect.workflows.investigation_types import (
    CrossTreeCheck,
    InvestigationProgress,
    InvestigationRequest,
    InvestigationResult,
    KernelsPhase,
    StageName,
    StageState,
    SweepBisect,
    explain_id,
)
from kbisect.workflows.investigation_workflow import InvestigationWorkflow
from kbisect.workflows.search_attributes import SA_SUMMARY
from kbisect.workflows.sweep_types import SweepRequest
from kbisect.workflows.sweep_workflow import SweepWorkflow
from tests.workflows import fakes
from tests.workflows.fakes import Scenario
from tests.workflows.recording import keep

pytestmark = pytest.mark.asyncio(loop_scope="module")
CHAIN = (InvestigationWorkflow, BisectWorkflow, SweepWorkflow, ExplainWorkflow, BackportWorkflow)


def _check(req: SweepRequest, distro: str, base: str) -> CrossTreeCheck:
    sweep = dataclasses.replace(req, kernels=[distro, base], names=["distro", "base"])
    return CrossTreeCheck(sweep, distro, "c16", base, "good")


async def _ended(env: WorkflowEnvironment, job: str) -> None:
    child = env.client.get_workflow_handle(job)
    for _ in range(100):
        if (await child.describe()).status != WorkflowExecutionStatus.RUNNING:
            return
        await asyncio.sleep(0.1)


async def investigate(
    env: WorkflowEnvironment,
    scenario: Scenario,
    record: str = "",
    cancel_at: str = "",
    **kw: object,
) -> tuple[InvestigationResult | BaseException, InvestigationProgress, str]:
    """Run one investigation over the scenario; its answer (or failure), last progress, id.
    `cancel_at`: cancel it once that stage runs."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    bisection: BisectRequest | None = fakes.request(scenario, queue)
    assert bisection is not None
    sweep = SweepRequest(
        bisection.repo, [], [bisection.testcase], boots=4, build_queue=queue, vm_queue=queue
    )
    check = kw.pop("check", None)
    listed = kw.pop("listed", "")  # the investigation's summary as a search attribute
    swept = kw.get("sweep")
    if isinstance(swept, SweepBisect):  # on this run's queue
        on_queue = dataclasses.replace(swept.sweep, build_queue=queue, vm_queue=queue)
        jobs = {
            name: dataclasses.replace(job, build_queue=queue, vm_queue=queue)
            for name, job in swept.bisections.items()
        }
        kw["sweep"] = dataclasses.replace(swept, sweep=on_queue, bisections=jobs)
        bisection = None
    phase = kw.get("kernels")
    if isinstance(phase, KernelsPhase) and phase.between is not None:  # on this run's queue
        between = dataclasses.replace(phase.between, build_queue=queue, vm_queue=queue)
        kw["kernels"] = dataclasses.replace(phase, between=between)
    req = InvestigationRequest(
        bisection=bisection,
        check=_check(sweep, *check) if isinstance(check, tuple) else None,
        **kw,  # type: ignore[arg-type]
    )
    job = f"inv-{uuid.uuid4().hex[:8]}"
    async with fakes.fake_worker(env.client, queue, *CHAIN):
        shown = TypedSearchAttributes([SearchAttributePair(SA_SUMMARY, str(listed))])
        handle = await env.client.start_workflow(
            InvestigationWorkflow.run,
            req,
            id=job,
            task_queue=queue,
            search_attributes=shown if listed else TypedSearchAttributes.empty,
        )
        if cancel_at:
            while not any(
                s.name == cancel_at
                for s in (await handle.query(InvestigationWorkflow.progress)).stages
            ):
                await asyncio.sleep(0.2)
            await handle.cancel()
        answer: InvestigationResult | BaseException
        try:
            answer = await handle.result()
        except WorkflowFailureError as err:
            answer = err
        progress = await handle.query(InvestigationWorkflow.progress)
        await keep(handle, record)
        if cancel_at:  # the stage's cancel is asked as the parent's goes through
            await _ended(env, f"{job}-{cancel_at}")
    return answer, progress, job


async def test_the_chain_runs_each_stage_as_a_child_job_in_order(env: WorkflowEnvironment) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", timing=True)
    result, progress, job = await investigate(
        env, scenario, record="investigation-chain", check=("c2", "c1"), explain=True,
        target="c12", target_name="distro-12",
    )  # fmt: skip
    assert isinstance(result, InvestigationResult), result
    assert (result.status, result.culprit) == (JobStatus.FOUND, "c9")
    names = [(s.name, s.kind, s.state) for s in result.stages]
    assert names == [
        (StageName.CHECK, SWEEP_WORKFLOW, StageState.DONE),
        (StageName.BISECT, WORKFLOW, StageState.DONE),
        (StageName.EXPLAIN, EXPLAIN_WORKFLOW, StageState.DONE),
        (StageName.BACKPORT, BACKPORT_WORKFLOW, StageState.DONE),
    ]
    check, bisect, explain, backport = result.stages
    assert check.job == f"{job}-check" and "same" in check.line, check
    assert bisect.job == result.bisection == f"{job}-bisect" and bisect.line.startswith("found")
    assert explain.job == explain_id(bisect.job)
    assert backport.job.startswith(f"{bisect.job}-backport-")  # as 'kbisect backport' names it
    assert progress.status == "done" and progress.stages == result.stages
    # each stage is a job of its own: its answer is read by its id, as its command reads it
    handle = env.client.get_workflow_handle(bisect.job, result_type=BisectResult)
    assert (await handle.result()).culprit == "c9"
    ported = await env.client.get_workflow_handle(backport.job, result_type=BackportResult).result()
    assert (ported.plan.change, ported.target, ported.job) == ("c9", "c12", bisect.job)
    assert ported.target_name == "distro-12" and backport.line.endswith(ported.message)


async def test_each_stage_job_has_its_summary_as_a_list_column_as_the_investigation_does(
    env: WorkflowEnvironment,
) -> None:
    """The Web UI's list shows KbisectSummary for the stage jobs too, not only for the
    investigation the client started."""
    scenario = Scenario(graph=linear(8), culprit="c5")
    result, _, _ = await investigate(env, scenario, listed="investigate: bisect t")
    assert isinstance(result, InvestigationResult), result
    described = await env.client.get_workflow_handle(result.bisection).describe()
    line = described.typed_search_attributes.get(SA_SUMMARY)
    assert line and line.startswith("bisect nvme-snapshot-read (regression)"), line
    plain, _, _ = await investigate(env, scenario)  # started without it: none asked of the server
    assert isinstance(plain, InvestigationResult), plain
    bare = await env.client.get_workflow_handle(plain.bisection).describe()
    assert bare.typed_search_attributes.get(SA_SUMMARY) is None


async def test_a_merge_base_unlike_the_distro_stops_before_any_bisection(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    result, _, _ = await investigate(env, scenario, check=("c12", "c1"))
    assert isinstance(result, InvestigationResult), result
    assert result.status == "refused" and "bisect the distro branch itself" in result.message
    assert [(s.name, s.state) for s in result.stages] == [(StageName.CHECK, StageState.REFUSED)]
    assert set(scenario.builds) == {"c12", "c1"}  # the check's two kernels, nothing more


async def test_a_kernels_phase_leads_to_the_commits_between_the_two_builds(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    # the "builds" are the scenario's own commits; their sources another range of it
    between = fakes.request(scenario, "unused")
    phase = KernelsPhase(commits=list(reversed(linear(16).order)), revs=[f"c{i}" for i in
                         range(1, 17)], between=between)  # fmt: skip
    result, _, job = await investigate(env, scenario, kernels=phase)
    assert isinstance(result, InvestigationResult), result
    assert [s.name for s in result.stages] == [StageName.KERNELS, StageName.BISECT]
    second = await env.client.get_workflow_handle(f"{job}-bisect").describe()
    assert second.status == WorkflowExecutionStatus.COMPLETED
    assert result.bisection == f"{job}-bisect" and result.culprit == "c9"


async def test_a_failed_bisection_fails_the_investigation_in_its_words(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(8), culprit="c5", user_error="testcase nope: no such one")
    failed, progress, _ = await investigate(env, scenario, explain=True)
    assert isinstance(failed, WorkflowFailureError)
    assert "the bisect stage" in str(failed.cause) and "no such one" in str(failed.cause)
    assert progress.status == "failed" and progress.stages[-1].state == StageState.FAILED


@pytest.mark.parametrize("running", ["validation", "boots"])
async def test_cancelling_the_investigation_cancels_its_running_stage(
    env: WorkflowEnvironment, running: str
) -> None:
    """Whatever activity the stage waits on: a cancelled validation once ended the stage
    failed (its error read as bad input), and CI saw it."""
    scenario = Scenario(graph=linear(16), culprit="c9", test_delay=0.5)
    if running == "validation":
        scenario.silent["validate"] = 1  # the validation takes 4 s: the cancel lands in it
    failed, _, job = await investigate(env, scenario, cancel_at=StageName.BISECT)
    assert isinstance(failed, WorkflowFailureError), failed
    child = env.client.get_workflow_handle(f"{job}-bisect")
    assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED
    assert (await env.client.get_workflow_handle(job).describe()).status == (
        WorkflowExecutionStatus.CANCELED
    )


async def test_a_sweep_then_bisects_each_change_between_its_two_revisions(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    template = fakes.request(scenario, "unused")
    kernels = ["c2", "c5", "c12", "c16"]
    sweep = SweepRequest(template.repo, kernels, [template.testcase], boots=4)
    asked = SweepBisect(sweep, kernels, {template.testcase: template})
    result, _, job = await investigate(env, scenario, sweep=asked)
    assert isinstance(result, InvestigationResult), result
    assert [(s.name, s.kind) for s in result.stages] == [
        (StageName.SWEEP, SWEEP_WORKFLOW),
        ("bisect-1", WORKFLOW),  # c5 -> c12 only: the other pairs stayed the same
    ]
    assert result.stages[0].line == "1 of 3 pairs changed"
    assert (result.status, result.culprit, result.bisection) == ("found", "c9", f"{job}-bisect-1")
    asked_of = await env.client.get_workflow_handle(f"{job}-bisect-1").fetch_history()
    started = asked_of.events[0].workflow_execution_started_event_attributes.input
    assert (
        b'"good":["c5"]' in started.payloads[0].data and b'"bad":"c12"' in started.payloads[0].data
    )
