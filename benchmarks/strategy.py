"""Benchmark: how long choosing the next commit takes on release-sized histories.

Prints figures; no assertions (these machines are shared and noisy). Run:
    .venv/bin/python -m benchmarks.strategy
"""

import time
import tracemalloc

from tests.workflows.dags import random_dag
from workflows.strategy import Search, State, next_commits


def main() -> None:
    row = "{:>8} {:>7} {:>11} {:>12} {:>6} {:>9}"
    print(row.format("commits", "merges", "first pick", "full search", "tests", "peak MiB"))
    for n, merges in ((1000, 20), (5000, 100), (15000, 300)):
        graph = random_dag(n, merges=merges, seed=n)
        tracemalloc.start()
        t0 = time.perf_counter()
        search = Search(graph=graph, new=graph.order[0])
        next_commits(search)
        first = time.perf_counter() - t0
        culprit = graph.order[len(graph.order) // 3]
        culprit_bit = graph.order.index(culprit)
        tests = 0
        while nxt := next_commits(search):
            tests += 1
            has = graph.ancestry[nxt[0]] >> culprit_bit & 1
            search.mark(nxt[0], State.NEW if has else State.OLD)
        total = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(
            row.format(
                len(graph.order), merges, f"{first:.3f}s", f"{total:.3f}s", tests, f"{peak:.1f}"
            )
        )


if __name__ == "__main__":
    main()
