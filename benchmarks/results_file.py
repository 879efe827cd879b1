"""A benchmark's results kept as JSON lines, so a long run can be finished later."""

import json
import os
import sys
from collections.abc import Iterable, Iterator
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
    append_rows(path, [row])


def append_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """More lines, one a row, as append_row writes one (one write and one sync for all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = path.exists() and path.stat().st_size and not _ends_a_line(path)
    text = "".join(json.dumps(row) + "\n" for row in rows)
    with path.open("a") as f:
        f.write(("\n" if cut else "") + text)
        f.flush()
        os.fsync(f.fileno())


def _ends_a_line(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
