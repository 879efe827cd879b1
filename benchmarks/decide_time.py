"""How long a decision takes, from a job's record: warm (the worker's cache holds the job's
engine) and from nothing (a worker restarted mid-job replays the whole record).

A simulated noisy job (a 4% step at CV 15% on a 64-commit range, on one host) is
driven through the Decider until its record holds --boots boots; each question's time
is taken with the cache, then the last record is decided by a fresh Decider. Also the
record's size as the data converter encodes it (what each question carries). Run:

    python -m benchmarks.decide_time [--boots 1000]
"""

import argparse
import asyncio
import math
import random
import statistics
import time

from temporalio.converter import DataConverter

from benchmarks.dags import linear
from kbisect.decide.decider import Decider
from kbisect.decide.record import Event, Kind, Record, Setup
from kbisect.decide.terms import EngineConfig


def simulated(boots: int, seed: int) -> tuple[Record, list[float]]:
    """A record of `boots` boots, and the warm time of each question on the way."""
    graph = linear(64)
    config = EngineConfig(min_effect=0.02, max_endpoint_boots=boots, max_commit_boots=boots)
    setup = Setup.of("bench", graph, graph.order[0], ["root"], config, flaky=False)
    record, rng, decider = Record(setup), random.Random(seed), Decider()
    culprit, sigma = 30, math.sqrt(math.log1p(0.15**2) / 2)
    times: list[float] = []
    booted = 0
    while booted < boots:
        record.events.append(Event(Kind.WANTS))
        start = time.perf_counter()
        commits = decider.decide(record).commits
        times.append(time.perf_counter() - start)
        if not commits:  # answered before --boots
            break
        for c in commits:
            step = 0.96 if c != "root" and int(c[1:]) >= culprit else 1.0
            level = 100.0 * step * math.exp(rng.gauss(0, sigma))
            samples = [level * math.exp(rng.gauss(0, sigma)) for _ in range(3)]
            record.events.append(Event(Kind.BOOT, commit=c, samples=samples, host="vm1"))
            booted += 1
    record.events.append(Event(Kind.LOOK))
    return record, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=1000, help="boots in the record")
    parser.add_argument("--seed", type=int, default=1, help="the simulated job's seed")
    args = parser.parse_args()
    record, warm = simulated(args.boots, args.seed)
    boots = sum(e.kind == Kind.BOOT for e in record.events)
    start = time.perf_counter()
    Decider().decide(record)
    cold = time.perf_counter() - start
    payload = asyncio.run(DataConverter.default.encode([record]))[0]
    print(f"record: {boots} boots, {len(record.events)} events, {len(payload.data):,} bytes")
    print(
        f"warm, each of {len(warm)} questions: median {statistics.median(warm) * 1000:.1f} ms, "
        f"max {max(warm) * 1000:.1f} ms"
    )
    print(f"from nothing (a restarted worker), the last record: {cold:.2f} s")


if __name__ == "__main__":
    main()
