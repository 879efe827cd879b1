"""A real sweep: lab kernels built and booted in QEMU through a dev server and a worker of
the test's own. On the seed's exact counter, the pair that holds the culprit is "changed"
and the others "same", one boot a kernel; the plot is written."""

import json
from pathlib import Path

import pytest

from tests.e2e.service import on_own_service

pytestmark = pytest.mark.e2e


def test_a_sweep_over_the_lab_is_changed_only_across_the_culprit(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    culprit = str(truth["culprit"])
    series = ["lab-good", f"{culprit}^", culprit, "lab-bad"]
    plot = tmp_path / "sweep.png"
    args = ["sweep", "--repo", str(lab), *series, "--testcase", "nvme-snapshot-read"]
    proc = on_own_service(tmp_path, [*args, "--plot", str(plot)], timeout=1700)
    result = json.loads(proc.stdout)
    verdicts = [(p["old"]["name"], p["new"]["name"], p["verdict"]) for p in result["pairs"]]
    assert verdicts == [
        ("lab-good", f"{culprit}^", "same"),
        (f"{culprit}^", culprit, "changed"),
        (culprit, "lab-bad", "same"),
    ], result["pairs"]
    changed = result["pairs"][1]
    assert changed["direction"] == "worse" and changed["metric"] == "avg_read_sectors"
    assert changed["effect"] < -0.9  # 512-sector reads become 8-sector ones
    assert result["kernels"][2]["commit"] == culprit
    # A counter whose repetitions agree: one boot of each kernel decided every pair.
    assert result["boots"] == 4, result
    assert plot.stat().st_size > 10_000
    # Piped, the progress is one plain line per boot.
    boots = [line for line in proc.stderr.splitlines() if line.startswith("boot ")]
    assert len(boots) == 4 and all("nvme-snapshot-read" in b for b in boots), proc.stderr
