"""Fix mode for real: a lab whose old end is broken (the seed's nomerges bug) and a later
commit fixes it. kbisect names that commit, and its backport onto the old end, built and
booted, behaves like the fixed end. (The chain test's fix needs a prerequisite, so its
plain backport onto the old end does not apply: this is the one that does.)

The lab is the SRU patch test's, the same every run: its kernels come from the e2e cache
after the first run. The culprit's place is random in the shared lab's tests; fix mode's
search is the same engine, tested on random places in tests/workflows."""

import json
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import create_lab
from tests.e2e.service import FIX_LAB, SEED, bisect_on_own_service

pytestmark = pytest.mark.e2e


def test_fix_mode_names_the_fix_and_its_backport_behaves_fixed(tmp_path: Path) -> None:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    lab = tmp_path / "lab"
    truth = create_lab(lab, FIX_LAB)
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad", "--mode", "fix"]
    args += ["--testcase", SEED, "--repetitions", "1"]
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
