"""The SRU patch of a finished fix-mode job on a real lab (Debian's linux-source-6.1): what
`git am` applies on the old endpoint in a clean clone, and what the tree's own
checkpatch.pl says of it. No kernel is built: the job's data is made as the workflow
records it (tests/kbisect/test_sru_patch.py: finished_fix_job_sru).

checkpatch finds two errors, both of the format and the lab rather than the change: its
GIT_COMMIT_ID rule flags the '(cherry picked from commit X)' line the kernel team's SRU
format requires, and the lab's fix has no Signed-off-by of its author (NO_AUTHOR_SIGN_OFF).
kbisect explains both; any other error or warning fails this test."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.infra.lab import LabOptions, create_lab
from tests.kbisect.test_sru_patch import finished_fix_job_sru, git_am_on_old_endpoint

pytestmark = pytest.mark.e2e
FORMAT_AND_LAB = ["GIT_COMMIT_ID", "NO_AUTHOR_SIGN_OFF"]


def test_fix_lab_sru_patch_applies_and_checkpatch_finds_only_what_the_format_brings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not settings.KERNEL_SOURCE_TARBALL.exists():
        pytest.fail(f"{settings.KERNEL_SOURCE_TARBALL} missing: run infra/install.sh")
    if shutil.which("perl") is None:
        pytest.fail("perl is missing: checkpatch.pl needs it (infra/install.sh installs it)")
    lab = tmp_path / "lab"
    truth = create_lab(lab, LabOptions(commits=8, mode="fix", culprit_at=4, seed=11))
    out = tmp_path / "sru"
    files, err = finished_fix_job_sru(lab, truth, out, monkeypatch, capsys)
    (summary,) = [line for line in err.splitlines() if "checkpatch: " in line]
    assert re.search(r"total: 2 errors, 0 warnings, \d+ lines checked", summary), err
    assert "GIT_COMMIT_ID error is on the provenance line" in err
    assert "NO_AUTHOR_SIGN_OFF error: the original commit has no Signed-off-by" in err
    git_am_on_old_endpoint(lab, str(truth["old"]), files, tmp_path / "clone")

    # checkpatch by hand in the clean clone, as a sender runs it: the same two, nothing else.
    run = subprocess.run(
        ["perl", "scripts/checkpatch.pl", "--no-color", "--show-types", str(files[1])],
        cwd=tmp_path / "clone",
        capture_output=True,
        text=True,
    )
    found = re.findall(r"^(ERROR|WARNING|CHECK):([A-Z_]+):", run.stdout, re.M)
    assert sorted(t for _, t in found) == FORMAT_AND_LAB, run.stdout
    assert [k for k, _ in found] == ["ERROR", "ERROR"], run.stdout
