"""A real sweep: lab kernels built and booted in QEMU through a dev server and a worker of
the test's own. On the seed's exact counter, the pair that holds the culprit is "changed"
and the others "same", one boot a kernel; the plot is written, and `kbisect reproduce`
writes the changed pair's folder (the culprit against its parent, their own .configs)."""

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.service import KBISECT, SEED, own_service

pytestmark = pytest.mark.e2e


def test_a_sweep_over_the_lab_is_changed_only_across_the_culprit(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    culprit = str(truth["culprit"])
    series = ["lab-good", f"{culprit}^", culprit, "lab-bad"]
    plot = tmp_path / "sweep.png"
    args = ["sweep", "--repo", str(lab), *series, "--testcase", SEED]
    repro = tmp_path / "repro"
    with own_service(tmp_path) as env:
        proc = subprocess.run([*KBISECT, *args, "--plot", str(plot), "--json", "--no-start"],
                              env=env, capture_output=True, text=True, timeout=1700)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        result = json.loads(proc.stdout)
        written = subprocess.run([*KBISECT, "reproduce", result["id"], str(repro), "--no-start"],
                                 env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
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
    assert len(boots) == 4 and all(SEED in b for b in boots), proc.stderr
    # The changed pair without kbisect: the culprit against its parent, each .config the
    # job's own (built here), and a script bash reads.
    assert written.returncode == 0, written.stderr[-2000:]
    parent = result["kernels"][1]["commit"]
    assert (repro / "commits").read_text() == f"new {culprit}\nold {parent}\n"
    assert "ADJACENT=1 " in (repro / "reproduce.sh").read_text()
    assert "CONFIG_BLK_DEV_NVME=y" in (repro / "config" / "new.config").read_text()
    assert subprocess.run(["bash", "-n", str(repro / "reproduce.sh")]).returncode == 0
