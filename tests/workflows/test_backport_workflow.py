"""BackportWorkflow on a real local Temporal dev server, with fake activities: a change the
target has builds nothing; one that applies is measured on the target without and with
it, and called verified only when it makes the target better."""

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.contract import PASS_FAIL_BOOTS
from kbisect.reports.backport_report import boot_line
from kbisect.workflows.backport_types import (
    BackportProgress,
    BackportRequest,
    BackportResult,
    BackportWord,
)
from kbisect.workflows.backport_workflow import BackportWorkflow
from tests.workflows import fakes
from tests.workflows.fakes import SCENARIOS, VERIFY_PREFIX, Scenario
from tests.workflows.recording import keep

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def backport(
    env: WorkflowEnvironment,
    scenario: Scenario,
    change: str,
    target: str,
    record: str = "",
    **kw: object,
) -> tuple[BackportResult, BackportProgress]:
    key = f"scenario-{uuid.uuid4().hex[:8]}"
    SCENARIOS[key] = scenario
    queue = f"q-{uuid.uuid4().hex[:8]}"
    req = BackportRequest(
        repo=key, change=change, target=target, testcase="nvme-snapshot-read",
        target_name="distro", config="/cfg", build_queue=queue, vm_queue=queue,
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    async with fakes.fake_worker(env.client, queue, BackportWorkflow):
        handle = await env.client.start_workflow(
            BackportWorkflow.run, req, id=f"backport-{key}", task_queue=queue
        )
        try:
            result = await handle.result()
        finally:
            progress = await handle.query(BackportWorkflow.progress)
        await keep(handle, record)
    return result, progress


async def test_a_fix_that_makes_the_target_good_is_verified_with_its_figures(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", mode="fix")
    result, progress = await backport(env, scenario, "c9", "c2", record="backport-verified")
    patched = f"{VERIFY_PREFIX}c9:c2"
    assert result.word == BackportWord.VERIFIED, result.message
    assert scenario.builds == {"c2": 1, patched: 1}  # each built once
    assert result.pair is not None and result.pair.direction == "better"
    assert result.pair.boots_old == scenario.tests["c2"] >= 1  # a counter: one boot each
    without_with = "verified: avg_read_sectors on distro, without → with the backport: 8 → 512"
    assert result.message.startswith(without_with), result.message
    assert "(+6300.0%; changed, better; 1 boot a side)" in result.message
    assert [b.kernel for b in result.boots].count(1) == scenario.tests[patched]
    assert progress.status == "done" and progress.series == ["c9"]


async def test_a_series_that_leaves_the_target_as_it_was_is_not_verified(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", mode="fix", revert_restores=False)
    result, _ = await backport(env, scenario, "c9", "c2")
    assert result.word == BackportWord.NOT_VERIFIED
    assert result.pair is not None and result.pair.verdict == "same"
    assert result.message.startswith("not verified: ")


async def test_a_series_that_helps_but_not_as_far_as_the_jobs_good_side_is_not_verified(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", mode="fix")
    # The job's good endpoint read 1000 and its bad one 600: 512 is still on the bad side.
    result, _ = await backport(env, scenario, "c9", "c2", good_value=1000.0, bad_value=600.0)
    assert result.word == BackportWord.NOT_VERIFIED
    assert result.pair is not None and result.pair.direction == "better"
    assert result.message.endswith(
        "but with the series the target reads 512, nearer the job's bad side (600) than its "
        "good (1000)"
    ), result.message
    same_sides, _ = await backport(env, Scenario(graph=linear(16), culprit="c9", mode="fix"),
                                   "c9", "c2", good_value=512.0, bad_value=8.0)  # fmt: skip
    assert same_sides.word == BackportWord.VERIFIED


async def test_a_pass_fail_fix_is_verified_by_failures_on_each_side(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", mode="fix", pass_fail=True)
    result, progress = await backport(env, scenario, "c9", "c2", record="backport-pass-fail")
    assert result.word == BackportWord.VERIFIED, result.message
    assert result.failures == {"without": [PASS_FAIL_BOOTS] * 2, "with": [0, PASS_FAIL_BOOTS]}
    assert result.pair is None and progress.pass_fail
    assert result.message == (
        f"verified: nvme-snapshot-read failed {PASS_FAIL_BOOTS} of {PASS_FAIL_BOOTS} boots of "
        f"distro without the series, 0 of {PASS_FAIL_BOOTS} with it"
    )
    lines = [boot_line(progress, n) for n in range(len(progress.boots))]
    assert lines[:2] == [
        "boot 1: without the backport: nvme-snapshot-read bad: panic",
        "boot 2: with the backport: nvme-snapshot-read good",
    ]
    again = Scenario(graph=linear(16), culprit="c9", mode="fix", pass_fail=True,
                     revert_restores=False)  # fmt: skip
    still, _ = await backport(env, again, "c9", "c2")
    assert still.word == BackportWord.NOT_VERIFIED and still.failures["with"][0] == PASS_FAIL_BOOTS


@pytest.mark.parametrize(
    ("scenario", "word"),
    [
        (Scenario(graph=linear(16), culprit="c9", mode="fix", backport_found="c3"),
         BackportWord.ALREADY),
        (Scenario(graph=linear(16), culprit="c9", mode="fix", verify_conflicts=True),
         BackportWord.CONFLICT),
    ],
)  # fmt: skip
async def test_a_change_already_there_or_that_does_not_apply_builds_nothing(
    env: WorkflowEnvironment, scenario: Scenario, word: str
) -> None:
    kept = "backport-already" if word == BackportWord.ALREADY else ""  # both end at the plan
    result, progress = await backport(env, scenario, "c9", "c2", record=kept)
    assert result.word == word and result.pair is None
    assert not scenario.builds and not scenario.tests
    assert progress.status == "done" and progress.message == result.message
