"""A user's own testcase: the skeleton `testcase new` writes, and what `check` finds."""

from pathlib import Path

import pytest

from kbisect.errors import UserError
from kbisect.model import Direction, Metric, Score
from kbisect.testcases import check, manifest, skeleton


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("KBISECT_TESTCASES", raising=False)
    return tmp_path / "data"


def test_the_skeleton_loads_and_is_found_by_name(data: Path) -> None:
    folder = skeleton.write("my-read", manifest.user_dir(data))
    m = manifest.load("my-read")
    assert m.folder == folder and m.primary == "throughput" and m.metrics["reads"].exact
    assert [d.name for d in m.disks] == ["data"]
    assert b"kb_metric" in m.script
    assert check.check_host(m).ok


@pytest.mark.parametrize("name", ["nvme-snapshot-read", "Bad;name", "-x", ""])
def test_a_taken_or_invalid_name_is_refused(data: Path, name: str) -> None:
    with pytest.raises(UserError):
        skeleton.write(name, manifest.user_dir(data))


def test_new_from_a_kind_writes_that_kind_s_testcase_under_its_own_name(data: Path) -> None:
    folder = skeleton.write("my-switch", manifest.user_dir(data), "stress-ng:switch:2")
    m = manifest.load("my-switch")
    assert m.folder == folder and m.name == "my-switch" and m.primary == "ops_per_sec"
    assert m.params["STRESSOR"] == "switch" and m.params["WORKERS"] == "2"
    assert check.check_host(m).ok
    with pytest.raises(UserError, match="sysbench:cpu"):
        skeleton.write("my-bench", manifest.user_dir(data), "sysbench")


@pytest.mark.parametrize(
    "kind",
    [
        "stress-ng:hdd:2:direct+rd-seq",
        "hackbench:pipe",
        "perf-bench:futex-hash",
        "sysbench:memory",
        "cyclictest:5",
        "iperf3:udp:rx",
    ],
)
def test_each_kind_writes_a_testcase_its_host_check_passes(data: Path, kind: str) -> None:
    folder = skeleton.write("mine", manifest.user_dir(data), kind)
    m = manifest.load("mine")
    assert m.folder == folder and m.primary in m.metrics and m.script
    report = check.check_host(m)
    assert report.ok, report.problems


def test_a_second_new_of_the_same_name_is_refused(data: Path) -> None:
    skeleton.write("mine", manifest.user_dir(data))
    with pytest.raises(UserError, match="exists already"):
        skeleton.write("mine", manifest.user_dir(data))


def _score(**samples: list[float]) -> Score:
    metrics = {k: Metric(k, "u", Direction.HIGHER, v[0], samples=v) for k, v in samples.items()}
    return Score("my-read", "throughput", metrics)


def test_check_finds_unreported_metrics_and_exact_ones_that_vary(data: Path) -> None:
    skeleton.write("my-read", manifest.user_dir(data))
    m = manifest.load("my-read")
    good = check.check_score(
        m, _score(throughput=[90.0, 95.0], reads=[64.0, 64.0]), check.CheckReport("x")
    )
    assert good.ok
    missing = check.check_score(m, _score(throughput=[90.0]), check.CheckReport("x"))
    assert len(missing.problems) == 1 and "'reads' is declared but" in missing.problems[0]
    varied = check.check_score(
        m, _score(throughput=[9.0], reads=[64.0, 70.0]), check.CheckReport("x")
    )
    assert (
        len(varied.problems) == 1
        and "declared exact but its repetitions differ (64 70)" in varied.problems[0]
    )


def test_check_names_a_missing_tool(data: Path) -> None:
    folder = skeleton.write("my-read", manifest.user_dir(data))
    text = (folder / "manifest.toml").read_text().replace("tools = []", 'tools = ["no-such-tool"]')
    (folder / "manifest.toml").write_text(text)
    report = check.check_host(manifest.load("my-read"))
    assert not report.ok and "no-such-tool" in report.problems[0]
