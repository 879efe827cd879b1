"""`kbisect backport` for real, in the seed's shape: a distro branch forked from a fix-mode
lab's old endpoint, whose fix needs an earlier upstream refactor. The backport must
propose that prerequisite and the fix, build the distro tip without and with them, boot
both in QEMU and call it verified; a branch that already carries the fix under another
hash builds nothing."""

import json
import subprocess
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import LabOptions, create_lab
from tests.e2e.service import on_own_service

pytestmark = pytest.mark.e2e


def _with_fix_picked(lab: Path, truth: dict[str, object], tmp_path: Path) -> str:
    """The distro tip with the prerequisite and the fix cherry-picked as stable does."""
    tip, fix, prereq = truth["distro"]["tip"], truth["culprit"], truth["prerequisite"]  # type: ignore[index]
    wt = tmp_path / "wt"
    who = ["-c", "user.name=Stable", "-c", "user.email=stable@example.org"]
    subprocess.run(["git", "-C", str(lab), "worktree", "add", "-q", "-b", "fixed", str(wt), tip],
                   check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(wt), *who, "cherry-pick", str(prereq), str(fix)],
                   check=True, capture_output=True)  # fmt: skip
    message = f"NVMe: Allow request merges\n\ncommit {fix} upstream.\n"
    subprocess.run(["git", "-C", str(wt), *who, "commit", "-q", "--amend", "-m", message],
                   check=True)  # fmt: skip
    return "fixed"


def test_backport_proposes_the_prerequisite_and_verifies_the_fix_on_the_distro_tip(
    tmp_path: Path,
) -> None:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    lab = tmp_path / "lab"
    truth = create_lab(
        lab, LabOptions(commits=6, mode="fix", culprit_at=4, seed=62, distro=3,
                        fix_needs_prereq=True),
    )  # fmt: skip
    fix, prereq = str(truth["culprit"]), str(truth["prerequisite"])
    by_hand = ["backport", "--repo", str(lab), "--change", fix,
               "--testcase", "nvme-snapshot-read"]  # fmt: skip
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
    proc = on_own_service(tmp_path / "one", [*by_hand, "--target", "lab-distro"], timeout=1700)
    result = json.loads(proc.stdout)
    print(result["message"])  # the figures, in the log
    assert result["word"] == "verified", result["message"]
    assert result["plan"]["series"] == [prereq, fix] and result["plan"]["prerequisites"] == [prereq]
    assert result["pair"]["effect"] > 10  # avg_read_sectors: 8 -> 512 with the series
    boots = [line for line in proc.stderr.splitlines() if line.startswith("boot ")]
    assert boots and boots[0].startswith("boot 1: "), proc.stderr[-2000:]
    assert Path(result["kernels"]["with"]).is_file()  # the test kernel, kept

    fixed = _with_fix_picked(lab, truth, tmp_path)
    proc = on_own_service(tmp_path / "two", [*by_hand, "--target", fixed], timeout=600)
    again = json.loads(proc.stdout)
    assert again["word"] == "already there" and again["plan"]["found_how"] == "provenance line"
    assert again["pair"] is None and again["boots"] == []  # nothing built, nothing booted
