"""Commit DAGs for strategy tests and benchmarks: random and linear histories, as plain data,
as a real git repository, and as the validate activity returns them."""

import hashlib
import random
import subprocess
from pathlib import Path

from kbisect.contract import ValidatedJob
from kbisect.decide.strategy import Graph


def random_dag(n: int, merges: int, seed: int) -> Graph:
    """n commits c1..cn over a root c0 (the old endpoint, outside the graph)."""
    rng = random.Random(seed)
    parents: dict[str, tuple[str, ...]] = {}
    tips = ["c0"]
    order: list[str] = []
    merge_at = set(rng.sample(range(3, n + 1), merges)) if merges else set()
    for i in range(1, n + 1):
        c = f"c{i}"
        if i in merge_at and len(tips) > 1:
            a, b = tips[0], tips[1]
            parents[c] = (a, b)
            tips = [c, *tips[2:]]
        elif rng.random() < 0.15:
            parents[c] = (rng.choice(order[-5:] or ["c0"]),)  # start a side branch
            tips.append(c)
        else:
            k = rng.randrange(len(tips))
            parents[c] = (tips[k],)
            tips[k] = c
        order.append(c)
    # Merge what is left so one commit (the new endpoint) has everything.
    while len(tips) > 1:
        c = f"c{len(order) + 1}"
        parents[c] = (tips[0], tips[1])
        tips = [c, *tips[2:]]
        order.append(c)
    inside = {c: tuple(p for p in ps if p != "c0") for c, ps in parents.items()}
    return Graph(parents=inside, order=tuple(reversed(order)))


def hex_names(graph: Graph) -> Graph:
    """The same DAG with full-length hashes for names, as a real range has."""
    name = {c: hashlib.sha1(c.encode()).hexdigest() for c in graph.order}
    return Graph(
        parents={name[c]: tuple(name[p] for p in ps) for c, ps in graph.parents.items()},
        order=tuple(name[c] for c in graph.order),
    )


def culprit_is_in(graph: Graph, culprit: str, commit: str) -> bool:
    return graph.ancestry[commit] >> graph.order.index(culprit) & 1 == 1


def as_git_repo(graph: Graph, path: Path) -> dict[str, str]:
    """Write the DAG as empty-tree commits; returns name -> hash (c0 included)."""
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_AUTHOR_DATE": "1700000000 +0000",
        "GIT_COMMITTER_DATE": "1700000000 +0000",
    }
    tree = (
        subprocess.run(
            ["git", "-C", str(path), "hash-object", "-t", "tree", "-w", "--stdin"],
            input=b"",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    hashes: dict[str, str] = {}

    def commit(name: str, parents: tuple[str, ...]) -> None:
        args = ["git", "-C", str(path), "commit-tree", tree, "-m", name]
        for p in parents:
            args += ["-p", hashes[p]]
        hashes[name] = (
            subprocess.run(args, capture_output=True, check=True, env=env).stdout.decode().strip()
        )

    commit("c0", ())
    for c in reversed(graph.order):
        commit(c, graph.parents[c] or ("c0",))
    return hashes


def linear(n: int) -> Graph:
    return Graph(
        parents={f"c{i}": ((f"c{i - 1}",) if i > 1 else ()) for i in range(1, n + 1)},
        order=tuple(f"c{i}" for i in range(n, 0, -1)),
    )


def validated_job(graph: Graph, subjects: dict[str, str], old: str) -> ValidatedJob:
    """What the validate activity returns for this range (in its compact form)."""
    index = {c: i for i, c in enumerate(graph.order)}
    return ValidatedJob(
        old=[old],
        new=graph.order[0],
        order=list(graph.order),
        parent_index=[[index[p] for p in graph.parents[c]] for c in graph.order],
        subjects=subjects,
        testcase="nvme-snapshot-read",
        primary="avg_read_sectors",
        unit="sectors",
        better="higher",
        profile="fast",
        repetitions=3,
        test_timeout=60,
    )
