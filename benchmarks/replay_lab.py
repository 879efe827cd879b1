"""Benchmark tool: a real noisy-lab job's boots fed offline into the posterior engine.

`benchmarks.noisy_labs` keeps each job's boots in order (boot number, the commit's place
in the range, score, VM host, repetitions). This feeds them, in that order, into today's engine
on the lab's linear range (its commits that the job judged the same kernel as
their parent told as such) and prints what it made of them every few boots: one
boot's noise, the host's level and how it may move, the swing, the leading commit. It
shows why a real job took the boots it took, and what today's rules make of the same
boots, without an hour on the host. The engine gets each boot's repetitions (its score as
one sample from rows kept before reports had them) and cannot choose what boots next, so
its own job would have gone elsewhere. Run:
    .venv/bin/python -m benchmarks.replay_lab docs/data/noisy-labs-revision7.jsonl \\
        lab-103-slowdown25 [--every 10]
"""

import argparse
import json
import math
from pathlib import Path

from benchmarks.dags import linear
from benchmarks.results_file import read_rows
from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.levels import Fit, Levels
from kbisect.decide.terms import EngineConfig


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rows", type=Path, help="a noisy_labs --resume file")
    p.add_argument("lab", help="the lab's name in it, e.g. lab-103-slowdown25")
    p.add_argument("--kind", default="culprit", help="the job: culprit or A/A (culprit)")
    p.add_argument("--every", type=int, default=10, help="print every this many boots (10)")
    p.add_argument("--json", action="store_true", help="one JSON object a printed boot")
    return p


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    rows = [r for r in read_rows(args.rows) if r["lab"] == args.lab and r["kind"] == args.kind]
    row = rows[-1] if rows else {}
    if not row.get("boots_in_order"):
        raise SystemExit(f"{args.rows}: no {args.kind} job of {args.lab} with its boots in order")
    boots = row["boots_in_order"]
    size = max(boot[1] for boot in boots) + 1
    graph = linear(size)
    engine = Engine(graph, graph.order[0], ["c0"], EngineConfig())
    assert isinstance(engine.weigh, Levels)  # a timing's lab
    for place in row.get("same_kernel", []):
        engine.same_kernel(f"c{place + 1}", f"c{place}", "the job judged it its parent's kernel")
    for i, (_, place, score, host, *repetitions) in enumerate(boots, 1):
        samples = repetitions[0] if repetitions and repetitions[0] else [score]
        engine.observe(f"c{place + 1}", Boot(samples, host))
        if i % args.every and i < len(boots):
            continue
        if fit := engine.weigh.refit():
            _print(i, engine, fit, args.json)


def _print(boot: int, engine: Engine, fit: Fit, as_json: bool) -> None:
    trend = fit.trend
    top = engine.posterior.top()
    swing = trend.swing
    row = {
        "boot": boot,
        "sigma": round(fit.sigma, 4),
        "walk_sigmas": round(trend.model.walk / fit.sigma, 3),
        "slope": trend.model.slope,
        "jumps": trend.jumps,
        "level_now": round(math.expm1(trend.at(boot)[0]) if engine.log else trend.at(boot)[0], 4),
        "swing_phi": swing.phi if swing else None,
        "swing_share": round(swing.var / swing.total, 2) if swing else None,
        "top": top.commit,
        "p": round(top.p, 4),
    }
    if as_json:
        print(json.dumps(row), flush=True)
    else:
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
