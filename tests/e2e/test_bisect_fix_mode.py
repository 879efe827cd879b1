"""Fix mode for real: a lab whose old end is broken (the seed's nomerges bug) and a later
commit fixes it. kbisect names that commit, and its backport onto the old end, built and
booted, behaves like the fixed end."""

import json
import os
import random
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import LabOptions, create_lab
from tests.e2e.service import bisect_on_own_service

pytestmark = pytest.mark.e2e


def test_fix_mode_names_the_fix_and_its_backport_behaves_fixed(tmp_path: Path) -> None:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    seed = int(os.environ.get("KBISECT_E2E_SEED", random.SystemRandom().randrange(2**31)))
    print(f"fix lab seed {seed}")
    lab = tmp_path / "lab"
    culprit_at = random.Random(seed).randrange(3, 11)
    truth = create_lab(lab, LabOptions(commits=12, mode="fix", culprit_at=culprit_at, seed=seed))
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad", "--mode", "fix"]
    args += ["--testcase", "nvme-snapshot-read", "--repetitions", "1"]
    proc = bisect_on_own_service(tmp_path, args, timeout=1700)
    result = json.loads(proc.stdout)
    assert (result["mode"], result["status"]) == ("fix", "found"), result["message"]
    assert result["culprit"] == truth["culprit"], result["message"]
    # In fix mode the old end is the bad one and the new end the good one.
    ends = {s["commit"]: s["verdict"] for s in result["steps"] if s["source"] == "endpoint"}
    assert ends == {truth["old"]: "bad", truth["new"]: "good"}, ends
    v = result["verification"]
    assert (v["kind"], v["change"], v["onto"]) == ("backport", truth["culprit"], truth["old"])
    assert v["status"] == "confirmed", v
