"""`kbisect gc` and `kbisect testcases` through the CLI."""

import json
import os
import time
from pathlib import Path

import pytest

from kbisect.main import main


def test_gc_removes_old_runs_and_keeps_new_ones(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = (
        cache / "runs" / "20250101-000000-aaaaaaaa",
        cache / "runs" / "20991231-000000-bbbbbbbb",
    )
    for run in (old, new):
        run.mkdir(parents=True)
        (run / "console.log").write_text("x" * 4096)
    past = time.time() - 30 * 86400
    os.utime(old / "console.log", (past, past))
    os.utime(old, (past, past))
    assert main(["gc", "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] and {"kind": "run", "what": str(old)} in report["removed"]
    assert old.exists()  # a dry run removes nothing
    assert main(["gc"]) == 0
    assert f"removed run {old}" in capsys.readouterr().out
    assert not old.exists() and new.exists()


def test_gc_lists_guest_images_and_configs_it_removes(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = cache / "images" / "0123456789abcdef01234567.cpio"
    config = cache / "configs" / "0123456789abcdef01234567.config"
    past = time.time() - 30 * 86400
    for path in (image, config):
        path.parent.mkdir(parents=True)
        path.write_text("x")
        os.utime(path, (past, past))
    assert main(["gc", "--json"]) == 0
    removed = json.loads(capsys.readouterr().out)["removed"]
    assert {"kind": "image", "what": str(image)} in removed
    assert {"kind": "config", "what": str(config)} in removed
    assert not image.exists() and not config.exists()


def test_gc_refuses_a_negative_age(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc", "--older-than", "-1"]) == 2
    assert capsys.readouterr().err.startswith("kbisect: error: --older-than -1")


def test_a_broken_testcase_is_listed_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "mine" / "broken-one"
    broken.mkdir(parents=True)
    (broken / "manifest.toml").write_text('name = "broken-one"\nrepetitions = "three"\n')
    monkeypatch.setenv("KBISECT_TESTCASES", str(tmp_path / "mine"))
    assert main(["testcases"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("nvme-snapshot-read: ") for line in lines)
    assert [line for line in lines if line.startswith("broken-one: broken: ")]
    assert main(["testcases", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in listed if "name" in r}
    assert rows["broken-one"]["error"] and rows["nvme-snapshot-read"]["primary"]
    kinds = {r["kind"]: r for r in listed if "kind" in r}  # the testcase kinds, after them
    assert kinds["stress-ng"]["usage"] == "stress-ng:STRESSOR[:WORKERS]"
