"""A real lab from Debian's linux-source-6.1, shared by the end-to-end tests of a run (by
both of the tier's xdist workers), and a whole host for the tests whose guests do not go
through the host lock."""

import fcntl
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra import host_lock
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.lab_plan import Span
from tests.e2e.service import lab_seed, write_seed


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this run: under xdist, the one its workers' own folders are in."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def real_lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """Made once a run: one lab, so the workers share its build slots and kernels (two labs
    would build each kernel twice on a fresh machine)."""
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    root = _run_folder(tmp_path_factory) / "e2e"
    root.mkdir(exist_ok=True)
    dest, made = root / "lab", root / "lab.made"
    with open(root / "lab.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits while one makes it
        if not made.exists():
            seed = lab_seed("e2e")
            rng = random.Random(seed)
            culprit_at = rng.randrange(4, 12)
            options = LabOptions(
                commits=16,
                culprit_at=culprit_at,
                seed=seed,
                broken_build=(Span(2),),
                broken_boot=(Span(14),),
            )
            create_lab(dest, options)
            made.touch()
    truth = json.loads((dest.parent / "lab.truth.json").read_text())
    return dest, truth


@pytest.fixture(scope="session")
def _testcases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this worker's with the seed's testcase as the tests run it (SEED)."""
    root = tmp_path_factory.mktemp("testcases")
    write_seed(root)
    return root


@pytest.fixture(autouse=True)
def _seed_testcase(_testcases: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SEED is found by every command and service a test starts."""
    monkeypatch.setenv("KBISECT_TESTCASES", str(_testcases))


@pytest.fixture(autouse=True)
def _lab_kernels(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Tests of the real lab share its kernels; one marked `lab_kernels_alone` (the README
    job, which uncaches its kernels to build them for real and kill a build) has them to
    itself, so the other worker never builds them back under it. Taken before any other
    lock, so it closes no cycle."""
    if "real_lab" not in request.fixturenames:
        yield
        return
    alone = request.node.get_closest_marker("lab_kernels_alone") is not None
    with open(_run_folder(tmp_path_factory) / "lab-kernels.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield


@pytest.fixture
def whole_host() -> Iterator[None]:
    """The host to this test alone, as a timed guest has it: for a test whose own workers
    keep host locks of their own (hosts that share no files) or boot no real guest but
    load every core (the soak), so the other worker's guests are never timed beside it."""
    with host_lock.for_guest(exclusive=True):
        yield
