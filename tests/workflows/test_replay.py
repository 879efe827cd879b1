"""Recorded histories replay against the current workflow code: non-determinism fails here."""

import base64
import contextlib
import re
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from kbisect.workflows import strategy
from kbisect.workflows.bisect_workflow import (
    CONTROLS_V2_PATCH,
    ENGINE_PATCH,
    HOST_CHECK_PATCH,
    SAME_KERNEL_PATCH,
    TRACE_PATCH,
    BisectWorkflow,
    sandbox_runner,
)

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def _history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def _patches(path: Path) -> set[str]:
    """The patch ids a history recorded (marker payloads are base64 JSON)."""
    found = set()
    for token in re.findall(r'"data":\s*"([A-Za-z0-9+/=]+)"', path.read_text()):
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            found.update(re.findall(r'"id":"([a-z0-9-]+)"', base64.b64decode(token).decode()))
    return found


def test_histories_were_recorded() -> None:
    # Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_bisect_workflow.py
    # (after renaming the current ones to pre-<patch>-*). They must keep replaying:
    # pre-samekernel-*: the engine before same-kernel, host-check, controls-v2 and trace.
    # Every job replays the engine: the pre-engine code and its histories are gone.
    assert all(ENGINE_PATCH in _patches(p) for p in HISTORIES)
    pre_same = [p for p in HISTORIES if p.stem.startswith("pre-samekernel-")]
    current = [p for p in HISTORIES if not p.stem.startswith("pre-")]
    assert len(pre_same) >= 5
    assert all(SAME_KERNEL_PATCH not in _patches(p) for p in pre_same)
    # Every branch the current engine can take is in some current history.
    now = {p.stem: _patches(p) for p in current}
    assert {"linear-64", "fix-64", "merges", "skips", "engine-retest"} <= set(now)
    engine = {ENGINE_PATCH, SAME_KERNEL_PATCH, HOST_CHECK_PATCH, CONTROLS_V2_PATCH}
    assert all(engine <= patches for patches in now.values()), now
    assert TRACE_PATCH in now["trace"]
    assert "classify_commits" in (HISTORIES[0].parent / "same-kernel.json").read_text()


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
