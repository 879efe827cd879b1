"""Benchmark: sweeps on simulated boots, with and without boots past the budget for a pair
still undecided (`--max-boots`), at three noises: CV 7% (this host, quiet), 15% and 30%
(busy with other work).

Each cell is a series of kernel levels: "step" (100, 100, 75, 75, 75: a 25% step at the
second pair) and "aa" (five equal kernels). A boot's repetitions are noisy as real guests
here are (half of the noise shared by the boot, half each repetition's). For each cap the
benchmark prints how often the step's pair said "changed", how many other pairs did (false
alerts), how many pairs could not tell, and the boots a sweep took. Prints figures; no
assertions. Run:
    .venv/bin/python -m benchmarks.sweep_adaptive                      # 300 sweeps a cell
    .venv/bin/python -m benchmarks.sweep_adaptive --sweeps 1000 --cv 0.15 0.30 --caps 12 48
"""

import argparse
import math
import random
import statistics
from collections.abc import Sequence

from kbisect.contract import DEFAULT_MIN_EFFECT, DEFAULT_SWEEP_BOOTS
from kbisect.decide.sweep import Sweep
from kbisect.workflows.sweep_types import PairWord, SweepPair
from kbisect.workflows.sweep_types import SweepTestcase as Testcase

THROUGHPUT = Testcase("t", "throughput", "MB/s", "higher", "fast", 3, 60.0)
CELLS = {"step": [100.0, 100.0, 75.0, 75.0, 75.0], "aa": [100.0] * 5}
STEP_PAIR = 1  # the step cell's changed pair


def simulate(
    kernels: Sequence[float],
    seed: int,
    *,
    cv: float = 0.15,
    budget: int = DEFAULT_SWEEP_BOOTS,
    cap: int = 0,
    drift: float = 0.0,
    testcase: Testcase = THROUGHPUT,
    broken: int | None = None,
) -> tuple[list[SweepPair], int]:
    """A sweep of kernels at these levels, the host's level drifting by `drift` a boot.
    Its pairs and boots."""
    rng = random.Random(seed)
    sweep = Sweep(len(kernels), [testcase], budget, DEFAULT_MIN_EFFECT, cap)
    if broken is not None:
        sweep.give_up(0, broken, "does not build: error")
    n = 0
    while order := sweep.round(rng):
        for t, k in order:
            host = 1 + drift * n
            n += 1
            if cv == 0:
                sweep.boot(t, k, [kernels[k]] * 3)
                continue
            shared = rng.lognormvariate(0, cv / math.sqrt(2))
            reps = [
                kernels[k] * host * shared * rng.lognormvariate(0, cv / math.sqrt(2))
                for _ in range(3)
            ]
            sweep.boot(t, k, reps)
    return sweep.pairs(), n


def cell(name: str, cv: float, cap: int, sweeps: int) -> dict[str, float]:
    found = false = unsure = 0
    boots = []
    for seed in range(sweeps):
        pairs, n = simulate(CELLS[name], seed, cv=cv, cap=cap)
        boots.append(n)
        for i, p in enumerate(pairs):
            changed = p.verdict == PairWord.CHANGED
            if name == "step" and i == STEP_PAIR:
                found += changed
            else:
                false += changed
            unsure += p.verdict == PairWord.CANNOT_TELL
    return {
        "found": found / sweeps if name == "step" else math.nan,
        "false": false,
        "unsure": unsure,
        "boots": statistics.median(boots),
        "p90": sorted(boots)[int(0.9 * len(boots))],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", type=int, default=300, help="simulated sweeps a cell")
    ap.add_argument("--cv", type=float, nargs="+", default=[0.07, 0.15, 0.30], help="boot noise")
    ap.add_argument("--caps", type=int, nargs="+", default=[12, 48], help="--max-boots values")
    args = ap.parse_args(argv)
    print(f"{args.sweeps} sweeps a cell, 5 kernels (4 pairs), --boots {DEFAULT_SWEEP_BOOTS}")
    print("cell  cv    cap  step found  false pairs  cannot tell  boots (median, p90)")
    for name in CELLS:
        for cv in args.cv:
            for cap in args.caps:
                r = cell(name, cv, cap, args.sweeps)
                found = "-" if math.isnan(r["found"]) else f"{r['found']:.1%}"
                print(
                    f"{name:5} {cv:.2f} {cap:4} {found:>10} {r['false']:6.0f} "
                    f"{r['unsure']:12.0f}  {r['boots']:.0f}, {r['p90']:.0f}"
                )


if __name__ == "__main__":
    main()
