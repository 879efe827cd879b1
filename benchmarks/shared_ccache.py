"""Benchmark: a fresh build host's first lab build, with and without the shared compile
cache (KBISECT_CCACHE_REMOTE: ccache's remote storage on a WebDAV server, nginx here).

Three build hosts, each its own KBISECT_CACHE (artifacts, worktrees, local ccache): the
first builds lab-good with the shared cache and fills it; the second builds the same
commit cold, with no shared cache; the third, also fresh, with it. Nothing else should run
on the host meanwhile. Prints the seconds of each and the ratio cold / shared. Run:
    .venv/bin/python -m benchmarks.shared_ccache [--seed N] [--json]
"""

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

from benchmarks.nginx import webdav
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.infra.git import Git
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec

TESTCASE = "nvme-snapshot-read"


def _build(lab: Path, host: Path, remote: str) -> float:
    """Seconds of one build of lab-good on a fresh host (its own cache and lock folder)."""
    os.environ["KBISECT_CACHE"] = str(host / "cache")
    os.environ["KBISECT_LOCK_DIR"] = str(host / "locks")
    os.environ.pop("KBISECT_CCACHE_REMOTE", None)
    if remote:
        os.environ["KBISECT_CCACHE_REMOTE"] = remote
    commit = Git(lab).resolve("lab-good")
    started = time.monotonic()
    art = KernelBuilder().build(lab, commit, build_spec(manifests.load(TESTCASE)))
    seconds = time.monotonic() - started
    assert not art.cached, "a fresh host hit its artifact cache"
    return seconds


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--seed", type=int, default=random.randrange(2**31), help="the lab's seed")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kb-ccache-") as tmp:
        root = Path(tmp)
        create_lab(root / "lab", LabOptions(commits=4, seed=args.seed))
        with webdav(root / "nginx", "ccache") as url:
            fill = _build(root / "lab", root / "first", url)
            cold = _build(root / "lab", root / "cold", "")
            shared = _build(root / "lab", root / "shared", url)
    figures = {
        "seed": args.seed,
        "first_host_seconds": round(fill, 1),
        "fresh_host_cold_seconds": round(cold, 1),
        "fresh_host_shared_seconds": round(shared, 1),
        "speedup": round(cold / shared, 2),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"lab seed {args.seed}: lab-good (tinyconfig and the seed testcase's fragments)")
    print(f"first host, filling the shared cache: {fill:.1f} s")
    print(f"fresh host, no shared cache:          {cold:.1f} s")
    print(f"fresh host, shared cache:             {shared:.1f} s ({cold / shared:.2f}x faster)")


if __name__ == "__main__":
    main()
