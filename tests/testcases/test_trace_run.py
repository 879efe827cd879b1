"""A traced boot's reading of what its guest left: the traced metrics and the tar."""

import io
import math
import tarfile
from pathlib import Path
from typing import Any

import pytest

from kbisect.errors import TestcaseFailedError
from kbisect.model import Artifact, GuestRun, Outcome
from kbisect.testcases import manifest, trace_run
from kbisect.testcases.runner import GuestParts
from kbisect.testcases.trace_run import MAX_TAR_MEMBERS


def _traced(name: object, value: object) -> dict[str, object]:
    return {"event": "traced-metric", "rep": 1, "name": name, "value": value}


def test_traced_metrics_are_the_testcases_own_and_finite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The traced run's kb_metric names are the testcase's: a guest's 100,000 others
    (each a key of the result) and its NaN are not kept."""
    m = manifest.load("nvme-snapshot-read")
    records = [_traced(f"m{i}", 1.0) for i in range(100_000)]
    records += [_traced("throughput", 12.5), _traced("reads", math.nan), _traced(7, 1.0)]
    records += [{"event": "metric", "rep": 1, "name": "wall", "value": 3.0}]
    run = GuestRun(Outcome.SUCCESS, records, str(tmp_path / "console"), 1.0, "tcg")

    def boot(*_: Any) -> tuple[GuestRun, Path]:
        return run, tmp_path

    monkeypatch.setattr(trace_run, "check_traceable", lambda _: None)
    monkeypatch.setattr(trace_run, "guest_parts", lambda *_, **__: GuestParts({}))
    monkeypatch.setattr(trace_run, "build_image", lambda *_, **__: None)
    monkeypatch.setattr(trace_run, "boot_leaving_tar", boot)
    art = Artifact("c" * 40, "t", "h", "bzImage", ".config", "build.log")
    diagnostics = trace_run.trace_testcase(m, art, machine=_Machine())  # type: ignore[arg-type]
    assert diagnostics.metrics == {"throughput": 12.5}


class _Machine:
    pin = ()


def _tar(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w") as tf:
        for name in names:
            tf.addfile(tarfile.TarInfo(name), io.BytesIO())
    with open(path, "ab") as fh:
        fh.write(bytes(1 << 16))  # the disk image's zeros after the tar
    return path


def test_a_tar_of_too_many_files_is_not_unpacked(tmp_path: Path) -> None:
    """A 512 MB tar of empty files is a million: each read and written before."""
    names = [f"f{i}" for i in range(MAX_TAR_MEMBERS + 1)]
    tar, folder = _tar(tmp_path / "kbtrace.img", names), tmp_path / "trace"
    with pytest.raises(TestcaseFailedError, match=f"more than {MAX_TAR_MEMBERS:,} files") as e:
        trace_run._unpack(tar, folder, "console", "traced run", "trace")
    assert "\n" not in str(e.value) and e.value.console_path == "console"
    assert list(folder.iterdir()) == []
    docs = Path(__file__).parents[2] / "docs"
    assert f"{MAX_TAR_MEMBERS:,} files" in (docs / "testcases.md").read_text()
    assert f"| {MAX_TAR_MEMBERS:,} files |" in (docs / "explain.md").read_text()


def test_a_tar_within_the_caps_is_unpacked_inside_its_folder(tmp_path: Path) -> None:
    tar = _tar(tmp_path / "kbtrace.img", ["disks", "nvme0n1.events"])
    trace_run._unpack(tar, tmp_path / "trace", "console", "traced run", "trace")
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == ["disks", "nvme0n1.events"]
    out = _tar(tmp_path / "out.img", ["../escaped"])
    with pytest.raises(TestcaseFailedError, match="no readable tar"):
        trace_run._unpack(out, tmp_path / "trace2", "console", "traced run", "trace")
    assert not (tmp_path / "escaped").exists()
