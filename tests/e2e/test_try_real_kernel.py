"""`kbisect try` for real: lab kernel builds and QEMU NVMe boots (slow, TCG)."""

import time
from pathlib import Path

import pytest

from tests.e2e.service import try_lab

pytestmark = pytest.mark.e2e


def _metric(result: dict[str, object], name: str) -> float:
    return float(result["metrics"][name]["value"])  # type: ignore[index]


def test_culprit_and_its_parent_differ_as_in_the_seed(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, truth = real_lab
    culprit = str(truth["culprit"])
    code, parent, err = try_lab(lab, f"{culprit}~1", capsys)
    assert code == 0, err
    code, bad, err = try_lab(lab, culprit, capsys)
    assert code == 0, err
    assert _metric(parent, "avg_read_sectors") >= 256
    assert _metric(bad, "avg_read_sectors") <= 16
    assert _metric(bad, "reads") > 16 * _metric(parent, "reads")

    # On the device the regression was seen on, the request count is the throughput.
    code, parent_ebs, err = try_lab(lab, f"{culprit}~1", capsys, "--profile", "ebs-gp2")
    assert code == 0, err
    code, bad_ebs, err = try_lab(lab, culprit, capsys, "--profile", "ebs-gp2")
    assert code == 0, err
    assert parent_ebs["build"]["cached"] and bad_ebs["build"]["cached"]  # type: ignore[index]
    assert _metric(parent_ebs, "throughput") >= 4 * _metric(bad_ebs, "throughput")


def test_second_try_is_a_cache_hit(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, truth = real_lab
    code, first, err = try_lab(lab, str(truth["bad"]), capsys)
    assert code == 0, err
    start = time.monotonic()
    code, second, err = try_lab(lab, str(truth["bad"]), capsys)
    assert code == 0, err
    assert second["build"]["cached"] and second["build"]["kernel"] == first["build"]["kernel"]  # type: ignore[index]
    print(f"cached try took {time.monotonic() - start:.1f}s")


def test_broken_build_and_broken_boot_are_told_apart(
    real_lab: tuple[Path, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, truth = real_lab
    (broken_build,) = truth["broken_build"]  # type: ignore[misc]
    code, _, err = try_lab(lab, broken_build, capsys)
    assert code == 3, err  # KernelBuildError, not infrastructure (6)
    assert "does not build" in err and "build.log" in err

    (broken_boot,) = truth["broken_boot"]  # type: ignore[misc]
    start = time.monotonic()
    code, _, err = try_lab(lab, broken_boot, capsys)
    assert code == 4, err  # BootError
    assert "panic" in err and "console.log" in err
    assert time.monotonic() - start < 600
