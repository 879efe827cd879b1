"""Bad input: one clear line on stderr, a distinct exit code, nothing built."""

from pathlib import Path

import pytest

from kbisect.cli import main
from kbisect.infra.lab import LabOptions, create_lab
from tests.conftest import git


@pytest.fixture
def lab(tmp_path: Path, tiny_tarball: Path) -> Path:
    create_lab(tmp_path / "lab", LabOptions(commits=4, seed=1))
    return tmp_path / "lab"


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith("kbisect: error: ")
    return err


@pytest.mark.parametrize("rev", ["no-such-branch", "deadbeef" * 5, "--output=/tmp/x", "HEAD~99"])
def test_unknown_revision(
    lab: Path, cache: Path, rev: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["try", "--repo", str(lab), "--testcase", "nvme-snapshot-read", "--", rev])
    assert code == 2
    assert "revision" in _error_line(capsys)
    assert not (cache / "artifacts").exists()


def test_unknown_testcase(lab: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["try", "--repo", str(lab), "HEAD", "--testcase", "nvme-snapshot"])
    assert code == 2
    assert "unknown testcase 'nvme-snapshot'" in _error_line(capsys)


def test_malformed_manifest(
    lab: Path,
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "tc" / "broken"
    folder.mkdir(parents=True)
    (folder / "manifest.toml").write_text('name = "broken"\nprimary = "x"\n')
    monkeypatch.setenv("KBISECT_TESTCASES", str(tmp_path / "tc"))
    assert main(["try", "--repo", str(lab), "HEAD", "--testcase", "broken"]) == 2
    assert "missing required field 'metrics'" in _error_line(capsys)


def test_unknown_profile(lab: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["try", "--repo", str(lab), "HEAD", "--testcase", "nvme-snapshot-read"]
    assert main([*args, "--profile", "floppy"]) == 2
    assert "ebs-gp2" in _error_line(capsys)


def test_not_a_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["try", "--repo", str(tmp_path), "HEAD", "--testcase", "nvme-snapshot-read"]
    assert main(args) == 2
    assert "not a git repository" in _error_line(capsys)


def test_lab_create_bad_span(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "create", str(tmp_path / "l"), "--broken-build", "x"]) == 2
    assert "bad breakage" in _error_line(capsys)
    assert not (tmp_path / "l").exists()


def test_lab_create_prints_where_the_truth_is(
    tmp_path: Path, tiny_tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "create", str(tmp_path / "l"), "--commits", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "l.truth.json" in out
    assert git(tmp_path / "l", "rev-list", "--count", "HEAD").strip() == "6"


def test_parallel_must_be_positive(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bisect", "--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
    code = main([*args, "--testcase", "nvme-snapshot-read", "--parallel", "0", "--no-start"])
    assert code == 2
    assert "--parallel" in _error_line(capsys)
