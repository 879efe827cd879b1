import math
import subprocess
from pathlib import Path

import pytest

from benchmarks.dags import as_git_repo, culprit_is_in, linear, random_dag
from kbisect.decide.strategy import Graph, Search, State, candidates, next_commits, outcome


def run_bisection(
    graph: Graph, culprit: str, skip: frozenset[str] = frozenset()
) -> tuple[Search, int]:
    search = Search(graph=graph, new=graph.order[0])
    tests = 0
    while nxt := next_commits(search):
        (c,) = nxt
        tests += 1
        if c in skip:
            search.mark(c, State.SKIP)
        else:
            search.mark(c, State.NEW if culprit_is_in(graph, culprit, c) else State.OLD)
        assert tests <= len(graph.order)
    return search, tests


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100])
def test_linear_finds_every_culprit_in_log2_steps(n: int) -> None:
    graph = linear(n)
    for k in range(1, n + 1):
        search, tests = run_bisection(graph, f"c{k}")
        result = outcome(search)
        assert result is not None and result.culprit == f"c{k}"
        assert tests <= math.ceil(math.log2(n)) if n > 1 else tests == 0


@pytest.mark.parametrize("seed", range(12))
def test_dags_with_merges_find_the_culprit(seed: int) -> None:
    graph = random_dag(60, merges=4, seed=seed)
    for culprit in graph.order[:: max(1, len(graph.order) // 15)]:
        search, tests = run_bisection(graph, culprit)
        result = outcome(search)
        assert result is not None and result.culprit == culprit
        assert tests <= math.ceil(math.log2(len(graph.order))) + 2


@pytest.mark.parametrize("seed", range(6))
def test_first_choice_halves_as_well_as_git(seed: int, tmp_path: Path) -> None:
    graph = random_dag(40, merges=3, seed=seed)
    hashes = as_git_repo(graph, tmp_path / "repo")
    out = subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path / "repo"),
            "rev-list",
            "--bisect-all",
            hashes[graph.order[0]],
            f"^{hashes['c0']}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    git_best = int(out[0].split("dist=")[1].rstrip(")"))
    search = Search(graph=graph, new=graph.order[0])
    (ours,) = next_commits(search)
    live = set(candidates(search))
    weight = len([c for c in live if culprit_is_in(graph, c, ours)])
    assert min(weight, len(live) - weight) == git_best


def test_skips_around_the_culprit_leave_the_smallest_set() -> None:
    graph = linear(32)
    search, _ = run_bisection(graph, "c20", skip=frozenset({"c19"}))
    result = outcome(search)
    assert result is not None and result.culprit is None
    assert sorted(result.candidates) == ["c19", "c20"]


def test_skip_after_the_culprit_does_not_hide_it() -> None:
    graph = linear(32)
    search, _ = run_bisection(graph, "c20", skip=frozenset({"c21"}))
    result = outcome(search)
    assert result is not None and result.culprit == "c20"


def test_no_commit_is_tested_twice() -> None:
    graph = random_dag(50, merges=3, seed=99)
    search = Search(graph=graph, new=graph.order[0])
    tested: list[str] = []
    while nxt := next_commits(search):
        tested.append(nxt[0])
        search.mark(nxt[0], State.SKIP if len(tested) % 3 == 0 else State.OLD)
    assert len(tested) == len(set(tested))


def test_several_slots_give_distinct_commits() -> None:
    search = Search(graph=linear(64), new="c64")
    picks = next_commits(search, slots=3)
    assert len(set(picks)) == 3 and picks[0] in ("c32", "c31", "c33")


def test_ancestry_is_fast_on_a_release_sized_history() -> None:
    graph = random_dag(15000, merges=300, seed=1)
    search = Search(graph=graph, new=graph.order[0])
    assert len(next_commits(search)) == 1


def test_of_the_commits_that_make_one_kernel_only_the_earliest_can_be_the_culprit() -> None:
    search = Search(graph=linear(12), new="c12")
    search.twin("c3", "c2")  # touches nothing compiled: its parent's kernel
    assert search.remade("c3") == ["c3"]
    search.twin("c11", "c10")
    search.twin("c10", "c12")  # built after the new end, byte-identical to it
    assert sorted(search.remade("c10")) == ["c11", "c12"]
    search.twin("c9", "c12")  # and an earlier one, later still
    assert sorted(search.remade("c9")) == ["c10", "c11", "c12"]
    search.twin("c1", "root")  # the kernel of a commit below the range
    assert search.remade("c1") == ["c1"]
