"""Benchmark: pass/fail bisections whose failure comes and goes, on simulated boots.

Each cell is a failure rate before and after the culprit ("1:30": 1% of boots fail before,
30% from the culprit on; "aa:1": 1% everywhere) on a linear history. kbisect's flaky engine
(workflows.flaky_engine), syzbot's rule (pkg/bisect: 10 boots a commit, endpoints
included, any failure is bad, a plain binary search) and a FACF-style search (fixed
rates from 10 boots of each endpoint; `facf`) each run the same seeded jobs. "no-diff"
counts the jobs that said "no difference" (kbisect's others that named nothing said
"cannot decide"; syzbot's rule and FACF, that the endpoints do not differ).
After the grid, the calibration of the P(culprit) kbisect claimed, over every cell.
Prints figures; no assertions. Run:
    .venv/bin/python -m benchmarks.pass_fail                     # 64 commits, 100 trials
    .venv/bin/python -m benchmarks.pass_fail --sizes 64 1024 --trials 300
    .venv/bin/python -m benchmarks.pass_fail --policies kbisect --trials-out trials.jsonl
With --trials-out, each trial's outcome as a JSON line; benchmarks.same_decisions compares
two such files (a change to the engine that should decide the same, trial by trial).
"""

import argparse
import os
import random
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.calibration import print_claims
from benchmarks.dags import linear
from benchmarks.results_file import append_rows
from kbisect.contract import DEFAULT_MAX_BOOTS, FLAKY_BOOTS_FACTOR, MAX_COMMIT_BOOTS
from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.terms import Answer, EngineConfig

CELLS = ("0:100", "1:30", "1:10", "0:5", "aa:1")
SYZBOT_RUNS = 10  # pkg/bisect's runs of the reproducer on each commit
FACF_SURE = 0.99  # the posterior that names a culprit (kbisect's own bar)
FACF_FLOOR = 0.01  # a rate never taken as 0 or 1: one surprise must not be fatal
FACF_BOOTS = 2000  # then "cannot decide" (kbisect's caps allow about as many)


@dataclass(frozen=True)
class Outcome:
    named: str | None
    builds: int
    boots: int
    no_difference: bool = False  # said so (not "cannot decide")
    confidence: float | None = None  # the P(culprit) it claimed


def rates(cell: str) -> tuple[float, float]:
    before, _, after = cell.partition(":")
    if before == "aa":
        return float(after) / 100, float(after) / 100
    return float(before) / 100, float(after) / 100


def kbisect(n: int, fails: Callable[[str], bool]) -> Outcome:
    """A --flaky job with the default caps (times FLAKY_BOOTS_FACTOR, as the workflow's)."""
    config = EngineConfig(
        max_endpoint_boots=DEFAULT_MAX_BOOTS * FLAKY_BOOTS_FACTOR,
        max_commit_boots=MAX_COMMIT_BOOTS * FLAKY_BOOTS_FACTOR,
    )
    engine = Engine(linear(n), f"c{n}", ["c0"], config, flaky=True)
    while commits := engine.wants():
        for c in commits:
            engine.observe(c, Boot([0.0 if fails(c) else 1.0], "h"))
    res = engine.result()
    no_difference = res.answer == Answer.NO_DIFFERENCE
    return Outcome(res.culprit, res.builds, res.boots, no_difference, res.confidence)


def syzbot(n: int, fails: Callable[[str], bool]) -> Outcome:
    """Binary search, each commit bad when any of its 10 boots fails; the bad endpoint
    must reproduce (some failure), as syzbot checks before bisecting."""
    boots = 0

    def bad(i: int) -> bool:
        nonlocal boots
        boots += SYZBOT_RUNS
        return any([fails(f"c{i}") for _ in range(SYZBOT_RUNS)])

    builds = 2
    if not bad(n) or bad(0):
        return Outcome(None, builds, boots, True)
    lo, hi = 0, n  # lo good, hi bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        builds += 1
        lo, hi = (lo, mid) if bad(mid) else (mid, hi)
    return Outcome(f"c{hi}", builds, boots)


def facf(n: int, fails: Callable[[str], bool]) -> Outcome:
    """FACF-style (Henderson et al., ICST 2023): one posterior over the suspects, Bernoulli
    likelihoods with fixed rates known before the search (here from 10 boots of each
    endpoint, as a test's flake history would give them), a boot where the cumulative
    posterior is nearest one half, a culprit at FACF_SURE. No "no culprit", no learning."""
    k_old = sum(fails("c0") for _ in range(SYZBOT_RUNS))
    k_new = sum(fails(f"c{n}") for _ in range(SYZBOT_RUNS))
    boots, booted = 2 * SYZBOT_RUNS, {0, n}
    if k_new <= k_old:
        return Outcome(None, 2, boots, True)
    r_old = max(k_old / SYZBOT_RUNS, FACF_FLOOR)
    r_new = min(max(k_new / SYZBOT_RUNS, r_old + FACF_FLOOR), 1 - FACF_FLOOR)
    post = [1.0 / n] * n  # post[i]: commit c{i+1} is the culprit
    while boots < FACF_BOOTS:
        best = max(range(n), key=post.__getitem__)
        if post[best] >= FACF_SURE:
            return Outcome(f"c{best + 1}", len(booted), boots)
        # A boot of c{v} asks "culprit at or before c{v}?": v where that is nearest even
        # odds (c{n} is the endpoint, whose rate is known).
        total, cumulative = 0.0, []
        for p in post[: n - 1]:
            total += p
            cumulative.append(abs(total - 0.5))
        probe = 1 + min(range(n - 1), key=cumulative.__getitem__)
        booted.add(probe)
        boots += 1
        failed = fails(f"c{probe}")
        for i in range(n):  # culprit c{i+1} makes c{probe} new-like when i + 1 <= probe
            rate = r_new if i + 1 <= probe else r_old
            post[i] *= rate if failed else 1 - rate
        s = sum(post)
        post = [p / s for p in post]
    return Outcome(None, len(booted), boots)


POLICIES = {"kbisect": kbisect, "syzbot": syzbot, "facf": facf}


def _failing(
    rng: random.Random, culprit: int | None, r_old: float, r_new: float
) -> Callable[[str], bool]:
    """One boot of a commit: True when it fails (from the culprit on at r_new)."""

    def fails(c: str) -> bool:
        changed = culprit is not None and int(c[1:]) >= culprit
        return rng.random() < (r_new if changed else r_old)

    return fails


def run_cell(n: int, cell: str, policy: str, trials: int, seed: int) -> dict[str, Any]:
    r_old, r_new = rates(cell)
    aa = cell.startswith("aa")
    right = wrong = same = 0
    builds, boots = [], []
    claims: list[tuple[float, bool]] = []  # (claimed P(culprit), right) of jobs that named one
    where = {"size": n, "cell": cell, "policy": policy, "trials": trials, "seed": seed}
    outcomes: list[dict[str, Any]] = []  # each trial's, as --trials-out writes them
    for t in range(trials):
        rng = random.Random(f"{seed}-{n}-{cell}-{t}")
        culprit = None if aa else rng.randrange(1, n + 1)
        out = POLICIES[policy](n, _failing(rng, culprit, r_old, r_new))
        outcomes.append(_trial_line(where, t, out))
        same += out.no_difference
        builds.append(out.builds)
        boots.append(out.boots)
        if out.named is None:
            continue
        hit = culprit is not None and out.named == f"c{culprit}"
        right, wrong = right + hit, wrong + (not hit)
        if out.confidence is not None:
            claims.append((out.confidence, hit))
    return {
        "size": n,
        "cell": cell,
        "policy": policy,
        "trials": trials,
        "named": right,
        "wrong": wrong,
        "no_difference": same,
        "builds": statistics.median(builds),
        "boots": statistics.median(boots),
        "boots_p90": sorted(boots)[int(0.9 * (len(boots) - 1))],
        "claims": claims,
        "outcomes": outcomes,
    }


def _trial_line(where: dict[str, Any], t: int, out: Outcome) -> dict[str, Any]:
    """One trial as --trials-out writes it (pass/fail jobs have no duets: no moments)."""
    confidence = None if out.confidence is None else round(out.confidence, 9)
    return {
        "cell": where,
        "trial": t,
        "found": out.named,
        "boots": out.boots,
        "builds": out.builds,
        "no_difference": out.no_difference,
        "confidence": confidence,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64], help="history sizes (64)")
    p.add_argument("--cells", nargs="+", default=list(CELLS), help="failure rates, e.g. 1:30")
    p.add_argument("--trials", type=int, default=100, help="trials per cell (100)")
    p.add_argument("--seed", type=int, default=1, help="seed of the whole run")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    p.add_argument(
        "--policies",
        nargs="+",
        choices=list(POLICIES),
        default=list(POLICIES),
        help="which policies run (default: all, " + ", ".join(POLICIES) + ")",
    )
    p.add_argument(
        "--trials-out",
        metavar="FILE",
        type=Path,
        help="also add each trial's outcome to FILE, one JSON line (the cell, the trial, the "
        "commit named, boots, builds, no difference, confidence), as each cell finishes "
        "(compare two such files with benchmarks.same_decisions)",
    )
    args = p.parse_args(argv)
    print("size  cell    policy   named  wrong  no-diff  builds  boots (median, p90)")
    todo = [
        (n, c, pol, args.trials, args.seed)
        for n in args.sizes
        for c in args.cells
        for pol in POLICIES
        if pol in args.policies
    ]
    claims: list[tuple[float, bool]] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for row in pool.map(run_cell, *zip(*todo, strict=True)):
            claims += row["claims"]
            if args.trials_out:
                append_rows(args.trials_out, row["outcomes"])
            print(
                f"{row['size']:<5} {row['cell']:<7} {row['policy']:<8} {row['named']:>5}  "
                f"{row['wrong']:>5}  {row['no_difference']:>7}  {row['builds']:>6}  "
                f"{row['boots']:>5} {row['boots_p90']:>5}",
                flush=True,
            )
    print_claims(claims, "kbisect's flaky engine")


if __name__ == "__main__":
    main()
