"""A killed worker leaves no make running, and no slot that an orphan still writes is
handed to another build."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.builders.kernel_build import _free_slot
from tests.builders.test_kernel_build import MAKEFILE, _commit, tree

__all__ = ["tree"]  # the fixture, shared

# bzImage: record make's pid, then a recipe process that outlives make (a compiler, say).
ORPHANING = MAKEFILE.replace(
    "\techo built",
    "\techo $$PPID > $(O)/../make-pid\n"
    "\techo $$$$ > $(O)/../child-pid; exec sleep 30\n"
    "\techo built",
)
WORKER = """
import sys
from pathlib import Path
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.model import BuildSpec
KernelBuilder().build(Path(sys.argv[1]), sys.argv[2], BuildSpec(fragments=()))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(path: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear")


@pytest.fixture
def killed_worker(tree: tuple[Path, dict[str, str]], cache: Path) -> Iterator[tuple[int, int]]:
    """A worker SIGKILLed mid-build: (make's pid, the pid of make's child)."""
    repo, _ = tree
    commit = _commit(repo, {"Makefile": ORPHANING}, "orphaning build")
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(repo), commit])
    make = child = 0
    try:
        slot = cache / "slots" / _slot_name(cache, 20)
        child = _wait_for(slot / "child-pid", 20)
        make = int((slot / "make-pid").read_text())
        worker.kill()
        worker.wait()
        yield make, child
    finally:
        worker.kill()
        worker.wait()
        for pid in (make, child):  # whatever the test did not see die
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _slot_name(cache: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(cache.glob("slots/*-0"))
        if found:
            return found[0].name
        time.sleep(0.1)
    raise AssertionError("no slot was made")


def test_make_dies_with_its_worker(killed_worker: tuple[int, int]) -> None:
    make, _ = killed_worker
    deadline = time.monotonic() + 5
    while _alive(make) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(make)


def test_a_slot_an_orphan_still_writes_is_not_handed_out(
    tree: tuple[Path, dict[str, str]], killed_worker: tuple[int, int]
) -> None:
    repo, _ = tree
    _, child = killed_worker
    assert _alive(child)  # the orphan: outlived the worker (and make)
    with _free_slot(repo) as slot:
        assert slot.index != 0
    os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    with _free_slot(repo) as slot:
        assert slot.index == 0  # free again once the last holder is gone
