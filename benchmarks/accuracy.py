"""Benchmark: how often each policy names the true culprit, and what it spends.

A simulator over the real decision code (workflows.engine) and five baselines
(benchmarks.sim_policies), on histories with merges and a noisy throughput-like metric
(benchmarks.sim_noise). Prints figures; no assertions. Run:
    .venv/bin/python -m benchmarks.accuracy              # the whole grid, 300 trials a cell
    .venv/bin/python -m benchmarks.accuracy --quick      # a small grid, 40 trials
    .venv/bin/python -m benchmarks.accuracy --sizes 64 1024 --cv 15 --steps 10 20 aa
    .venv/bin/python -m benchmarks.accuracy --resume grid.jsonl   # finish it across sessions
    .venv/bin/python -m benchmarks.accuracy --pass-fail --sizes 64 1024   # pass/fail cells
    .venv/bin/python -m benchmarks.accuracy --quick --trials-out trials.jsonl   # each trial
After the grid, a calibration table: the kbisect jobs that named a commit, by the
confidence they claimed, against how often they were right.
With --trials-out, each trial's outcome as a JSON line; benchmarks.same_decisions compares
two such files (a change to the engine that should decide the same, trial by trial).
"""

import argparse
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks.calibration import print_claims
from benchmarks.dags import random_dag
from benchmarks.results_file import append_row, append_rows, read_rows
from benchmarks.sim_noise import Noise, level_of
from benchmarks.sim_policies import POLICIES, Outcome
from kbisect.contract import DEFAULT_MAX_BOOTS, DEFAULT_MIN_EFFECT
from kbisect.decide.strategy import Graph

OLD = "c0"


@dataclass(frozen=True)
class Cell:
    size: int
    cv: float
    kind: str  # the noise scenario
    step: str  # "10" (percent), "aa" (no change) or "two10" (two culprits of 10% each)
    policy: str
    trials: int
    seed: int
    inert: int = 0  # percent of commits that cannot change the kernel (known to kbisect)
    # kbisect's duets: each probe booted beside a reference at one moment, the two guests'
    # between-boot noise correlated this much (the host's share); 0: one guest at a time
    duet: float = 0.0
    # kbisect's --min-effect, percent: endpoints closer than this are "no difference"
    min_effect: float = DEFAULT_MIN_EFFECT * 100
    max_boots: int = DEFAULT_MAX_BOOTS  # kbisect's --max-boots (per endpoint)


@dataclass
class Row:
    cell: Cell
    exact: float  # named a true culprit (A/A: named nothing)
    false: float  # named a commit that is not a culprit
    builds: tuple[float, float]  # median, p90
    boots: tuple[float, float]
    confidence: float
    seconds: float
    # (claimed confidence, right) of each trial that named a commit: the calibration's data
    claims: list[tuple[float, bool]] = field(default_factory=list)
    moments: tuple[float, float] = (0.0, 0.0)  # duets: boot times, median and p90
    # each trial's outcome, in order (--trials-out); never in the rows' JSON (as_json)
    outcomes: list[Outcome] = field(default_factory=list, repr=False, compare=False)

    @property
    def misses(self) -> int:
        """Trials that did not name a true culprit (A/A: that named anything)."""
        return self.cell.trials - round(self.exact * self.cell.trials)

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Row":
        """A row as asdict() wrote it to JSON."""
        return Row(
            cell=Cell(**data["cell"]),
            exact=data["exact"],
            false=data["false"],
            builds=(data["builds"][0], data["builds"][1]),
            boots=(data["boots"][0], data["boots"][1]),
            confidence=data["confidence"],
            seconds=data["seconds"],
            claims=[(float(p), bool(r)) for p, r in data.get("claims", [])],
            moments=_pair(data.get("moments", (0.0, 0.0))),
        )


def as_json(row: Row) -> dict[str, Any]:
    """The row as --json and --resume keep it: without its trials' outcomes."""
    data = asdict(replace(row, outcomes=[]))
    del data["outcomes"]
    return data


def trial_lines(row: Row) -> list[dict[str, Any]]:
    """The row's trials as --trials-out writes them, one JSON object each."""
    cell = asdict(row.cell)
    return [
        {
            "cell": cell,
            "trial": t,
            "found": o.found,
            "boots": o.boots,
            "builds": o.builds,
            "moments": o.moments,
            "confidence": round(o.confidence, 9),
        }
        for t, o in enumerate(row.outcomes)
    ]


def _pair(values: Sequence[float]) -> tuple[float, float]:
    return float(values[0]), float(values[1])


@cache
def history(size: int) -> Graph:
    return random_dag(size, merges=max(1, size // 32), seed=size)


def _culprits(graph: Graph, step: str, rng: random.Random) -> list[str]:
    if step == "aa":
        return []
    first = rng.choice(graph.order[1:])  # never the new endpoint itself
    if not step.startswith("two"):
        return [first]
    later = [c for c in graph.order if graph.ancestry[c] >> graph.order.index(first) & 1]
    return [first, rng.choice(later)] if len(later) > 1 else [first]


def _inert(graph: Graph, culprits: list[str], percent: int, rng: random.Random) -> dict[str, str]:
    """Commits whose change the config does not compile (never a culprit), each with its
    first parent (OLD outside the range): what a build's dependency files tell kbisect."""
    chosen = {}
    for c in graph.order[1:]:
        if len(graph.parents.get(c, ())) > 1:
            continue  # a merge brings its side's changes: the simulator's truth sees them
        if c not in culprits and rng.random() < percent / 100:
            chosen[c] = (graph.parents.get(c) or (OLD,))[0]
    return chosen


class Machine:
    """Boots of one trial: the truth (which commits hold a culprit) stays in here."""

    def __init__(
        self,
        graph: Graph,
        bit: dict[str, int],
        culprits: list[str],
        noise: Noise,
        step: float,
        rng: random.Random,
    ) -> None:
        self.graph, self.bit, self.culprits = graph, bit, culprits
        self.noise, self.step, self.rng, self.clock = noise, step, rng, 0
        self.inert: dict[str, str] = {}  # commit -> first parent: the same kernel
        self.host: float | None = None  # the host's swing, when the noise has one
        self.duet = 0.0  # Cell.duet
        self.min_effect = DEFAULT_MIN_EFFECT  # Cell.min_effect, a fraction
        self.max_boots = DEFAULT_MAX_BOOTS  # Cell.max_boots

    def _level(self, commit: str) -> float:
        anc = self.graph.ancestry.get(commit, 0)
        return level_of(sum(1 for c in self.culprits if anc >> self.bit[c] & 1), self.step)

    def __call__(self, commit: str) -> list[float]:
        self.clock += 1
        if self.noise.swing:
            self.host = self.noise.swung(self.host, self.rng)
        return self.noise.boot(self._level(commit), self.rng, self.clock, self.host)

    def together(self, commits: Sequence[str]) -> list[list[float]]:
        """Boots of these commits at one moment on one host (a duet): `duet` of each
        one's between-boot noise is the host's, theirs alike."""
        self.clock += 1
        if self.noise.swing:
            self.host = shared = self.noise.swung(self.host, self.rng)
        else:
            shared = self.rng.gauss(0, 1)
        r = self.duet
        return [
            self.noise.boot(
                self._level(c),
                self.rng,
                self.clock,
                math.sqrt(r) * shared + math.sqrt(1 - r) * self.rng.gauss(0, 1),
            )
            for c in commits
        ]


PROGRESS_EVERY = 60.0  # seconds between a running cell's progress lines


def _label(c: Cell) -> str:
    return f"{c.size} {c.cv:g}% {c.kind} {c.step} {c.policy}"


def run_cell(cell: Cell) -> Row:
    graph = history(cell.size)
    noise = Noise(cell.cv / 100, cell.kind)
    step = 0.0 if cell.step == "aa" else float(cell.step.removeprefix("two")) / 100
    bit = {c: i for i, c in enumerate(graph.order)}
    started, runs = time.monotonic(), []
    said = started
    for t in range(cell.trials):
        if time.monotonic() - said >= PROGRESS_EVERY:  # a long cell shows it is moving
            said = time.monotonic()
            print(f"{_label(cell)}: {t} of {cell.trials} trials", file=sys.stderr, flush=True)
        rng = random.Random(cell.seed * 1_000_003 + t)
        culprits = _culprits(graph, cell.step, rng)
        machine = Machine(graph, bit, culprits, noise, step, rng)
        machine.inert = _inert(graph, culprits, cell.inert, rng)
        machine.duet = cell.duet  # only kbisect boots duets (Machine.together)
        machine.min_effect = cell.min_effect / 100  # and only kbisect reads it
        machine.max_boots = cell.max_boots
        runs.append((POLICIES[cell.policy](graph, OLD, machine), culprits))
    n = len(runs)
    exact = sum(1 for o, c in runs if (o.found in c if c else o.found is None)) / n
    false = sum(1 for o, c in runs if o.found is not None and o.found not in c) / n
    builds = sorted(o.builds for o, _ in runs)
    boots = sorted(o.boots for o, _ in runs)
    moments = sorted(o.moments or o.boots for o, _ in runs)
    return Row(
        cell=cell,
        exact=exact,
        false=false,
        builds=(statistics.median(builds), builds[int(0.9 * (n - 1))]),
        boots=(statistics.median(boots), boots[int(0.9 * (n - 1))]),
        confidence=statistics.fmean(o.confidence for o, _ in runs),
        seconds=time.monotonic() - started,
        claims=[(o.confidence, o.found in c) for o, c in runs if o.found is not None],
        moments=(statistics.median(moments), moments[int(0.9 * (n - 1))]),
        outcomes=[o for o, _ in runs],
    )


def print_calibration(rows: list[Row], policy: str = "kbisect") -> None:
    print_claims([pair for r in rows if r.cell.policy == policy for pair in r.claims], policy)


def grid(args: argparse.Namespace) -> list[Cell]:
    cells = []
    every = itertools.product(args.sizes, args.cv, args.kinds, args.steps, args.inert)
    for size, cv, kind, step, inert in every:
        if kind != "lognormal" and cv != 15 and 15 in args.cv:
            continue  # the scenarios run at the acceptance noise level, unless asked alone
        for policy in args.policies:
            for duet in args.duet if policy == "kbisect" else [0.0]:
                cells.append(
                    Cell(
                        size,
                        cv,
                        kind,
                        step,
                        policy,
                        args.trials,
                        args.seed,
                        inert,
                        duet,
                        args.min_effect,
                        args.max_boots,
                    )
                )
    return cells


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 1024, 16384], help="history sizes")
    p.add_argument("--cv", type=float, nargs="+", default=[5, 15, 25], help="noise, percent")
    p.add_argument(
        "--kinds",
        nargs="+",
        default=["lognormal", "outliers", "bimodal", "drift", "disturbed", "shifted"],
        help="noise scenarios (the others than lognormal run at CV 15 only, unless --cv "
        "leaves 15 out)",
    )
    p.add_argument(
        "--steps",
        nargs="+",
        default=["5", "10", "20", "50", "two10", "aa"],
        help="regression sizes in percent; two10: two culprits of 10%%; aa: no change",
    )
    p.add_argument(
        "--inert",
        type=int,
        nargs="+",
        default=[0],
        help="percent of commits that touch nothing the config compiles (kbisect skips them)",
    )
    p.add_argument("--policies", nargs="+", default=list(POLICIES), help="which policies")
    p.add_argument(
        "--duet",
        type=float,
        nargs="+",
        default=[0.0],
        help="kbisect in duets: each probe beside a reference at one moment, the two guests' "
        "between-boot noise correlated this much (0: one guest at a time)",
    )
    p.add_argument(
        "--min-effect",
        type=float,
        default=DEFAULT_MIN_EFFECT * 100,
        metavar="PCT",
        help="kbisect's --min-effect: endpoints closer than this percentage are no difference "
        f"(default {DEFAULT_MIN_EFFECT * 100:g}; a step this small is as likely called none)",
    )
    p.add_argument(
        "--max-boots",
        type=int,
        default=DEFAULT_MAX_BOOTS,
        metavar="N",
        help=f"kbisect's --max-boots: boots per endpoint before cannot decide (default "
        f"{DEFAULT_MAX_BOOTS}); a commit's cap rises in proportion",
    )
    p.add_argument("--trials", type=int, default=300, help="trials per cell (300)")
    p.add_argument("--seed", type=int, default=1, help="seed of the whole run")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    p.add_argument("--quick", action="store_true", help="64 and 1,024 commits, CV 15, 40 trials")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    p.add_argument(
        "--resume",
        metavar="FILE",
        type=Path,
        help="JSON lines of finished cells: those in it are not run again, each new one is "
        "added as it finishes",
    )
    p.add_argument(
        "--pass-fail",
        action="store_true",
        help="the pass/fail cells instead (failure rates before and after the culprit; "
        "benchmarks.pass_fail with these --sizes, --trials, --seed, --jobs and --trials-out)",
    )
    p.add_argument(
        "--trials-out",
        metavar="FILE",
        type=Path,
        help="also add each trial's outcome to FILE, one JSON line (the cell, the trial, the "
        "commit found, boots, builds, moments, confidence), as each cell finishes; cells "
        "taken from --resume are not run again, so not added (compare two such files with "
        "benchmarks.same_decisions)",
    )
    return p


HEAD = "{:>6} {:>4} {:>9} {:>6} {:>6} {:>8} {:>7} {:>7} {:>9} {:>11} {:>11} {:>6}"


def _print_row(row: Row) -> None:
    c = row.cell
    print(
        HEAD.format(
            c.size,
            f"{c.cv:g}",
            c.kind,
            c.step,
            c.inert,
            c.policy,
            f"{row.exact:.1%}",
            f"{row.false:.1%}",
            f"{row.misses}/{c.trials}",
            f"{row.builds[0]:g}/{row.builds[1]:g}",
            f"{row.boots[0]:g}/{row.boots[1]:g}",
            f"{row.confidence:.3f}" if c.policy == "kbisect" else "",
        )
        + (f" duets {c.duet:g}: {row.moments[0]:g}/{row.moments[1]:g} boot times" if c.duet else "")
        + (f" min effect {c.min_effect:g}%" if c.min_effect != DEFAULT_MIN_EFFECT * 100 else "")
        + (f" max boots {c.max_boots}" if c.max_boots != DEFAULT_MAX_BOOTS else ""),
        flush=True,
    )


def load_finished(path: Path) -> dict[Cell, Row]:
    """The cells a --resume file holds; a line cut short by a killed run is left out."""
    done = {}
    for data in read_rows(path):
        try:
            row = Row.from_json(data)
        except (ValueError, TypeError, KeyError, IndexError):
            continue
        done[row.cell] = row
    return done


def _run(cells: list[Cell], jobs: int) -> Iterator[Row]:
    """The cells' rows in order: in this process for one job, else in a pool."""
    if jobs <= 1 or len(cells) <= 1:
        yield from map(run_cell, cells)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(run_cell, cells)


def _appender(path: Path | None) -> Callable[[Row], None]:
    """Adds each finished row to the --resume file at once, one JSON line."""
    if path is None:
        return lambda row: None
    return lambda row: append_row(path, as_json(row))


def _trials_appender(path: Path | None) -> Callable[[Row], None]:
    """Adds each finished row's trials to the --trials-out file at once, a line each."""
    if path is None:
        return lambda row: None
    return lambda row: append_rows(path, trial_lines(row))


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.pass_fail:
        from benchmarks import pass_fail

        sizes = [str(s) for s in args.sizes]
        tuning = ["--trials", str(args.trials), "--seed", str(args.seed), "--jobs", str(args.jobs)]
        if args.trials_out:
            tuning += ["--trials-out", str(args.trials_out)]
        pass_fail.main(["--sizes", *sizes, *tuning])
        return
    if args.quick:
        args.sizes, args.cv, args.kinds, args.trials = [64, 1024], [15], ["lognormal"], 40
    cells = grid(args)
    done = load_finished(args.resume) if args.resume else {}
    started = time.monotonic()
    titles = ("n", "cv%", "noise", "step", "inert%", "policy", "exact", "false", "misses")
    print(HEAD.format(*titles, "builds", "boots", "conf"))
    print(
        "build target, ceil(log2 n) + 2 (endpoints included): "
        + ", ".join(f"n={s}: {math.ceil(math.log2(s)) + 2}" for s in args.sizes)
    )
    rows = [done[c] for c in cells if c in done]
    if args.resume:
        print(f"{len(rows)} cells from {args.resume}, {len(cells) - len(rows)} to run")
    for row in rows:
        _print_row(row)
    append, todo = _appender(args.resume), [c for c in cells if c not in done]
    append_trials = _trials_appender(args.trials_out)
    for row in _run(todo, args.jobs):
        append(row)
        append_trials(row)
        rows.append(row)
        _print_row(row)
    print(
        f"{len(cells)} cells ({len(todo)} run now) x {args.trials} trials in "
        f"{time.monotonic() - started:.0f} s "
        "(builds and boots: median/p90; misses: trials that did not name a true culprit)"
    )
    print_calibration(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([as_json(r) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
