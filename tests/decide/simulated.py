"""Simulated jobs for the engines' tests: the truth is known here, never to the engine."""

import math
import random
from collections.abc import Callable
from typing import Any

from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.strategy import Graph
from kbisect.decide.terms import EngineConfig, EngineResult

MAX_BOOTS = 5000  # run()'s job, at most: past it the engine is looping


def linear(n: int) -> Graph:
    return Graph(
        parents={f"c{i}": ((f"c{i - 1}",) if i > 1 else ()) for i in range(1, n + 1)},
        order=tuple(f"c{i}" for i in range(n, 0, -1)),
    )


def index(commit: str) -> int:
    return 0 if commit == "root" else int(commit[1:])


def step_at(culprit: int, step: float) -> Callable[[str], float]:
    return lambda c: 100.0 * (1 - step if index(c) >= culprit else 1.0)


def run(
    n: int,
    value: Callable[[str], float],
    cv: float = 0.0,
    seed: int = 1,
    failing: frozenset[str] = frozenset(),
    kind: Callable[..., Any] = Engine,
    load: Callable[[int], float] = lambda n: 1.0,
    config: Callable[..., EngineConfig] = EngineConfig,
    hangs_after: int = 0,
    within: int = MAX_BOOTS,
    **cfg: object,
) -> tuple[EngineResult, Any, list[str]]:
    """Boot what the engine wants; return the result, the engine and the boot order.
    `load` is the host's speed at each boot of the job; `hangs_after`: a probe's boots
    after this many fail (0: never). A job that does not end `within` boots fails."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(cv * cv) / 2)  # half the variance between boots
    engine = kind(linear(n), new=f"c{n}", old=["root"], config=config(**cfg))
    booted: list[str] = []
    while commits := engine.wants():
        assert len(booted) < within, f"the job does not end in {within} boots"
        for c in commits:
            booted.append(c)
            again = hangs_after and booted.count(c) > hangs_after and c not in ("root", f"c{n}")
            if c in failing or again:
                engine.observe(c, None)
                continue
            b = value(c) * load(len(booted)) * math.exp(rng.gauss(0, sigma))
            engine.observe(c, Boot([b * math.exp(rng.gauss(0, sigma)) for _ in range(3)]))
    return engine.result(), engine, booted
