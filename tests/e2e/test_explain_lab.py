"""`kbisect explain` for real: the lab's culprit (the seed's "NVMe: disallow request
merges") and its parent built with the diagnostics options and booted in turn in QEMU
through a dev server and a worker of the test's own. The Why lines must say what the
seed's engineer found by hand: the origin disk's reads became 8-sector requests (in
diskstats, and in blktrace in traced boots of their own). With --alignment the job's own
pair is rebuilt with 64-byte aligned functions (their System.map shows it) and booted
again: a change in the request size is no code-layout artifact."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kbisect.contract import EXPLAIN_ALIGNMENT, EXPLAIN_BOOTS_EXACT
from tests.conftest import E2E_CACHE
from tests.e2e.service import on_own_service

pytestmark = pytest.mark.e2e


def test_explain_names_the_request_size_the_culprit_changed(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    culprit = str(truth["culprit"])
    flame = tmp_path / "flame.svg"
    args = ["explain", "--repo", str(lab), "--culprit", culprit]
    args += ["--testcase", "nvme-snapshot-read", "--flame", str(flame), "--alignment"]
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
    assert len(boots) == 6 * EXPLAIN_BOOTS_EXACT, proc.stderr[-3000:]
    assert boots[0].startswith("boot 1: parent ") and boots[1].startswith("boot 2: culprit ")
    # traced boots (blktrace) after the explain boots: their figures compared too
    n = 2 * EXPLAIN_BOOTS_EXACT + 1
    assert boots[n - 1].startswith(f"boot {n}: traced parent "), boots
    traced = [c for (s, n), c in changes.items() if s == "blktrace" and "request size" in n]
    assert traced and min(c["change"] for c in traced) < -90, sorted(changes)
    # the alignment check: the job's kernels, aligned, booted in turn; the change remains
    n = 4 * EXPLAIN_BOOTS_EXACT + 1
    assert boots[n - 1].startswith(f"boot {n}: aligned parent "), boots
    check = result["alignment"]
    assert check["verdict"] == "remains" and check["boots"] == EXPLAIN_BOOTS_EXACT, check
    assert check["effect"]["change"] < -90, check
    shares = [_aligned_share(commit) for commit in (culprit, result["parent"])]
    print(f"functions at {EXPLAIN_ALIGNMENT}-byte boundaries: {shares}")
    assert min(shares) > 0.75, shares


def _aligned_share(commit: str) -> float:
    """Of the aligned kernel's text symbols, the share at EXPLAIN_ALIGNMENT-byte
    boundaries (gcc's default of 16 leaves about a quarter there)."""
    for meta in (E2E_CACHE / "artifacts").glob("*/meta.json"):
        art = json.loads(meta.read_text()).get("artifact") or {}
        log = meta.parent / "build.log"
        if art.get("commit") == commit and f"KCFLAGS=-falign-functions={EXPLAIN_ALIGNMENT}" in (
            log.read_text(errors="replace") if log.exists() else ""
        ):
            text = [line.split() for line in (meta.parent / "System.map").read_text().splitlines()]
            funcs = [int(a, 16) for a, kind, *_ in text if kind in "tT"]
            return sum(a % EXPLAIN_ALIGNMENT == 0 for a in funcs) / len(funcs)
    raise AssertionError(f"no aligned build of {commit} in {E2E_CACHE}")
