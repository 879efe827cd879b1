"""Two guests at one moment on one host (a duet): each on its own half of the reserved
CPUs, so what the host does meanwhile (a load, a frequency change, a noisy neighbour)
reaches both alike and their difference keeps little of it."""

import concurrent.futures
import copy
from collections.abc import Callable, Sequence
from typing import TypeVar

from kbisect.backends import Machine
from kbisect.infra import host_lock

T = TypeVar("T")


def pinned_pair(machine: Machine) -> list[Machine]:
    """Two copies of `machine`, each pinned to half of its reserved CPUs; a UserError
    (before anything boots) when they cannot hold two of its guests."""
    pair = []
    for half in host_lock.duet_halves(machine.pin, machine.cpus):
        one = copy.copy(machine)
        one.pin = half
        pair.append(one)
    return pair


def at_once(
    machine: Machine,
    pair: Sequence[Machine],
    runs: Sequence[Callable[[Machine], T]],
    progress: Callable[[str], None] = lambda _: None,
) -> list[T]:
    """Each run on its machine of `pair`, all started together while this holds
    `machine`'s reserved CPUs; their results in order. A run holds no lock of its own
    (runner.run_testcase(held=True)): the pair's lock is this one."""
    with host_lock.for_guest(True, machine.pin, progress):
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(runs)) as pool:
            futures = [pool.submit(run, m) for run, m in zip(runs, pair, strict=True)]
            return [f.result() for f in futures]
