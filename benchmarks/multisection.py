"""Benchmark: rounds and tests that `--parallel K` takes, over every culprit position.

A round is one batch of commits built and tested at once, so wall time follows rounds
while machine time follows tests. Prints figures; no assertions. Run:
    .venv/bin/python -m benchmarks.multisection
"""

from benchmarks.dags import culprit_is_in, linear, random_dag
from kbisect.decide.strategy import Graph, Search, State, spread_commits


def rounds_and_tests(graph: Graph, culprit: str, parallel: int) -> tuple[int, int]:
    search = Search(graph=graph, new=graph.order[0])
    rounds = tests = 0
    while batch := spread_commits(search, parallel):
        rounds, tests = rounds + 1, tests + len(batch)
        for c in batch:
            search.mark(c, State.NEW if culprit_is_in(graph, culprit, c) else State.OLD)
    return rounds, tests


def main() -> None:
    row = "{:>22} {:>8} {:>12} {:>11} {:>11}"
    print(row.format("history", "parallel", "worst rounds", "mean rounds", "mean tests"))
    histories = {
        "linear, 64": linear(64),
        "DAG, 1000 (20 merges)": random_dag(1000, merges=20, seed=5),
    }
    for name, graph in histories.items():
        culprits = graph.order[:: max(1, len(graph.order) // 64)]
        for parallel in (1, 2, 3, 4):
            runs = [rounds_and_tests(graph, c, parallel) for c in culprits]
            print(
                row.format(
                    name,
                    parallel,
                    max(r for r, _ in runs),
                    f"{sum(r for r, _ in runs) / len(runs):.1f}",
                    f"{sum(t for _, t in runs) / len(runs):.1f}",
                )
            )


if __name__ == "__main__":
    main()
