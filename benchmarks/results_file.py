"""A benchmark's results kept as JSON lines, so a long run can be finished later."""

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Each line's object; a line cut short by a killed run is left out, and said so."""
    if not path.exists():
        return
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            print(f"{path}:{n}: not a JSON row, run again", file=sys.stderr)
            continue
        if isinstance(row, dict):
            yield row


def append_row(path: Path, row: dict[str, Any]) -> None:
    """One more line, on disk before this returns; a line cut short is ended first, so the
    new one starts afresh."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
    with path.open("a") as f:
        f.write(("\n" if cut else "") + json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())
