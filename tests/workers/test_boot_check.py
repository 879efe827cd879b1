"""A VM activity boots only the kernel that was built: a changed image is a host problem
(retried, the job waits), never a boot failure that would skip the commit."""

import hashlib
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from kbisect.backends import Progress
from kbisect.contract import ErrorType, TestRequest, TestStatus, TraceRequest
from kbisect.model import Artifact, Disk, GuestImage, GuestRun, Outcome
from kbisect.settings import Settings
from kbisect.workers.activities import VmActivities


class CountingMachine:
    name = "fake"
    host = "fake-host"
    pin: tuple[int, ...] = ()

    def __init__(self) -> None:
        self.boots = 0

    def run(
        self,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str = "",
        progress: Progress = lambda _: None,
    ) -> GuestRun:
        self.boots += 1
        return GuestRun(Outcome.PANIC, [], "/console", 1.0, "tcg", "Kernel panic")


def _artifact(tmp_path: Path) -> Artifact:
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel image")
    sha = hashlib.sha256(image.read_bytes()).hexdigest()
    return Artifact("c", "t", "h", str(image), "", "", image_sha256=sha)


def test_a_whole_kernel_boots(cache: Path, tmp_path: Path) -> None:
    machine = CountingMachine()
    acts = VmActivities(Settings(cache=cache, data=tmp_path / "data"), machine)
    req = TestRequest("r", "c" * 40, "nvme-snapshot-read", "fast", 2, _artifact(tmp_path))
    assert ActivityEnvironment().run(acts.run_test, req).status == TestStatus.BOOT_FAILED
    assert machine.boots == 1


@pytest.mark.parametrize("activity", ["run_test", "run_trace"])
def test_a_damaged_kernel_is_not_booted(cache: Path, tmp_path: Path, activity: str) -> None:
    machine = CountingMachine()
    acts = VmActivities(Settings(cache=cache, data=tmp_path / "data"), machine)
    art = _artifact(tmp_path)
    Path(art.kernel).write_bytes(b"\0" * 12)  # zeroed on disk after the build
    req = (
        TestRequest("r", "c" * 40, "nvme-snapshot-read", "fast", 2, art)
        if activity == "run_test"
        else TraceRequest("r", "c" * 40, "nvme-snapshot-read", "fast", art)
    )
    with pytest.raises(ApplicationError) as err:
        ActivityEnvironment().run(getattr(acts, activity), req)
    assert err.value.type == ErrorType.INFRA and not err.value.non_retryable
    assert "sha256" in str(err.value) and machine.boots == 0
