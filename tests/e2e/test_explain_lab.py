"""`kbisect explain` for real: the lab's culprit (the seed's "NVMe: disallow request
merges") and its parent built with the diagnostics options and booted in turn in QEMU
through a dev server and a worker of the test's own. The Why lines must say what the
seed's engineer found by hand: the origin disk's reads became 8-sector requests."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kbisect.contract import EXPLAIN_BOOTS_EXACT
from tests.e2e.service import on_own_service

pytestmark = pytest.mark.e2e


def test_explain_names_the_request_size_the_culprit_changed(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    culprit = str(truth["culprit"])
    flame = tmp_path / "flame.svg"
    args = ["explain", "--repo", str(lab), "--culprit", culprit]
    args += ["--testcase", "nvme-snapshot-read", "--flame", str(flame)]
    proc = on_own_service(tmp_path, args, timeout=1700)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    print("\n".join([result["message"], *result["why"]]))  # the figures, in the log
    assert result["status"] == "explained", result["message"]
    assert result["culprit"] == culprit and result["boots"] == EXPLAIN_BOOTS_EXACT
    assert result["effect"]["change"] < -90  # avg_read_sectors: 512 -> 8 on these kernels
    changes = {(c["source"], c["name"]): c for c in result["comparison"]["changes"]}
    sizes = [c for (s, n), c in changes.items() if s == "diskstats" and "rareq-sz" in n]
    assert sizes and min(c["change"] for c in sizes) < -90, sorted(changes)
    merged = [c for (s, n), c in changes.items() if s == "diskstats" and n.endswith("reads merged")]
    assert merged and all(c["culprit"] == 0 and c["parent"] > 1000 for c in merged), merged
    assert any("read request size (sectors)" in line for line in result["why"]), result["why"]
    # the differential flame graph of the two sides' CPU samples
    svg = ET.parse(flame).getroot()
    assert svg.tag.endswith("svg") and flame.stat().st_size > 2000
    # piped, the progress is a plain line a boot
    boots = [line for line in proc.stderr.splitlines() if line.startswith("boot ")]
    assert len(boots) == 2 * EXPLAIN_BOOTS_EXACT, proc.stderr[-3000:]
    assert boots[0].startswith("boot 1: parent ") and boots[1].startswith("boot 2: culprit ")
