"""Recorded histories replay against the current workflow code: non-determinism fails here."""

import base64
import contextlib
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.common import SearchAttributeUpdate
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from kbisect.contract import BUILD, DUET
from kbisect.decide import strategy
from kbisect.decide.engine import Engine
from kbisect.workflows.bisect_workflow import (
    BOOT_MEAN_PATCH,
    CONTROLS_V2_PATCH,
    ENGINE_PATCH,
    FAILED_STATUS_PATCH,
    HOST_CHECK_PATCH,
    POSTERIOR_2_PATCH,
    POSTERIOR_PATCH,
    RIVAL_MOTIONS_PATCH,
    ROLLING_PATCH,
    ROUND_AT_ONCE_PATCH,
    SAME_KERNEL_PATCH,
    SPLIT_PATCH,
    SWING_MEAN_PATCH,
    SWING_PATCH,
    TRACE_PATCH,
    BisectWorkflow,
    sandbox_runner,
)

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def _history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def _patches(path: Path) -> set[str]:
    return recorded_patches(path.read_text())


def recorded_patches(history_json: str) -> set[str]:
    """The patch ids a history recorded (marker payloads are base64 JSON)."""
    found = set()
    for token in re.findall(r'"data":\s*"([A-Za-z0-9+/=]+)"', history_json):
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            found.update(re.findall(r'"id":"([a-z0-9-]+)"', base64.b64decode(token).decode()))
    return found


def _updates(history: WorkflowHistory) -> list[str]:
    """The names of the updates (a person's mark, resume) the job accepted."""
    return [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]


def _widest_round(history: WorkflowHistory) -> int:
    """The most builds one workflow task scheduled together (a round's commits)."""
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    tasks = [a.workflow_task_completed_event_id for a in scheduled if a.activity_type.name == BUILD]
    return max(Counter(tasks).values())


def _ended(history: WorkflowHistory) -> "EventType.ValueType":
    return history.events[-1].event_type


# Pass/fail jobs came after both posterior engines: a deterministic one takes Engine's
# exact path, a flaky one the flaky engine (workflows.flaky_engine).
PASS_FAIL = {"pass-fail-panic", "pass-fail-flaky"}
# The jobs that revision 6 (split-weighed) decides otherwise than revision 4: the noisy
# small step (host-shift's and farm's steps are big enough that both decide alike).
REWEIGHED = {"small-step"}
# The jobs revision 7 (host-swing) decides otherwise than revision 6: the host that
# swings; and small-step as revision 6 ran it, which revision 7 decides alike (the chain
# of revisions in test_a_job_keeps_the_engine_revision_it_started_with starts there).
SWUNG = {"host-swing", "small-step"}
# The jobs revision 8 (swing-mean) decides otherwise than revision 7: the host that swings
# (a steady host shows no swing, and revision 8 decides there as revision 7).
SWING_MEANT = {"host-swing"}
# The jobs revision 9 (rival-motions) decides otherwise than revision 8: the host that
# drifts (every other recorded job it decides alike).
RIVALLED = {"host-drift"}


def test_histories_were_recorded() -> None:
    # Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_bisect_workflow.py
    # (after renaming the current ones to pre-<patch>-*). They must keep replaying:
    # pre-samekernel-*: the engine before same-kernel, host-check, controls-v2 and trace;
    # pre-posterior-*: every kind of job as Engine (v2) ran it, before the posterior engine;
    # pre-posterior2-*: the same as the posterior engine's revision 1 ran it;
    # pre-roundatonce-*: the same with a round's boots one after another (revision 2);
    # pre-bootmean-*: the same with a boot scored by its repetitions' median (revision 3);
    # pre-rolling-farm: the farm job in rounds, before picks as VM hosts free up;
    # pre-split-*: the jobs revision 6 decides otherwise, as revision 4 ran them;
    # pre-swing-*: SWUNG, as revision 6 ran them;
    # pre-swingmean-*: SWING_MEANT, as revision 7 ran them;
    # pre-rivals-*: RIVALLED, as revision 8 ran them.
    # Every job replays the engine: the pre-engine code and its histories are gone.
    assert all(ENGINE_PATCH in _patches(p) for p in HISTORIES)
    pre_same = [p for p in HISTORIES if p.stem.startswith("pre-samekernel-")]
    pre_posterior = [p for p in HISTORIES if p.stem.startswith("pre-posterior-")]
    current = [p for p in HISTORIES if not p.stem.startswith("pre-")]
    # host-swing came with revision 7: its only twins are revisions 6's and 7's; host-drift
    # with revision 9, and its only twin is revision 8's; duets came after revision 9
    older = {p.stem for p in current} - {"host-swing", "duets", *RIVALLED}
    assert len(pre_same) >= 5
    assert all(SAME_KERNEL_PATCH not in _patches(p) for p in pre_same)
    pre_revision_2 = [p for p in HISTORIES if p.stem.startswith("pre-posterior2-")]
    # small-step came after the v2 engine: its twin is only the revision 1 one
    assert {p.stem.removeprefix("pre-posterior-") for p in pre_posterior} == older - {
        "small-step",
        "farm",
        *PASS_FAIL,
    }
    assert {p.stem.removeprefix("pre-posterior2-") for p in pre_revision_2} == older - {
        "farm",
        *PASS_FAIL,
    }
    assert all(POSTERIOR_PATCH not in _patches(p) for p in pre_posterior + pre_same)
    assert all(POSTERIOR_PATCH in _patches(p) for p in pre_revision_2)
    assert all(POSTERIOR_2_PATCH not in _patches(p) for p in pre_revision_2)
    pre_round = [p for p in HISTORIES if p.stem.startswith("pre-roundatonce-")]
    assert {p.stem.removeprefix("pre-roundatonce-") for p in pre_round} == older - {"farm"}
    assert all(ROUND_AT_ONCE_PATCH not in _patches(p) for p in pre_round)
    pre_mean = [p for p in HISTORIES if p.stem.startswith("pre-bootmean-")]
    assert {p.stem.removeprefix("pre-bootmean-") for p in pre_mean} == older
    assert all(BOOT_MEAN_PATCH not in _patches(p) for p in pre_mean)
    assert all(ROUND_AT_ONCE_PATCH in _patches(p) for p in pre_mean)
    pre_split = [p for p in HISTORIES if p.stem.startswith("pre-split-")]
    assert {p.stem.removeprefix("pre-split-") for p in pre_split} == REWEIGHED
    assert all(SPLIT_PATCH not in _patches(p) for p in pre_split)
    assert all(BOOT_MEAN_PATCH in _patches(p) for p in pre_split)
    pre_swing = [p for p in HISTORIES if p.stem.startswith("pre-swing-")]
    assert {p.stem.removeprefix("pre-swing-") for p in pre_swing} == SWUNG
    assert all(SWING_PATCH not in _patches(p) for p in pre_swing)
    assert all(SPLIT_PATCH in _patches(p) for p in pre_swing)
    pre_swing_mean = [p for p in HISTORIES if p.stem.startswith("pre-swingmean-")]
    assert {p.stem.removeprefix("pre-swingmean-") for p in pre_swing_mean} == SWING_MEANT
    assert all(SWING_MEAN_PATCH not in _patches(p) for p in pre_swing_mean)
    assert all(SWING_PATCH in _patches(p) for p in pre_swing_mean)
    pre_rivals = [p for p in HISTORIES if p.stem.startswith("pre-rivals-")]
    assert {p.stem.removeprefix("pre-rivals-") for p in pre_rivals} == RIVALLED
    assert all(RIVAL_MOTIONS_PATCH not in _patches(p) for p in pre_rivals)
    assert all(SWING_MEAN_PATCH in _patches(p) for p in pre_rivals)
    pre_rolling = [p for p in HISTORIES if p.stem.startswith("pre-rolling-")]
    assert [p.stem for p in pre_rolling] == ["pre-rolling-farm"]
    assert ROLLING_PATCH not in _patches(pre_rolling[0])
    # Every branch the current engine can take is in some current history.
    now = {p.stem: _patches(p) for p in current}
    assert {"linear-64", "fix-64", "merges", "skips", "engine-retest", "small-step"} <= set(now)
    assert PASS_FAIL <= set(now)
    # ... and every way a job is steered or ends: a person's mark, a resume after a block,
    # rounds of several commits, a cancel, a failure, boots in duets (each test says what
    # it records).
    assert {"mark", "resume", "parallel", "cancel", "failed", "farm", "duets"} <= set(now)
    assert DUET in (HISTORIES[0].parent / "duets.json").read_text()
    by_name = {p.stem: _history(p) for p in current}
    assert _updates(by_name["mark"]) == ["mark"]
    assert _updates(by_name["resume"]) == ["resume"]
    # Both endpoints are built together in any job; a round of --parallel 3 builds three.
    assert _widest_round(by_name["linear-64"]) == 2
    assert _widest_round(by_name["parallel"]) == 3
    assert _ended(by_name["cancel"]) == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert _ended(by_name["failed"]) == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    assert FAILED_STATUS_PATCH in now["failed"]
    engine = {ENGINE_PATCH, SAME_KERNEL_PATCH, HOST_CHECK_PATCH, CONTROLS_V2_PATCH, POSTERIOR_PATCH}
    engine |= {POSTERIOR_2_PATCH, ROUND_AT_ONCE_PATCH, BOOT_MEAN_PATCH, SPLIT_PATCH, SWING_PATCH}
    engine |= {SWING_MEAN_PATCH, RIVAL_MOTIONS_PATCH}
    assert all(engine <= patches for patches in now.values()), now
    assert TRACE_PATCH in now["trace"]
    # rolling picks: a noisy --parallel job on a farm only
    assert {name for name, patches in now.items() if ROLLING_PATCH in patches} == {"farm"}
    assert "classify_commits" in (HISTORIES[0].parent / "same-kernel.json").read_text()


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path) -> None:
    await Replayer(workflows=[BisectWorkflow], workflow_runner=sandbox_runner()).replay_workflow(
        _history(path)
    )


async def _replay_failure(name: str) -> Exception | None:
    """Why the named history does not replay against the (patched) code, None if it does."""
    path = HISTORIES[0].parent / f"{name}.json"
    result = await Replayer(
        workflows=[BisectWorkflow], workflow_runner=sandbox_runner()
    ).replay_workflow(_history(path), raise_on_replay_failure=False)
    return result.replay_failure


async def test_a_changed_decision_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Replay compares commands, not activity arguments: a change that stops the search
    # early (different commands) must be caught. This also proves the patch reaches the
    # sandbox, i.e. the replay above ran our current strategy code.
    monkeypatch.setattr(strategy, "next_commits", lambda search, slots=1: [])
    assert await _replay_failure("linear-64") is not None


async def test_a_failed_job_that_no_longer_says_failed_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # failed.json set KbisectStatus=failed before failing: a job that skips it (the list
    # would show it still calibrating) gives other commands than recorded.
    upsert = workflow.upsert_search_attributes

    def without_failed(updates: Sequence[SearchAttributeUpdate[Any]]) -> None:
        if all(u.value != "failed" for u in updates):
            upsert(updates)

    monkeypatch.setattr(workflow, "upsert_search_attributes", without_failed)
    assert isinstance(await _replay_failure("failed"), NondeterminismError)


async def test_a_mark_that_is_ignored_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # mark.json's search went round the marked commit: ignoring the mark boots other commits.
    monkeypatch.setattr(Engine, "mark", lambda self, commit, state, note="": None)
    assert isinstance(await _replay_failure("mark"), NondeterminismError)


async def test_a_changed_posterior_engine_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # host-shift.json ran the posterior engine on a noisy metric: references at another
    # rate boot other commits than it recorded.
    from kbisect.decide import posterior_engine

    assert await _replay_failure("host-shift") is None
    monkeypatch.setattr(posterior_engine, "REFERENCE_EVERY", 1)
    assert isinstance(await _replay_failure("host-shift"), NondeterminismError)


async def test_a_job_keeps_the_engine_revision_it_started_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same noisy small-step job, recorded under each marker that changed the engine's
    # revision: each replays only with its own revision's tuning, not its neighbour's.
    from kbisect.decide import posterior_engine

    revisions = dict(posterior_engine.REVISIONS)

    def use(revision: int, tuning: int) -> None:
        monkeypatch.setitem(posterior_engine.REVISIONS, revision, revisions[tuning])

    async def apart(new: int, old: int, new_job: str, old_job: str) -> None:
        assert await _replay_failure(new_job) is None
        assert await _replay_failure(old_job) is None
        use(new, old)
        assert isinstance(await _replay_failure(new_job), NondeterminismError), new
        use(new, new)
        use(old, new)
        assert isinstance(await _replay_failure(old_job), NondeterminismError), old
        use(old, old)

    await apart(2, 1, "pre-roundatonce-small-step", "pre-posterior2-small-step")
    await apart(4, 3, "pre-split-small-step", "pre-bootmean-small-step")
    await apart(6, 4, "pre-swing-small-step", "pre-split-small-step")
    await apart(7, 6, "pre-swingmean-host-swing", "pre-swing-host-swing")
    # host-swing is recorded under revision 9 now, which decides it as revision 8 does
    await apart(9, 7, "host-swing", "pre-swingmean-host-swing")
    await apart(9, 8, "host-drift", "pre-rivals-host-drift")


async def test_a_changed_flaky_engine_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # pass-fail-flaky.json weighed pass/fail boots with the learned failure rates: another
    # least step between the rates boots other commits (or other counts) than recorded.
    from kbisect.decide import flaky_engine

    assert await _replay_failure("pass-fail-flaky") is None
    monkeypatch.setattr(flaky_engine, "RATE_FACTOR", 8.0)
    assert isinstance(await _replay_failure("pass-fail-flaky"), NondeterminismError)


async def test_a_farm_job_that_builds_nothing_ahead_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # farm.json's build host built likely picks while its rounds booted: without those
    # builds the job gives other commands than it recorded.
    from kbisect.decide import posterior_engine

    assert await _replay_failure("farm") is None
    monkeypatch.setattr(posterior_engine.PosteriorEngine, "ahead", lambda self, n: [])
    assert isinstance(await _replay_failure("farm"), NondeterminismError)


async def test_a_farm_job_keeps_its_rolling_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    # farm.json handed each VM host a boot as it freed up; the same job in rounds (its
    # pre-rolling twin) replays only without them.
    assert await _replay_failure("farm") is None
    assert await _replay_failure("pre-rolling-farm") is None
    from kbisect.decide.posterior_engine import PosteriorEngine

    monkeypatch.setattr(PosteriorEngine, "noisy", property(lambda self: False))  # rounds
    assert isinstance(await _replay_failure("farm"), NondeterminismError)
