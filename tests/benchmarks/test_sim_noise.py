"""Simulated hosts: boot-to-boot correlation as the kind says, the noise's size kept; a host
that falls steadily over a stretch, then holds."""

import math
import random
import statistics

import pytest

from benchmarks.accuracy import Machine, history
from benchmarks.sim_noise import Noise


def _log_scores(kind: str, boots: int = 20000) -> list[float]:
    """One commit booted over and over by the grid's own simulated machine (no culprit)."""
    graph = history(64)
    bit = {c: i for i, c in enumerate(graph.order)}
    machine = Machine(graph, bit, [], Noise(0.15, kind), 0.0, random.Random(7))
    return [math.log(statistics.fmean(machine(graph.order[0]))) for _ in range(boots)]


def test_a_swinging_host_correlates_neighbouring_boots_and_keeps_the_noise_size() -> None:
    steady, swinging = _log_scores("lognormal"), _log_scores("swing:0.7")
    assert abs(statistics.correlation(steady[:-1], steady[1:])) < 0.03
    # The between-boot half carries 0.7; a boot's mean keeps a third of the within-boot
    # half (3 repetitions), which does not swing: 0.7 / (1 + 1/3) = 0.525.
    assert 0.48 < statistics.correlation(swinging[:-1], swinging[1:]) < 0.57
    assert statistics.pstdev(swinging) == pytest.approx(statistics.pstdev(steady), rel=0.05)


def test_a_falling_host_slows_steadily_then_holds() -> None:
    quiet = Noise(0.0, "fall:40")  # no noise: the host's speed alone

    def speed(clock: int) -> float:
        return quiet.boot(100.0, random.Random(1), clock)[0] / 100.0

    assert speed(1) == speed(20) == 1.0
    assert speed(50) == pytest.approx(0.8)  # halfway through the fall
    assert speed(80) == speed(400) == pytest.approx(0.6)


def test_a_burst_with_edges_reads_halfway_just_before_and_after_it() -> None:
    quiet = Noise(0.0, "burst-edges")

    def speed(clock: int) -> float:
        return quiet.boot(100.0, random.Random(1), clock)[0] / 100.0

    assert speed(1) == speed(7) == 1.0
    assert 1 / 1.3 <= speed(2) <= 1 / 1.15 and 1 / 1.3 <= speed(6) <= 1 / 1.15
    assert all(speed(c) <= 1 / 3 for c in (3, 4, 5))  # the burst itself
    assert Noise(0.0, "burst").boot(100.0, random.Random(1), 2) == [100.0] * 3


def test_a_mimic_reads_two_boots_as_slow_as_a_step() -> None:
    quiet = Noise(0.0, "mimic")

    def speed(clock: int) -> float:
        return quiet.boot(100.0, random.Random(1), clock)[0] / 100.0

    assert speed(8) == speed(11) == 1.0
    assert all(1 / 1.4 <= speed(c) <= 1 / 1.3 for c in (9, 10))
