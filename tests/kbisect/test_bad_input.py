"""Bad input a user can type is one `kbisect: error:` line (exit 2), never a traceback,
and never accepted silently; the cache `tree add` makes first is private."""

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect import settings
from kbisect.errors import UserError
from kbisect.main import main
from tests.conftest import git


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("KBISECT_TESTCASES", raising=False)
    monkeypatch.delenv("KBISECT_JOBS", raising=False)
    old = os.umask(0o022)  # a folder made without care is 0755
    yield
    os.umask(old)


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("kbisect: error: ") and err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize("value", ["²", "١٢", "3²", "9" * 5000])
def test_jobs_in_other_digits_is_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KBISECT_JOBS", value)
    assert main(["testcases"]) == 2
    assert "KBISECT_JOBS=" in _one_error(capsys)


def test_jobs_in_ascii_digits_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_JOBS", " 12 ")
    assert settings.build_jobs() == 12


@pytest.mark.parametrize("variable", ["KBISECT_DATA", "KBISECT_CACHE"])
@pytest.mark.parametrize("below", ["", "sub"])
def test_a_data_or_cache_folder_that_is_a_file_is_one_line(
    variable: str, below: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv(variable, str(afile / below))
    s = settings.Settings.from_env()
    with pytest.raises(UserError, match=f"{afile}.*: .*{variable}") as err:
        s.data_dir() if variable == "KBISECT_DATA" else s.cache_dir()
    assert "\n" not in str(err.value)


def test_testcase_new_with_data_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("KBISECT_DATA", str(tmp_path / "afile"))
    assert main(["testcase", "new", "mine"]) == 2
    assert "afile" in _one_error(capsys)


@pytest.mark.parametrize("where", ["/proc/kbisect-none", "afile", "afile/below"])
def test_testcase_new_where_no_folder_can_be_is_one_line(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("")
    target = where if where.startswith("/") else str(tmp_path / where)
    assert main(["testcase", "new", "mine", "--dir", target]) == 2
    assert "--dir" in _one_error(capsys)
    assert (tmp_path / "afile").read_text() == ""


def test_testcase_new_still_writes_into_a_new_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["testcase", "new", "mine", "--dir", str(tmp_path / "new" / "tcs")]) == 0
    assert (tmp_path / "new" / "tcs" / "mine" / "manifest.toml").is_file()


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-0.5"])
def test_gc_age_must_be_a_finite_number_of_days(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gc", f"--older-than={value}", "--dry-run"]) == 2
    assert _one_error(capsys).startswith("kbisect: error: --older-than ")


def test_gc_age_zero_is_fine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc", "--older-than", "0", "--dry-run"]) == 0


def test_tree_add_first_makes_a_private_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    (upstream / "a").write_text("a\n")
    git(upstream, "add", "a")
    git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    cache = settings.Settings.from_env().cache  # the test's own (tests/conftest.py)
    assert not cache.exists()
    assert main(["tree", "add", "lab", f"file://{upstream}"]) == 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert (cache / "trees" / "lab.git" / "HEAD").is_file()
