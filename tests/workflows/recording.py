"""Ended jobs' histories saved for tests/workflows/test_replay.py, when re-recording.

Re-record with: KBISECT_RECORD_HISTORIES=1 pytest tests/workflows/test_<kind>_workflow.py
(docs/development.md lists the files). Otherwise `keep` does nothing: a test run never
changes a recorded history.
"""

import json
import os
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

HISTORIES = Path(__file__).parent / "histories"
SWITCH = "KBISECT_RECORD_HISTORIES"


async def keep(handle: WorkflowHandle[Any, Any], name: str) -> None:
    """Save the ended job's history as histories/NAME.json (only when re-recording)."""
    if name and os.environ.get(SWITCH):
        history = await handle.fetch_history()
        HISTORIES.mkdir(exist_ok=True)
        # compact: the indented form is a third larger, and nobody reads these by eye
        compact = json.dumps(json.loads(history.to_json()), separators=(",", ":"))
        (HISTORIES / f"{name}.json").write_text(compact)
