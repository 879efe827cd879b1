"""Benchmark: how often each policy names the true culprit, and what it spends.

A simulator over the real decision code (workflows.engine) and three baselines
(benchmarks.sim_policies), on histories with merges and a noisy throughput-like metric
(benchmarks.sim_noise). Prints figures; no assertions. Run:
    .venv/bin/python -m benchmarks.accuracy              # the whole grid, 300 trials a cell
    .venv/bin/python -m benchmarks.accuracy --quick      # a small grid, 40 trials
    .venv/bin/python -m benchmarks.accuracy --sizes 64 1024 --cv 15 --steps 10 20 aa
"""

import argparse
import json
import math
import os
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from functools import cache

from benchmarks.dags import random_dag
from benchmarks.sim_noise import Noise, level_of
from benchmarks.sim_policies import POLICIES
from kbisect.workflows.strategy import Graph

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


@dataclass
class Row:
    cell: Cell
    exact: float  # named a true culprit (A/A: named nothing)
    false: float  # named a commit that is not a culprit
    builds: tuple[float, float]  # median, p90
    boots: tuple[float, float]
    confidence: float
    seconds: float


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

    def __call__(self, commit: str) -> list[float]:
        anc = self.graph.ancestry.get(commit, 0)
        below = sum(1 for c in self.culprits if anc >> self.bit[c] & 1)
        self.clock += 1
        return self.noise.boot(level_of(below, self.step), self.rng, self.clock)


def run_cell(cell: Cell) -> Row:
    graph = history(cell.size)
    noise = Noise(cell.cv / 100, cell.kind)
    step = 0.0 if cell.step == "aa" else float(cell.step.removeprefix("two")) / 100
    bit = {c: i for i, c in enumerate(graph.order)}
    started, runs = time.monotonic(), []
    for t in range(cell.trials):
        rng = random.Random(cell.seed * 1_000_003 + t)
        culprits = _culprits(graph, cell.step, rng)
        machine = Machine(graph, bit, culprits, noise, step, rng)
        machine.inert = _inert(graph, culprits, cell.inert, rng)
        runs.append((POLICIES[cell.policy](graph, OLD, machine), culprits))
    n = len(runs)
    exact = sum(1 for o, c in runs if (o.found in c if c else o.found is None)) / n
    false = sum(1 for o, c in runs if o.found is not None and o.found not in c) / n
    builds = sorted(o.builds for o, _ in runs)
    boots = sorted(o.boots for o, _ in runs)
    return Row(
        cell=cell,
        exact=exact,
        false=false,
        builds=(statistics.median(builds), builds[int(0.9 * (n - 1))]),
        boots=(statistics.median(boots), boots[int(0.9 * (n - 1))]),
        confidence=statistics.fmean(o.confidence for o, _ in runs),
        seconds=time.monotonic() - started,
    )


def grid(args: argparse.Namespace) -> list[Cell]:
    cells = []
    for size in args.sizes:
        for cv in args.cv:
            for kind in args.kinds:
                if kind != "lognormal" and cv != 15:
                    continue  # the scenarios run at the acceptance noise level only
                for step in args.steps:
                    for inert in args.inert:
                        for policy in args.policies:
                            cell = Cell(size, cv, kind, step, policy, args.trials, args.seed, inert)
                            cells.append(cell)
    return cells


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 1024, 16384], help="history sizes")
    p.add_argument("--cv", type=float, nargs="+", default=[5, 15, 25], help="noise, percent")
    p.add_argument(
        "--kinds",
        nargs="+",
        default=["lognormal", "outliers", "bimodal", "drift", "disturbed", "shifted"],
        help="noise scenarios (the others than lognormal run at CV 15 only)",
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
    p.add_argument("--trials", type=int, default=300, help="trials per cell (300)")
    p.add_argument("--seed", type=int, default=1, help="seed of the whole run")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    p.add_argument("--quick", action="store_true", help="64 and 1,024 commits, CV 15, 40 trials")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = p.parse_args()
    if args.quick:
        args.sizes, args.cv, args.kinds, args.trials = [64, 1024], [15], ["lognormal"], 40
    cells = grid(args)
    started = time.monotonic()
    head = "{:>6} {:>4} {:>9} {:>6} {:>6} {:>8} {:>7} {:>7} {:>11} {:>11} {:>6}"
    titles = ("n", "cv%", "noise", "step", "inert%", "policy", "exact", "false", "builds")
    titles += ("boots", "conf")
    print(head.format(*titles))
    print(
        "build target, ceil(log2 n) + 2 (endpoints included): "
        + ", ".join(f"n={s}: {math.ceil(math.log2(s)) + 2}" for s in args.sizes)
    )
    rows = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(run_cell, cells):
            rows.append(row)
            c = row.cell
            print(
                head.format(
                    c.size,
                    f"{c.cv:g}",
                    c.kind,
                    c.step,
                    c.inert,
                    c.policy,
                    f"{row.exact:.1%}",
                    f"{row.false:.1%}",
                    f"{row.builds[0]:g}/{row.builds[1]:g}",
                    f"{row.boots[0]:g}/{row.boots[1]:g}",
                    f"{row.confidence:.3f}" if c.policy == "kbisect" else "",
                ),
                flush=True,
            )
    print(
        f"{len(cells)} cells x {args.trials} trials in {time.monotonic() - started:.0f} s "
        "(builds and boots: median/p90)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
