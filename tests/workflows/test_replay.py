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

from kbisect.contract import BUILD, DECIDE, DUET
from kbisect.decide import decider
from kbisect.workflows.bisect_workflow import (
    DEPRECATED,
    FAILED_STATUS_PATCH,
    TRACE_PATCH,
    BisectWorkflow,
    sandbox_runner,
)
from kbisect.workflows.job_decisions import JobDecisions

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


def _decisions(history: WorkflowHistory) -> int:
    """How many decisions the job recorded (the decide local activity's markers)."""
    return sum(
        1
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
        and DECIDE.encode() in e.marker_recorded_event_attributes.SerializeToString()
    )


def test_histories_were_recorded() -> None:
    # Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_bisect_workflow.py
    # The decisions are in the histories, so a new rule needs no new history: one of each
    # kind of job, and of each way a job is steered or ends.
    assert 15 <= len(HISTORIES) <= 25
    assert sum(p.stat().st_size for p in HISTORIES) < 4.5 * 2**20
    by_name = {p.stem: _history(p) for p in HISTORIES}
    kinds = {"linear-64", "fix-64", "merges", "skips", "engine-retest", "small-step"}
    kinds |= {"pass-fail-panic", "pass-fail-flaky", "host-shift", "host-swing", "host-drift"}
    ways = {"mark", "resume", "parallel", "cancel", "failed", "farm", "duets", "trace"}
    assert kinds | ways | {"same-kernel"} <= set(by_name)
    for name, history in by_name.items():
        patches = _patches(HISTORIES[0].parent / f"{name}.json")
        assert set(DEPRECATED) - {FAILED_STATUS_PATCH} <= patches, name
        if name != "failed":  # every job asks, from its first round
            assert _decisions(history) >= 1, name
    assert DUET in (HISTORIES[0].parent / "duets.json").read_text()
    assert _updates(by_name["mark"]) == ["mark"]
    assert _updates(by_name["resume"]) == ["resume"]
    # Both endpoints are built together in any job; a round of --parallel 3 builds three.
    assert _widest_round(by_name["linear-64"]) == 2
    assert _widest_round(by_name["parallel"]) == 3
    assert _ended(by_name["cancel"]) == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert _ended(by_name["failed"]) == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    assert TRACE_PATCH in _patches(HISTORIES[0].parent / "trace.json")
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


async def test_a_replay_never_runs_the_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each decision is read back from the history: an engine that would decide otherwise
    # (or not at all) changes no replay, so a better rule breaks no running job.
    def broken(*args: object, **kwargs: object) -> None:
        raise AssertionError("a replay ran decision code")

    monkeypatch.setattr(decider.Decider, "decide", broken)
    monkeypatch.setattr(decider, "engine_of", broken)
    for name in ("host-shift", "pass-fail-flaky", "farm", "mark"):
        assert await _replay_failure(name) is None, name


async def test_a_changed_step_of_the_workflow_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Replay compares commands: a workflow that stops asking (and so concludes at once)
    # gives other commands than linear-64 recorded. This also proves the patch reaches the
    # sandbox, i.e. the replay above ran the current workflow code.
    async def nothing(self: JobDecisions) -> list[str]:
        return []

    monkeypatch.setattr(JobDecisions, "wants", nothing)
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
