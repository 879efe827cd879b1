"""Benchmark: a noisy job's wall time on a farm of N build hosts and M VM hosts.

The real engine (kbisect.decide.engine, `--parallel M`) picks the boots; a discrete
event simulation runs them. What makes a farm slower than M times one host is modelled:
- each VM host has its own level (a 5% spread between hosts) and speed (boots 0.8x to
  1.25x as long): the engine judges a boot against references the same host booted, so a
  host's first probes before its references are wasted;
- builds gate boots: a commit boots once one of the N build hosts has built it (build
  times drawn from this machine's lab builds, warm ccache: BUILD_SECONDS); while a round
  boots, each build host builds ahead one commit the engine expects to pick next
  (the workflow does so when builds and boots run on different hosts; --no-ahead: not);
- the engine's picks are sequential: a round's boots all finish before it picks again
  (--rolling: a pick for each VM host as it frees up, engine.next_for, each host booting
  its own references, as the workflow does for a noisy job on a farm);
- one VM host may be lost mid-job (--lose MIN): its boot in flight is retried on another
  after the 60 s heartbeat timeout, and it takes no more.
Boots of the metric are sim_noise's (CV 15%, lognormal), about 14 s each (this host's
nvme-snapshot-read boots under TCG: 8.5-16 s measured). Prints, per size, step and M:
median wall time, its ratio to one host's, host efficiency (boot seconds / M x wall),
boots, how often the true culprit was named (A/A, `--steps 0`: none), the wrong commits
named, the "no difference" and "cannot decide" answers, and the calibration of the
claims (--trials-out: each trial's outcome too, a JSON line). No assertions. Run:
    .venv/bin/python -m benchmarks.farm                      # 64 commits, 10 trials a cell
    .venv/bin/python -m benchmarks.farm --sizes 64 1024 --steps 10 25 --hosts 1 2 4 8 16
"""

import argparse
import heapq
import math
import os
import random
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.calibration import print_claims
from benchmarks.dags import culprit_is_in, linear
from benchmarks.results_file import append_rows
from benchmarks.sim_noise import Noise, level_of
from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.strategy import Graph
from kbisect.decide.terms import Answer, EngineConfig

# Seconds of lab builds on this host (flaky and panic labs of 2026-11-24/25: incremental
# builds in a slot with a warm ccache, and a few full ones).
BUILD_SECONDS = (
    *(7.7, 7.9, 8.0, 8.9, 9.2, 9.3, 9.3, 9.5, 9.5, 9.6, 9.7, 9.7, 10.1, 10.1, 10.1),
    *(10.3, 10.3, 10.5, 10.6, 10.6, 10.8, 11.0, 11.0, 11.4, 11.6, 11.9, 12.7, 12.7),
    *(12.8, 12.9, 13.6, 13.9, 14.0, 14.6, 22.7, 24.0, 56.7, 129.3, 140.7, 151.6, 165.4),
    *(170.5, 214.2, 351.4),
)
BOOT_SECONDS, BOOT_SIGMA = 14.0, 0.25  # a boot's median and its lognormal spread
HOST_LEVEL_SPREAD = 0.05  # each VM host's level, a factor around 1
HOST_SPEEDS = (0.8, 1.25)  # each VM host's boot durations, a factor in this range
HEARTBEAT = 60.0  # a lost host's boot is retried after this (TEST_HEARTBEAT)
NOISE = Noise(cv=0.15)
OLD = "c0"  # the good endpoint, outside the simulated history


@dataclass(frozen=True)
class Farm:
    builders: int
    vms: int
    lose_at: float = 0.0  # seconds into the job one VM host is lost (0: never)
    ahead: bool = True  # build hosts build likely picks while the boots run
    rolling: bool = False  # a pick for each host as it frees up (engine.next_for)


@dataclass
class Run:
    wall: float
    boot_seconds: float
    boots: int
    right: bool  # the true culprit named (A/A: none named)
    named: str | None = None
    confidence: float = 0.0
    answer: str = ""


def _job(
    n: int, farm: Farm, seed: str, parallel: int
) -> tuple[random.Random, Graph, str, list[float], list[float], Engine]:
    """A seeded job's history, culprit, VM hosts' levels and speeds, and its engine."""
    rng = random.Random(seed)
    graph = linear(n)
    culprit = rng.choice(graph.order)
    levels = [rng.gauss(1.0, HOST_LEVEL_SPREAD) for _ in range(farm.vms)]
    speeds = [rng.uniform(*HOST_SPEEDS) for _ in range(farm.vms)]
    config = EngineConfig(parallel=parallel)
    engine = Engine(graph, graph.order[0], [OLD], config)
    return rng, graph, culprit, levels, speeds, engine


def _build(
    commit: str, now: float, builders: list[float], built: dict[str, float], rng: random.Random
) -> None:
    """The commit built on the build host free first (`builders`: when each is free)."""
    b = min(range(len(builders)), key=builders.__getitem__)
    builders[b] = max(builders[b], now) + rng.choice(BUILD_SECONDS)
    built[commit] = builders[b]


def simulate(n: int, step: float, farm: Farm, seed: str) -> Run:
    if farm.rolling:
        return simulate_rolling(n, step, farm, seed)
    rng, graph, culprit, levels, speeds, engine = _job(n, farm, seed, farm.vms)
    built: dict[str, float] = {}  # commit -> when its build is done
    builders = [0.0] * farm.builders  # when each build host is free
    hosts = [0.0] * farm.vms  # when each VM host is free
    lost: set[int] = set()
    now, boot_seconds, boots = 0.0, 0.0, 0
    while commits := engine.wants():
        finished: list[tuple[str, int]] = []
        for commit in commits:
            if commit not in built:
                _build(commit, now, builders, built, rng)
            # the VM host free first (a lost one takes nothing)
            h = min((i for i in range(farm.vms) if i not in lost), key=hosts.__getitem__)
            start = max(hosts[h], now, built[commit])
            seconds = BOOT_SECONDS * math.exp(rng.gauss(0, BOOT_SIGMA)) * speeds[h]
            if farm.lose_at and not lost and start <= farm.lose_at < start + seconds:
                if farm.vms > 1:  # its boot runs again elsewhere after the heartbeat
                    lost.add(h)
                    hosts[h] = math.inf
                    h = min((i for i in range(farm.vms) if i not in lost), key=hosts.__getitem__)
                    start = max(hosts[h], farm.lose_at + HEARTBEAT, built[commit])
                    seconds = BOOT_SECONDS * math.exp(rng.gauss(0, BOOT_SIGMA)) * speeds[h]
            hosts[h] = start + seconds
            boot_seconds += seconds
            boots += 1
            finished.append((commit, h))
        if farm.ahead:  # idle build hosts build where the next picks will likely fall
            for commit in engine.ahead(farm.builders):  # one a build host, as the workflow
                _build(commit, now, builders, built, rng)
                engine.built_ahead(commit)
        # the engine picks again once the round's boots are all in
        now = max(hosts[h] for _, h in finished)
        for commit, h in finished:
            changed = commit != OLD and culprit_is_in(graph, culprit, commit)
            level = level_of(changed, step) * levels[h]
            engine.observe(commit, Boot(NOISE.boot(level, rng, boots), f"vm{h}"))
    return _run(now, boot_seconds, boots, engine, culprit if step else None)


def simulate_rolling(n: int, step: float, farm: Farm, seed: str) -> Run:
    """The same farm with a pick for each VM host as it frees up: no round waits for its
    slowest boot or its last build. A build host idle at a pick builds one likely pick
    ahead."""
    rng, graph, culprit, levels, speeds, engine = _job(n, farm, seed, 1)
    built: dict[str, float] = {}
    builders = [0.0] * farm.builders
    events = [(0.0, h, "") for h in range(farm.vms)]  # (when, host, commit it finished)
    running: list[str] = []
    end, boot_seconds, boots, lost = 0.0, 0.0, 0, False

    while events:
        now, h, done = heapq.heappop(events)
        if done:
            running.remove(done)
            changed = done != OLD and culprit_is_in(graph, culprit, done)
            level = level_of(changed, step) * levels[h]
            engine.observe(done, Boot(NOISE.boot(level, rng, boots), f"vm{h}"))
            end = now
        if farm.lose_at and not lost and now >= farm.lose_at and farm.vms > 1:
            lost = True  # it takes no more boots (its last one counts: no heartbeat wait)
            continue
        commit = engine.next_for(f"vm{h}", running)
        if commit is None:
            continue
        if commit not in built:
            _build(commit, now, builders, built, rng)
        if farm.ahead:
            for likely in engine.ahead(sum(1 for b in builders if b <= now)):
                if likely not in built:
                    _build(likely, now, builders, built, rng)
                    engine.built_ahead(likely)
        seconds = BOOT_SECONDS * math.exp(rng.gauss(0, BOOT_SIGMA)) * speeds[h]
        heapq.heappush(events, (max(now, built[commit]) + seconds, h, commit))
        running.append(commit)
        boot_seconds += seconds
        boots += 1
    return _run(end, boot_seconds, boots, engine, culprit if step else None)


def _run(wall: float, boot_seconds: float, boots: int, engine: Engine, truth: str | None) -> Run:
    """A job's figures; `truth`: the culprit (None: an A/A range, where naming none is
    right)."""
    res = engine.result()
    named = res.culprit if res.answer == Answer.FOUND else None
    return Run(wall, boot_seconds, boots, named == truth, named, res.confidence, res.answer)


def trial(
    n: int,
    step: float,
    vms: int,
    builders: int,
    lose: float,
    ahead: bool,
    rolling: bool,
    t: int,
) -> Run:
    """One job of a cell; trial t has the same seed in every cell of a size and step."""
    return simulate(n, step, Farm(builders, vms, lose * 60, ahead, rolling), f"{n}-{step}-{t}")


def trial_line(n: int, step: float, vms: int, t: int, run: Run) -> dict[str, Any]:
    """One trial as --trials-out writes it."""
    return {
        "cell": {"size": n, "step": step, "hosts": vms},
        "trial": t,
        "answer": str(run.answer),
        "named": run.named,
        "right": run.right,
        "boots": run.boots,
        "wall": round(run.wall, 3),
        "confidence": round(run.confidence, 9),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64], help="history sizes (64)")
    p.add_argument(
        "--steps", type=float, nargs="+", default=[10], help="steps, percent (10; 0: A/A)"
    )
    p.add_argument(
        "--hosts", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="VM hosts (1 2 4 8 16)"
    )
    p.add_argument("--builders", type=int, default=2, help="build hosts (2)")
    p.add_argument("--trials", type=int, default=10, help="jobs a cell (10)")
    p.add_argument(
        "--lose", type=float, default=0.0, metavar="MIN", help="lose a VM host MIN minutes in"
    )
    p.add_argument("--no-ahead", action="store_true", help="no builds ahead of the engine's picks")
    p.add_argument("--rolling", action="store_true", help="a pick for each VM host as it frees up")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    p.add_argument(
        "--trials-out", type=Path, help="append each trial's outcome to this file, a JSON line"
    )
    args = p.parse_args(argv)
    how = (args.builders, args.lose, not args.no_ahead, args.rolling)
    cells = [(n, s / 100, m) for n in args.sizes for s in args.steps for m in args.hosts]
    print(
        "size  step  VM hosts  wall (min)  vs one host  efficiency  boots  right  "
        "wrong commit  no-diff  undecided"
    )
    one: dict[tuple[int, float], float] = {}
    claims: list[tuple[float, bool]] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        # the trials, not the cells, share the processes: a cell of 16 hosts is slow
        todo = [(*c, *how, t) for c in cells for t in range(args.trials)]
        results = pool.map(trial, *zip(*todo, strict=True), chunksize=4)
        for n, step, m in cells:
            runs = [next(results) for _ in range(args.trials)]
            if args.trials_out:
                append_rows(
                    args.trials_out, [trial_line(n, step, m, t, r) for t, r in enumerate(runs)]
                )
            wall = statistics.median(r.wall for r in runs)
            one.setdefault((n, step), wall)  # the first M of each size and step
            eff = statistics.median(r.boot_seconds / (m * r.wall) for r in runs)
            print(
                f"{n:<5} {step:>4.0%}  {m:>8}  {wall / 60:>10.1f}  "
                f"{wall / one[(n, step)]:>11.2f}  {eff:>10.2f}  "
                f"{statistics.median(r.boots for r in runs):>5.0f}  "
                f"{sum(r.right for r in runs):>3}/{len(runs)}  "
                f"{sum(1 for r in runs if r.named and not r.right):>12}  "
                f"{sum(1 for r in runs if r.answer == Answer.NO_DIFFERENCE):>7}  "
                f"{sum(1 for r in runs if r.answer == Answer.UNDECIDED):>9}",
                flush=True,
            )
            claims += [(r.confidence, r.right) for r in runs if r.named]
    print_claims(claims, "kbisect on the farm")


if __name__ == "__main__":
    main()
