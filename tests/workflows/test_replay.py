"""Recorded histories replay against the current workflow code: non-determinism fails here.

Every workflow class in kbisect.workflows has recorded histories; each is replayed
against the class its first event names.
"""

import base64
import contextlib
import dataclasses
import functools
import importlib
import inspect
import pkgutil
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.client import WorkflowHistory
from temporalio.common import SearchAttributeUpdate
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

import kbisect.workflows
from kbisect.contract import (
    BACKPORT_WORKFLOW,
    BUILD,
    DECIDE,
    DUET,
    EXPLAIN_WORKFLOW,
    INVESTIGATION_WORKFLOW,
    SERIES_WORKFLOW,
    SWEEP_WORKFLOW,
    WORKFLOW,
    TestResult,
    TraceResult,
    ValidatedJob,
)
from kbisect.decide import decider
from kbisect.model import Artifact
from kbisect.workflows import activity_calls
from kbisect.workflows.activity_calls import JobActivities
from kbisect.workflows.backport_types import BackportPlan, BackportRequest, BackportWord
from kbisect.workflows.bisect_workflow import (
    DEPRECATED,
    FAILED_STATUS_PATCH,
    TRACE_PATCH,
    sandbox_runner,
)
from kbisect.workflows.investigation_types import BackportChange
from kbisect.workflows.job_decisions import JobDecisions
from kbisect.workflows.series_types import SeriesRecord, SeriesTick
from tests.workflows.recording import HISTORIES as FOLDER

HISTORIES = sorted(FOLDER.glob("*.json"))


def _workflow_classes() -> dict[str, type]:
    """Every @workflow.defn class of kbisect.workflows, by its workflow type: read from
    the code, so a new class without a recorded history fails below."""
    found: dict[str, type] = {}
    prefix = f"{kbisect.workflows.__name__}."
    for module in pkgutil.iter_modules(kbisect.workflows.__path__, prefix):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            defn = workflow._Definition.from_class(cls)  # its own, not a base class's
            if defn is not None and defn.name is not None:
                found[defn.name] = cls
    return found


WORKFLOWS = _workflow_classes()


@functools.cache  # each file is read once by the tests here; a replay does not change it
def _history(path: Path) -> WorkflowHistory:
    """The recorded job under its own id (a series tick names its sweep after it)."""
    parsed = WorkflowHistory.from_json(path.stem, path.read_text())
    return dataclasses.replace(parsed, workflow_id=_started(parsed).workflow_id)


def _started(history: WorkflowHistory) -> WorkflowExecutionStartedEventAttributes:
    first = history.events[0]
    assert first.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    return first.workflow_execution_started_event_attributes


def _type(history: WorkflowHistory) -> str:
    """The workflow type the job was started as."""
    return _started(history).workflow_type.name


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


def test_every_workflow_class_has_recorded_histories() -> None:
    # Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_*_workflow.py
    # (tests/workflows/recording.py). Each history named for its class, but a bisection's.
    by_type: dict[str, list[str]] = {}
    for path in HISTORIES:
        by_type.setdefault(_type(_history(path)), []).append(path.stem)
    assert set(by_type) == set(WORKFLOWS), set(WORKFLOWS) - set(by_type)
    for kind, names in by_type.items():
        if kind != WORKFLOW:
            assert all(n.split("-")[0] in kind.lower() for n in names), (kind, names)
    others = [p for p in HISTORIES if _type(_history(p)) != WORKFLOW]
    assert sum(p.stat().st_size for p in others) < 2**20
    # a changed step of each class is caught: a bisection's by its own tests, the others'
    # by test_a_changed_step_of_each_other_workflow_is_caught
    assert set(CHANGED_STEPS) | {WORKFLOW} == set(WORKFLOWS)


def test_histories_were_recorded() -> None:
    # Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_bisect_workflow.py
    # The decisions are in the histories, so a new rule needs no new history: one of each
    # kind of job, and of each way a job is steered or ends.
    bisections = [p for p in HISTORIES if _type(_history(p)) == WORKFLOW]
    assert 15 <= len(bisections) <= 25
    assert sum(p.stat().st_size for p in bisections) < 4.5 * 2**20
    by_name = {p.stem: _history(p) for p in bisections}
    kinds = {"linear-64", "fix-64", "merges", "skips", "engine-retest", "small-step"}
    kinds |= {"pass-fail-panic", "pass-fail-flaky", "host-shift", "host-swing", "host-drift"}
    ways = {"mark", "resume", "parallel", "cancel", "failed", "farm", "duets", "trace"}
    assert kinds | ways | {"same-kernel"} <= set(by_name)
    for name, history in by_name.items():
        patches = _patches(FOLDER / f"{name}.json")
        assert set(DEPRECATED) - {FAILED_STATUS_PATCH} <= patches, name
        if name != "failed":  # every job asks, from its first round
            assert _decisions(history) >= 1, name
    assert DUET in (FOLDER / "duets.json").read_text()
    assert _updates(by_name["mark"]) == ["mark"]
    assert _updates(by_name["resume"]) == ["resume"]
    # Both endpoints are built together in any job; a round of --parallel 3 builds three.
    assert _widest_round(by_name["linear-64"]) == 2
    assert _widest_round(by_name["parallel"]) == 3
    assert _ended(by_name["cancel"]) == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert _ended(by_name["failed"]) == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
    assert TRACE_PATCH in _patches(FOLDER / "trace.json")
    assert "classify_commits" in (FOLDER / "same-kernel.json").read_text()


def _replayer(history: WorkflowHistory) -> Replayer:
    """A replayer of the class the history's job was started as, in the workers' sandbox."""
    return Replayer(workflows=[WORKFLOWS[_type(history)]], workflow_runner=sandbox_runner())


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path) -> None:
    history = _history(path)
    await _replayer(history).replay_workflow(history)


async def _replay_failure(name: str) -> Exception | None:
    """Why the named history does not replay against the (patched) code, None if it does."""
    history = _history(FOLDER / f"{name}.json")
    result = await _replayer(history).replay_workflow(history, raise_on_replay_failure=False)
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


# Another class's changed step: its history, what is patched, and the change (another
# activity in a step's place, or none). The patched objects live in a module the sandbox
# passes through (workflows.activity_calls), so the change reaches the replayed code.
async def _traced_boot(
    self: JobActivities, job: ValidatedJob, commit: str, artifact: Artifact, repetitions: int
) -> TraceResult:
    return await self.trace(job, commit, artifact)


async def _plain_boot(
    self: JobActivities, job: ValidatedJob, commit: str, artifact: Artifact
) -> TestResult:
    return await self.test(job, commit, artifact, job.repetitions)


async def _planned_here(req: BackportRequest) -> BackportPlan:
    return BackportPlan(BackportWord.ALREADY, req.change, message="no plan asked")


async def _nothing_recorded(rec: SeriesRecord, build_queue: str) -> SeriesTick:
    return SeriesTick(rec.watch, rec.sweep, rec.series)


async def _decided_here(activity: str, arg: object, result_type: type, queue: str) -> object:
    return BackportChange("c9", True)  # a build host's answer made up in the workflow


CHANGED_STEPS: dict[str, tuple[str, object, str, Callable[..., Any]]] = {
    INVESTIGATION_WORKFLOW: (
        "investigation-chain",
        activity_calls,
        "on_a_build_host",
        _decided_here,
    ),
    SWEEP_WORKFLOW: ("sweep-noisy", JobActivities, "test", _traced_boot),
    EXPLAIN_WORKFLOW: ("explain-pair", JobActivities, "explain", _plain_boot),
    BACKPORT_WORKFLOW: ("backport-verified", activity_calls, "plan_backport", _planned_here),
    SERIES_WORKFLOW: ("series-tick", activity_calls, "series_record", _nothing_recorded),
}


@pytest.mark.parametrize("kind", CHANGED_STEPS)
async def test_a_changed_step_of_each_other_workflow_is_caught(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, owner, attribute, changed = CHANGED_STEPS[kind]
    assert _type(_history(FOLDER / f"{name}.json")) == kind
    assert await _replay_failure(name) is None  # as recorded, it replays
    monkeypatch.setattr(owner, attribute, changed)
    assert isinstance(await _replay_failure(name), NondeterminismError), kind
