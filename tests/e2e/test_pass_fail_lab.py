"""Pass/fail bisections for real: lab kernels that panic at boot or whose NVMe reads fail,
built and booted in QEMU, both with `disk-read` (a panic is a bad boot of any pass/fail
testcase: `boots` runs no differently, on a kernel config of its own the suite does not
build). As `git bisect run`: one boot a tested commit, then the revert boots once more."""

import json
import random
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.lab_culprits import Culprit
from kbisect.infra.lab_plan import Span
from tests.e2e.service import bisect_on_own_service, lab_seed

pytestmark = pytest.mark.e2e
SIGNATURE = "is missing from the initramfs"  # the panic culprit's message


def _lab(tmp_path: Path, options: LabOptions) -> dict[str, object]:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    return create_lab(tmp_path / "lab", options)


def _bisect(tmp_path: Path, testcase: str, *extra: str) -> dict[str, object]:
    args = ["--repo", str(tmp_path / "lab"), "--good", "lab-good", "--bad", "lab-bad"]
    proc = bisect_on_own_service(tmp_path, [*args, "--testcase", testcase, *extra], 1700)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _tested(result: dict[str, object]) -> list[dict[str, object]]:
    return [s for s in result["steps"] if s["source"] == "test"]  # type: ignore[attr-defined,index]


def test_a_kernel_that_panics_at_boot_is_found_past_another_panic(tmp_path: Path) -> None:
    seed = lab_seed("panic")
    # Another panic (a broken-boot range, commits 3-10 of 16) sits where the search looks
    # first: with the culprit's signature those boots are skips, not bad ones.
    culprit_at = random.Random(seed).randrange(12, 16)
    truth = _lab(
        tmp_path,
        LabOptions(
            commits=16,
            culprit_at=culprit_at,
            seed=seed,
            culprit=Culprit.parse("panic"),
            broken_boot=(Span(3, 8),),
        ),
    )
    result = _bisect(tmp_path, "disk-read", "--signature", SIGNATURE)
    assert (result["status"], result["culprit"]) == ("found", truth["culprit"]), result["message"]
    assert result["pass_fail"]
    tested = _tested(result)
    assert tested and all(s["boots"] == 1 for s in tested), tested
    broken = set(truth["broken_boot"])  # type: ignore[call-overload]
    steps = result["steps"]
    failed = [s for s in steps if s["source"] == "boot-failed"]  # type: ignore[attr-defined]
    # the broken range's panic was booted and skipped, never taken for the culprit's
    assert failed and all(s["commit"] in broken and s["verdict"] == "skip" for s in failed)
    assert not [s for s in steps if s["commit"] in broken and s["verdict"] == "bad"]  # type: ignore[attr-defined]
    v = result["verification"]
    assert (v["status"], v["boots"]) == ("confirmed", 1), v  # type: ignore[index]
    bad = result["bad_boot"]
    # the culprit's own boot, or, when its image is byte-identical to a commit booted
    # before it (it was never booted), that commit's
    (named,) = [s for s in steps if s["commit"] == truth["culprit"]]  # type: ignore[index]
    if named["source"] == "test":
        assert bad["commit"] == truth["culprit"], (bad, named)  # type: ignore[index]
    else:  # its note: "...: the verdict of <id>"
        assert bad["commit"][:12] in named["note"], (bad, named)  # type: ignore[index]
    assert bad["bad"] == "panic", bad  # type: ignore[index]
    assert f"Kernel panic - not syncing: init: /init {SIGNATURE}" in bad["excerpt"]  # type: ignore[index]


def test_a_kernel_whose_reads_fail_is_found(tmp_path: Path) -> None:
    seed = lab_seed("fails")
    culprit_at = random.Random(seed).randrange(2, 16)
    truth = _lab(
        tmp_path,
        LabOptions(commits=16, culprit_at=culprit_at, seed=seed, culprit=Culprit.parse("fails")),
    )
    result = _bisect(tmp_path, "disk-read")
    assert (result["status"], result["culprit"]) == ("found", truth["culprit"]), result["message"]
    tested = _tested(result)
    assert all(s["boots"] == 1 for s in tested), tested
    assert result["verification"]["status"] == "confirmed"  # type: ignore[index]
    bad = result["bad_boot"]
    assert bad["bad"] == "fails" and "Input/output error" in bad["excerpt"], bad  # type: ignore[index]
