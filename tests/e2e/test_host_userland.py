"""The host userland for real: a lab kernel with 9p and overlayfs boots on the host's
root filesystem and runs fio from it, once more under blktrace (slow, TCG)."""

import json
from pathlib import Path

import pytest

from kbisect.main import main
from kbisect.testcases import manifest

pytestmark = pytest.mark.e2e


def test_fio_runs_from_the_host_root_and_a_traced_boot_summarizes_the_block_layer(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, _ = real_lab
    args = ["try", "--repo", str(lab), "lab-good", "--testcase", "fio-read-latency"]
    code = main([*args, "--repetitions", "1", "--trace", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    metrics = result["metrics"]
    assert metrics["read_lat_p99"]["value"] > 0 and metrics["writer_throughput"]["value"] > 0
    assert metrics["reader_runtime_max"]["value"] >= metrics["read_lat_max"]["value"] > 0
    disk = result["diagnostics"]["disks"]["data"]
    assert disk["latencies"]["q2c"]["avg_ms"] >= disk["latencies"]["d2c"]["avg_ms"] > 0
    assert disk["requests"] > 100 and sum(disk["sectors"].values()) == disk["requests"]
    folder = Path(result["diagnostics"]["folder"])
    assert list(folder.glob("*.blktrace.*")), "the binary trace is kept"


def test_check_boots_a_testcase_once_and_prints_its_metrics(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, _ = real_lab
    args = ["testcase", "check", "nvme-snapshot-read", "--repo", str(lab), "--kernel-rev"]
    code = main([*args, "lab-good", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["ok"] and report["problems"] == []
    assert report["metrics"]["avg_read_sectors"] and report["metrics"]["throughput"]


def test_sched_pipe_boots_on_the_host_root_and_scores_a_context_switch(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    # Reuse outside block I/O: perf from the host's root filesystem, no disks.
    lab, _ = real_lab
    args = ["testcase", "check", "sched-pipe", "--repo", str(lab), "--kernel-rev", "lab-good"]
    code = main([*args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["ok"] and report["problems"] == [], report
    usecs, ops = report["metrics"]["usecs_per_op"], report["metrics"]["ops_per_sec"]
    assert len(usecs) == len(ops) == 5  # the manifest's repetitions, the warm-up left out
    for u, o in zip(usecs, ops, strict=True):
        assert 0 < u < 10_000 and abs(u * o / 1e6 - 1) < 0.05  # one is the other's inverse


# One kind of each family (issue 70): each runs its tool from the host userland in a real
# guest on the shared lab kernel and reports its primary metric for every repetition.
# The quickest of each family (docs/measurements.md, "Testcase kinds' noise").
KINDS = ["stress-ng:switch", "hackbench:pipe", "perf-bench:mem-memcpy", "sysbench:mutex"]


# iperf3: the guest's virtio-net through QEMU's restricted user-mode network, the host's
# client connecting in (infra/net_peer.py).
@pytest.mark.parametrize("kind", [*KINDS, "cyclictest:2", "iperf3"])
def test_a_community_benchmark_kind_boots_and_reports_its_primary_metric(
    real_lab: tuple[Path, dict[str, object]], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lab, _ = real_lab
    spec = manifest.load(kind)
    args = ["testcase", "check", kind, "--repo", str(lab), "--kernel-rev", "lab-good"]
    code = main([*args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["ok"] and report["problems"] == [], report
    figures = report["metrics"][spec.primary]
    assert len(figures) == spec.repetitions, figures  # the warm-up left out
    assert all(isinstance(f, int | float) and 0 < f < 1e12 for f in figures), figures


def test_a_kselftest_built_from_the_lab_tree_passes_on_its_kernel(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    # The selftests built from lab-good's tree (the cache's selftests/), run by the host
    # userland's bash in the guest, their KTAP read: a pass/fail verdict, good.
    lab, _ = real_lab
    args = ["testcase", "check", "kselftest:timers:posix_timers", "--repo", str(lab)]
    code = main([*args, "--kernel-rev", "lab-good", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["ok"] and report["problems"] == [], report
    assert "verdict: good" in report["notes"], report["notes"]
