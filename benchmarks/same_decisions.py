"""Benchmark check: do two runs make the same decisions, trial by trial?

Compares two --trials-out files of benchmarks.accuracy, benchmarks.pass_fail or
benchmarks.farm (one before a change to the engine, one after, with the same options): per
cell, the trials both hold and those that differ (the commit found, boots, builds, moments
and any other field must be equal; the confidence within 1e-6), the first few
differences, and a total.
Prints figures; exits 0 either way. Run:
    .venv/bin/python -m benchmarks.same_decisions before.jsonl after.jsonl
"""

import argparse
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmarks.accuracy import Cell
from benchmarks.results_file import read_rows

TOLERANCE = 1e-6  # of the confidence: rounding in a refactor is not a decision
SHOWN = 5  # differing trials listed per cell
NOT_COMPARED = ("cell", "trial")

# A cell's label: these fields' values, then "name=value" of the others not at their
# default (accuracy's Cell), never what every cell of a run shares (UNSHOWN)
PLAIN = ("size", "cv", "kind", "step", "cell", "policy")
UNSHOWN = ("trials", "seed")
DEFAULTS = {f.name: f.default for f in fields(Cell)}


@dataclass
class Compared:
    trials: int = 0
    differ: list[str] = field(default_factory=list)  # one line per differing trial
    only_before: int = 0
    only_after: int = 0


def _key(cell: dict[str, Any]) -> str:
    return json.dumps(cell, sort_keys=True)


def label(cell: dict[str, Any]) -> str:
    """The cell's fields that tell it apart, e.g. "64 15 drift:0.05 10 kbisect"."""
    words = []
    for k, v in cell.items():
        shown = f"{v:g}" if isinstance(v, float) else str(v)
        if k in PLAIN:
            words.append(shown)
        elif k not in UNSHOWN and DEFAULTS.get(k) != v:
            words.append(f"{k}={shown}")
    return " ".join(words)


def load(path: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Trials by cell (in the file's order), then by number; a repeated trial: the last."""
    cells: dict[str, dict[int, dict[str, Any]]] = {}
    for line in read_rows(path):
        if isinstance(line.get("cell"), dict) and isinstance(line.get("trial"), int):
            cells.setdefault(_key(line["cell"]), {})[line["trial"]] = line
    return cells


def _confidence_differs(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is not b
    return not math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=TOLERANCE)


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two outcomes of one trial, as "field: before -> after"."""
    said = []
    for k in sorted((before.keys() | after.keys()) - set(NOT_COMPARED)):
        a, b = before.get(k), after.get(k)
        if _confidence_differs(a, b) if k == "confidence" else a != b:
            said.append(f"{k}: {a} -> {b}")
    return said


def compare(
    before: dict[str, dict[int, dict[str, Any]]], after: dict[str, dict[int, dict[str, Any]]]
) -> Iterator[tuple[str, Compared]]:
    """Each cell of either file, before's order first, with its comparison."""
    for key in [*before, *(k for k in after if k not in before)]:
        a, b = before.get(key, {}), after.get(key, {})
        c = Compared(only_before=len(a.keys() - b.keys()), only_after=len(b.keys() - a.keys()))
        for t in sorted(a.keys() & b.keys()):
            c.trials += 1
            if said := differences(a[t], b[t]):
                c.differ.append(f"trial {t}: " + "; ".join(said))
        yield label(next(iter((a or b).values()))["cell"]), c


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("before", type=Path, help="a --trials-out file (say, before a change)")
    p.add_argument("after", type=Path, help="another, of the same options (after it)")
    args = p.parse_args(argv)
    before, after = load(args.before), load(args.after)
    for path, cells in ((args.before, before), (args.after, after)):
        if not cells:
            print(f"{path}: no trials")
    total = differ = alone_total = 0
    for name, c in compare(before, after):
        total, differ = total + c.trials, differ + len(c.differ)
        alone_total += c.only_before + c.only_after
        alone = ""
        if c.only_before or c.only_after:
            alone = f" (only in before: {c.only_before}, only in after: {c.only_after})"
        print(f"{name}: {c.trials} trials, {len(c.differ)} differ{alone}")
        for line in c.differ[:SHOWN]:
            print(f"    {line}")
        if len(c.differ) > SHOWN:
            print(f"    ... {len(c.differ) - SHOWN} more")
    print(f"{total} trials, {differ} differ")
    if alone_total:
        print(f"{alone_total} trials in one file only, not compared")


if __name__ == "__main__":
    main()
