"""Benchmark: how long choosing the next commit takes on release-sized histories, and how
large the range's payload is (Temporal refuses payloads over 2 MB).

Prints figures; no assertions (these machines are shared and noisy). Run:
    .venv/bin/python -m benchmarks.strategy
"""

import time
import tracemalloc

from temporalio.converter import DataConverter

from benchmarks.dags import hex_names, random_dag, validated_job
from kbisect.decide.strategy import Graph, Search, State, next_commits
from kbisect.workers.validation import MAX_SUBJECTS


def payload_mib(graph: Graph) -> float:
    """The validated job's size for this range, with 40-character hashes and 60-character
    subjects (carried up to MAX_SUBJECTS commits, as the validate activity does)."""
    graph = hex_names(graph)
    subjects = {h: "x" * 60 for h in graph.order} if len(graph.order) <= MAX_SUBJECTS else {}
    job = validated_job(graph, subjects, old="0" * 40)
    payload = DataConverter.default.payload_converter.to_payloads([job])[0]
    return len(payload.data) / 2**20


def main() -> None:
    row = "{:>8} {:>7} {:>11} {:>12} {:>6} {:>9} {:>12}"
    print(
        row.format(
            "commits", "merges", "first pick", "full search", "tests", "peak MiB", "payload MiB"
        )
    )
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
                len(graph.order),
                merges,
                f"{first:.3f}s",
                f"{total:.3f}s",
                tests,
                f"{peak:.1f}",
                f"{payload_mib(graph):.2f}",
            )
        )


if __name__ == "__main__":
    main()
