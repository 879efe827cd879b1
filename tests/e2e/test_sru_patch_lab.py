"""The SRU patch of a finished fix-mode job on a real lab (Debian's linux-source-6.1): what
`git am` applies on the old endpoint in a clean clone, and what the tree's own
checkpatch.pl says of it. No kernel is built: the job's data is made as the workflow
records it (tests/kbisect/test_sru_patch.py: finished_fix_job_sru).

checkpatch finds nothing, run by kbisect (with --ignore GIT_COMMIT_ID, for the
'(cherry picked from commit X)' line the Ubuntu SRU format requires) or by hand with every
rule: the lab's fix carries its author's Signed-off-by, as an upstream commit does. Any
error or warning fails this test."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import create_lab
from tests.e2e.service import FIX_LAB
from tests.kbisect.test_sru_patch import finished_fix_job_sru, git_am_on_old_endpoint

pytestmark = pytest.mark.e2e


def test_fix_lab_sru_patch_applies_and_checkpatch_finds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    if shutil.which("perl") is None:
        pytest.fail("perl is missing: checkpatch.pl needs it (infra/install.sh installs it)")
    lab = tmp_path / "lab"
    truth = create_lab(lab, FIX_LAB)
    out = tmp_path / "sru"
    files, err = finished_fix_job_sru(lab, truth, out, monkeypatch, capsys)
    (summary,) = [line for line in err.splitlines() if "checkpatch: " in line]
    print(summary)
    assert re.fullmatch(
        r"checkpatch: total: 0 errors, 0 warnings, \d+ lines checked \(GIT_COMMIT_ID ignored: "
        r"the SRU provenance line '\(cherry picked from commit X\)' is Ubuntu's required form\)",
        summary,
    ), err
    assert "checkpatch's" not in err, err  # no error to explain
    git_am_on_old_endpoint(lab, str(truth["old"]), files, tmp_path / "clone")

    # checkpatch by hand in the clean clone, as a sender runs it, with no rule ignored:
    # nothing either. It checks the commit log only up to the first Signed-off-by, the
    # author's, which comes before the provenance line, as upstream's does.
    run = subprocess.run(
        ["perl", "scripts/checkpatch.pl", "--no-color", "--show-types", str(files[1])],
        cwd=tmp_path / "clone",
        capture_output=True,
        text=True,
    )
    assert re.search(r"^total: 0 errors, 0 warnings, \d+ lines checked$", run.stdout, re.M), (
        run.stdout + run.stderr
    )
    assert not re.findall(r"^(ERROR|WARNING|CHECK):", run.stdout, re.M), run.stdout
