"""A build fix carried through a range for real: a lab whose culprit sits in a span of
commits that do not build (a later commit fixes the build). `bisect --fixup` with that fix
builds the span's commits with it and names the culprit itself, where a bisection without
it can only name the span's candidates (tests/workflows covers that side). The lab is the
same every run: its kernels come from the e2e cache after the first."""

import json
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.lab_plan import Span
from tests.e2e.service import SEED, bisect_on_own_service

pytestmark = pytest.mark.e2e

# the culprit at 4, in the span 3 to 5 that does not build; commit 6 fixes the build
FIXUP_LAB = LabOptions(commits=8, culprit_at=4, seed=11, broken_build=(Span(3, 3),))


def test_a_build_fix_carried_through_the_span_names_the_culprit_in_it(tmp_path: Path) -> None:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    lab = tmp_path / "lab"
    truth = create_lab(lab, FIXUP_LAB)
    history = [str(c["hash"]) for c in truth["history"]]  # type: ignore[attr-defined]
    broken = list(truth["broken_build"])  # type: ignore[call-overload]
    assert truth["culprit"] in broken
    fix = tmp_path / "build-fix.diff"
    fix.write_bytes(Git(lab).patch(history[history.index(broken[-1]) + 1]))
    args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    args += ["--testcase", SEED, "--repetitions", "1", "--fixup", str(fix)]
    proc = bisect_on_own_service(tmp_path, args, timeout=1700)
    result = json.loads(proc.stdout)
    assert (result["status"], result["culprit"]) == ("found", truth["culprit"]), result["message"]
    built = {s["commit"]: s["fixups"] for s in result["steps"] if s["source"] == "test"}
    assert built[truth["culprit"]] == ["build-fix.diff"], built
    assert all(f == (["build-fix.diff"] if c in broken else []) for c, f in built.items()), built
    # the culprit reverted on lab-bad (after the span: no fixup there) reads as lab-good
    assert result["verification"]["status"] == "confirmed", result["verification"]
