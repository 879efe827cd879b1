"""Recorded histories replay against the current workflow code: non-determinism fails here."""

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from kbisect.workflows import strategy
from kbisect.workflows.bisect_workflow import BisectWorkflow, sandbox_runner

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def _history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def test_histories_were_recorded() -> None:
    # Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_bisect_workflow.py
    # pre-verify-*: recorded before the verify step; they must keep replaying (patched()).
    old = [p for p in HISTORIES if p.stem.startswith("pre-verify-")]
    assert len(old) >= 4 and len(HISTORIES) - len(old) >= 5
    assert all("prepare_verify" not in p.read_text() for p in old)


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays(path: Path) -> None:
    await Replayer(workflows=[BisectWorkflow], workflow_runner=sandbox_runner()).replay_workflow(
        _history(path)
    )


async def test_a_changed_decision_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Replay compares commands, not activity arguments: a change that stops the search
    # early (different commands) must be caught. This also proves the patch reaches the
    # sandbox, i.e. the replay above ran our current strategy code.
    monkeypatch.setattr(strategy, "next_commits", lambda search, slots=1: [])
    result = await Replayer(
        workflows=[BisectWorkflow], workflow_runner=sandbox_runner()
    ).replay_workflow(_history(HISTORIES[0]), raise_on_replay_failure=False)
    assert result.replay_failure is not None
