"""ExplainWorkflow on a real local Temporal dev server, with fake activities: the pair
built with the diagnostics options, booted A B B A, and what moved listed."""

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.contract import EXPLAIN_BOOTS_EXACT, EXPLAIN_MAX_BOOTS, Fixup
from kbisect.errors import UserError
from kbisect.workflows.explain_types import (
    AlignmentWord,
    ExplainProgress,
    ExplainRequest,
    ExplainResult,
)
from kbisect.workflows.explain_workflow import ExplainWorkflow
from tests.workflows import fakes
from tests.workflows.fakes import SCENARIOS, Scenario
from tests.workflows.recording import keep

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _request(scenario: Scenario, parent: str, culprit: str, **kw: object) -> ExplainRequest:
    key = f"scenario-{uuid.uuid4().hex[:8]}"
    SCENARIOS[key] = scenario
    queue = f"q-{uuid.uuid4().hex[:8]}"
    return ExplainRequest(
        repo=key, parent=parent, culprit=culprit, testcase="nvme-snapshot-read",
        build_queue=queue, vm_queue=queue, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


async def explain(
    env: WorkflowEnvironment,
    scenario: Scenario,
    parent: str,
    culprit: str,
    record: str = "",
    **kw: object,
) -> tuple[ExplainResult, ExplainProgress]:
    req = _request(scenario, parent, culprit, **kw)
    async with fakes.fake_worker(env.client, req.build_queue, ExplainWorkflow):
        handle = await env.client.start_workflow(
            ExplainWorkflow.run, req, id=f"explain-{req.repo}", task_queue=req.build_queue
        )
        try:
            result = await handle.result()
        finally:
            progress = await handle.query(ExplainWorkflow.progress)
        await keep(handle, record)
    return result, progress


async def test_the_culprit_and_its_parent_are_booted_in_turn_and_what_moved_is_listed(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    result, progress = await explain(env, scenario, "c8", "c9", record="explain-pair", boots=4)
    # each built once, with the diagnostics options; A B B A, A B B A
    assert scenario.explain_builds == {"c8": 1, "c9": 1}
    assert scenario.explains == ["c8", "c9", "c9", "c8"] * 2
    assert result.status == "explained" and result.boots == 4
    assert result.effect["change"] == pytest.approx(-98.4, abs=1.0)
    listed = {(c["source"], c["name"]) for c in result.comparison["changes"]}
    assert ("diskstats", "nvme0n1 rareq-sz sectors") in listed
    assert ("profile", "nvme_queue_rq (self)") in listed
    assert ("stat", "ctxt") not in listed  # the same within its noise
    assert result.why[0].startswith("nvme0n1 read request size (sectors): 5"), result.why
    assert "(-98%, 95% CI" in result.why[0]
    assert result.stacks["culprit"]["fio;vfs_read;nvme_queue_rq"] == 4 * 60
    assert len(result.folders) == 8 and result.subjects == ["subject of c8", "subject of c9"]
    assert progress.status == "done" and len(progress.boots) == progress.planned == 8
    assert progress.boots[1].startswith("boot 2: culprit c9 avg_read_sectors 8")
    assert result.notes == [f"{fakes.LEFT_OUT_NOTE} (every boot)"]  # what a guest's boot lost


async def test_a_counter_takes_two_boots_a_side_and_a_pair_alike_shows_no_effect(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    result, _ = await explain(env, scenario, "c2", "c3")  # both before the culprit
    assert scenario.explains == ["c2", "c3", "c3", "c2"][: 2 * EXPLAIN_BOOTS_EXACT]
    assert result.status == "no-effect" and result.boots == EXPLAIN_BOOTS_EXACT
    assert "do not show the change in avg_read_sectors" in result.message


async def test_a_culprit_that_does_not_boot_fails_the_job_with_why(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", broken_boot={"c9"})
    with pytest.raises(WorkflowFailureError) as err:
        await explain(env, scenario, "c8", "c9")
    message = str(err.value.cause)
    assert "0 of the culprit's explain boots ran" in message
    assert "culprit c9: boot-failed: panic: oops" in message


async def test_more_boots_than_the_cap_fail_the_job_before_a_build(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    with pytest.raises(WorkflowFailureError) as err:
        await explain(env, scenario, "c8", "c9", boots=EXPLAIN_MAX_BOOTS + 1)
    assert f"{EXPLAIN_MAX_BOOTS} at most" in str(err.value.cause)
    assert scenario.explains == [] and not scenario.explain_builds


async def test_a_culprit_that_does_not_build_with_the_diagnostics_options_says_so(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", broken_build={"c9"})
    with pytest.raises(WorkflowFailureError) as err:
        await explain(env, scenario, "c8", "c9")
    message = str(err.value.cause)
    assert "the culprit c9 does not build with the diagnostics options" in message
    assert "kernel does not build: x.c (log: /logs/build.log)" in message
    assert scenario.explains == []  # nothing booted


async def test_a_culprit_the_bisection_built_with_a_fixup_is_explained_with_it(
    env: WorkflowEnvironment,
) -> None:
    """The bisection's --fixup reaches explain's builds (explain_request carries it): a
    culprit in a span that builds only with the fix is explained, not "does not build"."""
    scenario = Scenario(graph=linear(16), culprit="c9", broken_build={"c9"}, built_by_fixup={"c9"})
    fixups = [Fixup("build-fix.diff", "/cache/patches/x.patch")]
    result, _ = await explain(env, scenario, "c8", "c9", fixups=fixups)
    assert result.status != "failed" and scenario.explain_builds == {"c8": 1, "c9": 1}, result


async def test_status_lists_explain_jobs(env: WorkflowEnvironment) -> None:
    import asyncio

    from kbisect.jobs.client import JobClient
    from kbisect.settings import Settings

    scenario = Scenario(graph=linear(16), culprit="c9")
    await explain(env, scenario, "c8", "c9", boots=2)
    client = JobClient(Settings.from_env(), env.client)
    for _ in range(50):  # the server's visibility store catches up within moments
        ids = [j.id for j in await client.jobs(100) if j.state == "completed"]
        if any(i.startswith("explain-scenario-") for i in ids):
            break
        await asyncio.sleep(0.2)
    assert any(i.startswith("explain-scenario-") for i in ids), ids


async def test_the_alignment_check_rebuilds_the_pair_aligned_and_the_change_remains(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9")
    result, progress = await explain(
        env, scenario, "c8", "c9", record="explain-alignment", boots=2, alignment=True
    )
    # the job's kernels (not the diagnostics ones) rebuilt aligned, booted A B B A
    assert scenario.aligned_builds == {"c8": 1, "c9": 1}
    assert scenario.explain_builds == {"c8": 1, "c9": 1}
    assert scenario.tests == {"c8": 2, "c9": 2}
    check = result.alignment
    assert check is not None and check.verdict == AlignmentWord.REMAINS and check.boots == 2
    assert check.line.startswith("remains: -98.4% (95% CI"), check.line
    assert "64-byte aligned functions" in check.line
    assert progress.planned == len(progress.boots) == 8
    assert progress.boots[4].startswith("boot 5: aligned parent c8 avg_read_sectors 512")
    assert result.suggestion == ""  # asked for: nothing to suggest


async def test_a_change_the_aligned_pair_does_not_show_is_called_a_layout_artifact(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", layout_only=True)
    result, _ = await explain(env, scenario, "c8", "c9", boots=2, alignment=True)
    check = result.alignment
    assert check is not None and check.verdict == AlignmentWord.VANISHES
    assert "likely a code-layout artifact, not the change" in check.line
    assert result.status == "explained"  # the diagnostics kernels still show it


async def test_the_alignment_check_is_suggested_when_the_diff_misses_the_profile(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", timing=True, touched=["nvme_pace"])
    result, _ = await explain(env, scenario, "c8", "c9", boots=2)
    assert result.alignment is None and not +scenario.aligned_builds
    assert "touches none of its 3 most sampled functions" in result.suggestion
    # a diff that changes a sampled function (a gcc clone of it) is no layout suspect
    scenario = Scenario(
        graph=linear(16), culprit="c9", timing=True, touched=["nvme_queue_rq.isra.0"]
    )
    result, _ = await explain(env, scenario, "c8", "c9", boots=2)
    assert result.suggestion == ""
    # a counter's change is not a layout suspect: its diff is not even read
    scenario = Scenario(graph=linear(16), culprit="c9", touched=["nvme_pace"])
    result, _ = await explain(env, scenario, "c8", "c9", boots=2)
    assert result.suggestion == ""


async def test_a_testcase_with_disks_gets_traced_boots_whose_figures_are_compared(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", disks=True, broken_trace={"c8"})
    result, progress = await explain(env, scenario, "c8", "c9", boots=2)
    assert scenario.traces == ["c8", "c9", "c9", "c8"]  # after the explain boots, in turn
    assert progress.planned == len(progress.boots) == 8
    assert progress.boots[5] == (
        "boot 6: traced culprit c9: nvme0n1 10 requests of 8 sectors, 0 merges"
    )
    # the parent's traces failed: said, and no blktrace figure compared on half the boots
    assert "traced parent c8: the traced run left no readable trace" in result.failed
    assert not [c for c in result.comparison["changes"] if c["source"] == "blktrace"]
    scenario = Scenario(graph=linear(16), culprit="c9", disks=True)
    result, _ = await explain(env, scenario, "c8", "c9", record="explain-traced", boots=2)
    changes = {c["name"]: c for c in result.comparison["changes"] if c["source"] == "blktrace"}
    size = changes["nvme0n1 request size (sectors)"]
    assert (size["parent"], size["culprit"]) == (512, 8), changes
    assert changes["nvme0n1 Q2C avg ms"]["culprit"] == 9.0


async def test_a_watch_asks_a_jobs_type_once_over_its_progress_polls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from kbisect.contract import EXPLAIN_WORKFLOW
    from kbisect.jobs.client import JobClient
    from kbisect.settings import Settings
    from kbisect.workflows.explain_types import ExplainProgress

    client = JobClient(Settings.from_env(), SimpleNamespace())  # type: ignore[arg-type]
    asked: list[str] = []

    async def describe(job_id: str) -> object:
        asked.append(job_id)
        return SimpleNamespace(workflow_type=EXPLAIN_WORKFLOW)

    async def query(*args: object, **kwargs: object) -> ExplainProgress:
        return ExplainProgress("booting")

    monkeypatch.setattr(client, "describe", describe)
    monkeypatch.setattr(client, "_handle", lambda job_id: SimpleNamespace(query=query))
    for _ in range(5):
        assert (await client.explain_progress("bisect-x-1-explain")).status == "booting"
    assert asked == ["bisect-x-1-explain"]
    with pytest.raises(UserError, match="is an explain job, not a sweep"):
        await client.sweep_progress("bisect-x-1-explain")


async def test_a_cancel_during_a_boot_ends_the_job_instead_of_counting_a_failed_boot(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", test_delay=1.0)
    req = _request(scenario, "c8", "c9", boots=4)
    async with fakes.fake_worker(env.client, req.build_queue, ExplainWorkflow):
        handle = await env.client.start_workflow(
            ExplainWorkflow.run, req, id=f"explain-{req.repo}", task_queue=req.build_queue
        )
        while not scenario.explains:
            await asyncio.sleep(0.1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert len(scenario.explains) == 1  # no boot after the cancel
