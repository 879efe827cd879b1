"""SweepWorkflow on a real local Temporal dev server, with fake activities."""

import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.workflows.sweep_types import PairWord, SweepProgress, SweepRequest, SweepResult
from kbisect.workflows.sweep_workflow import SweepWorkflow
from tests.workflows import fakes
from tests.workflows.fakes import SCENARIOS, Scenario
from tests.workflows.recording import keep

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def sweep(
    env: WorkflowEnvironment, scenario: Scenario, kernels: list[str], record: str = "", **kw: object
) -> tuple[SweepResult, SweepProgress]:
    key = f"scenario-{uuid.uuid4().hex[:8]}"
    SCENARIOS[key] = scenario
    queue = f"q-{uuid.uuid4().hex[:8]}"
    req = SweepRequest(
        repo=key,
        kernels=kernels,
        testcases=["nvme-snapshot-read"],
        build_queue=queue,
        vm_queue=queue,
        **kw,  # type: ignore[arg-type]
    )
    async with fakes.fake_worker(env.client, queue, SweepWorkflow):
        handle = await env.client.start_workflow(
            SweepWorkflow.run, req, id=f"sweep-{key}", task_queue=queue
        )
        try:
            result = await handle.result()
        finally:
            attrs = (await handle.describe()).search_attributes
            SEEN[kernels[0]] = {k: v for k, v in attrs.items() if k.startswith("Kbisect")}
        progress = await handle.query(SweepWorkflow.progress)
        await keep(handle, record)
    return result, progress


SEEN: dict[str, object] = {}  # each sweep's search attributes, by its first kernel
NOISE = 0.02


async def test_a_noisy_series_is_changed_at_the_culprit_s_pair_only(
    env: WorkflowEnvironment,
) -> None:
    # 2% noise: a false "changed" would need 5% (the least effect), out of this noise's
    # reach, so the test never flakes; the false-alert rate under 15% noise is measured by
    # simulation (tests/decide/test_sweep.py).
    scenario = Scenario(graph=linear(16), culprit="c9", noise=NOISE, slow=fakes.FAST * 0.7)
    kernels = ["c2", "c5", "c8", "c9", "c12"]
    result, progress = await sweep(env, scenario, kernels, record="sweep-noisy")
    words = [(p.old, p.new, p.verdict) for p in result.pairs]
    assert words[2] == (2, 3, PairWord.CHANGED), result.pairs
    assert result.pairs[2].direction == "worse"
    assert all(w != PairWord.CHANGED for i, (_, _, w) in enumerate(words) if i != 2), words
    # Each kernel built once for the testcase; its boots within the budget.
    assert all(scenario.builds[k] == 1 for k in kernels)
    assert all(scenario.tests[k] <= 12 for k in kernels)
    assert progress.status == "done" and len(progress.boots) == len(result.boots)
    # `kbisect status` lists it with its testcase and status.
    attrs = SEEN["c2"]
    assert attrs == {"KbisectTestcase": ["nvme-snapshot-read"], "KbisectStatus": ["sweep done"]}
    # Interleaved: the first round boots every kernel once before any gets a second.
    first_round = [b.kernel for b in result.boots[: len(kernels)]]
    assert sorted(first_round) == list(range(len(kernels)))
    # ... in a random order, not the series' order in every round.
    rounds = [
        [b.kernel for b in result.boots[i : i + len(kernels)]]
        for i in range(0, 3 * len(kernels), len(kernels))
    ]
    assert any(r != sorted(r) for r in rounds), rounds


async def test_the_same_kernel_five_times_raises_no_alert(env: WorkflowEnvironment) -> None:
    scenario = Scenario(graph=linear(4), culprit="c3", noise=NOISE)  # see above
    result, _ = await sweep(env, scenario, ["c1"] * 5)
    assert [p.verdict for p in result.pairs].count(PairWord.CHANGED) == 0, result.pairs
    assert scenario.builds["c1"] == 1  # one kernel, built once
    assert scenario.tests["c1"] == len(result.boots) >= 5 * 3  # booted each on its own


async def test_a_kernel_that_does_not_build_is_named_in_its_pairs(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(8), culprit="c5", broken_build={"c4"})
    result, _ = await sweep(env, scenario, ["c2", "c4", "c6"])
    assert [p.verdict for p in result.pairs] == [PairWord.CANNOT_TELL, PairWord.CANNOT_TELL]
    assert "kernel 2 does not build: kernel does not build: x.c" in result.pairs[0].message
    assert scenario.tests["c4"] == 0


async def test_bad_input_fails_the_sweep_with_its_message(env: WorkflowEnvironment) -> None:
    scenario = Scenario(graph=linear(4), culprit="c3", user_error="unknown revision 'v9.9'")
    with pytest.raises(WorkflowFailureError) as err:
        await sweep(env, scenario, ["c1", "v9.9"])
    assert "unknown revision 'v9.9'" in str(err.value.cause)
    assert SEEN["c1"] == {
        "KbisectTestcase": ["nvme-snapshot-read"],
        "KbisectStatus": ["sweep failed"],
    }


async def test_trace_boots_both_kernels_of_each_changed_pair_once_after_the_scored_ones(
    env: WorkflowEnvironment,
) -> None:
    from kbisect.reports.sweep_report import to_json, trace_lines

    scenario = Scenario(graph=linear(16), culprit="c9", broken_trace={"c12"})
    kernels = ["c2", "c8", "c9", "c12", "c2"]  # two changes: c8 -> c9 and c12 -> c2
    result, _ = await sweep(env, scenario, kernels, record="sweep-trace", trace=True)
    changed = [(p.old, p.new) for p in result.pairs if p.verdict == PairWord.CHANGED]
    assert changed == [(1, 2), (3, 4)]
    assert scenario.traces == ["c8", "c9", "c12", "c2"]  # the unchanged pairs: none
    assert [(t.kernel, "error" in t.diagnostics) for t in result.traces] == [
        (1, False),
        (2, False),
        (3, True),
        (4, False),
    ]
    first = trace_lines(result, result.pairs[1])
    assert first == [
        "origin: Q2C +8 ms (1 -> 9 ms), requests 512 -> 8 sectors (10 -> 10 issued, merges 0 -> 0)"
    ], first
    assert trace_lines(result, result.pairs[0]) == []  # same: not traced
    assert trace_lines(result, result.pairs[3]) == [
        "no comparison: the traced run left no readable trace"
    ]
    pairs = to_json(result)["pairs"]
    assert "traces" not in pairs[0] and pairs[1]["traces"]["new"]["disks"]


async def test_a_kernel_the_testcase_cannot_run_on_is_a_cell_not_a_failed_sweep(
    env: WorkflowEnvironment,
) -> None:
    """A kernel without a module the testcase needs: its first boot says "cannot test"
    (the activity's CannotTestError), and that kernel is given up on at once, in those
    words: its pairs cannot tell, the other pairs are judged as ever."""
    why = "kernel c7 has module dm_snapshot neither built in nor in its modules"
    scenario = Scenario(graph=linear(8), culprit="c5", cannot_test={"c7": why})
    result, _ = await sweep(env, scenario, ["c1", "c3", "c5", "c7"])
    words = [(p.old, p.new, p.verdict) for p in result.pairs]
    assert words[:2] == [(0, 1, PairWord.SAME), (1, 2, PairWord.CHANGED)]
    assert words[2] == (2, 3, PairWord.CANNOT_TELL)
    assert result.pairs[2].message == f"kernel 4 cannot test: {why}"
    assert scenario.tests["c7"] == 1  # asked once, not retried
    assert [b.error for b in result.boots if b.kernel == 3] == [f"cannot test: {why}"]
