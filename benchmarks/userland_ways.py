"""Benchmark: the boot cost of the host userland's two ways, 9p and the squashfs image.

One kernel that has both (lab-good with sched-pipe's config, plus virtio-blk and
squashfs), one testcase (sched-pipe, perf from the host userland); boots alternate between
the ways (the order flips every pair, so drift hits both alike). For each way: when the
script starts (guest uptime), QEMU's wall time, and sched-pipe's usecs/op (the ways must
not move the metric). Then a kernel built with 9p turned off runs sched-pipe through
the runner, which picks the image by itself. Nothing else should run on the host. Run:
    .venv/bin/python -m benchmarks.userland_ways --repo LAB [--rev lab-good] [--boots 5]
"""

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.infra import host_userland
from kbisect.infra.git import Git
from kbisect.infra.initramfs import build_image
from kbisect.infra.qemu import QemuMachine
from kbisect.model import Artifact, BuildSpec
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec, run_testcase
from kbisect.testcases.userland_way import Way, choose

TESTCASE = "sched-pipe"
# the image's way, beside 9p (squashfs sits under "Miscellaneous filesystems")
BOTH = "CONFIG_VIRTIO_BLK=y\nCONFIG_MISC_FILESYSTEMS=y\nCONFIG_SQUASHFS=y\n"
NO_9P = BOTH + "# CONFIG_NET_9P is not set\n"


def _spec(extra: str) -> BuildSpec:
    spec = build_spec(manifests.load(TESTCASE))
    return dataclasses.replace(spec, fragments=(*spec.fragments, extra))


def _boot(artifact: Artifact, way: Way) -> dict[str, float]:
    m = manifests.load(TESTCASE)
    params = {**m.params, "KB_REPETITIONS": "2", "KB_NDISKS": "0"}
    image = str(host_userland.image(m.tools)) if way == Way.IMAGE else ""
    guest = build_image(m.tools, m.script, params, host_root=True, userland_image=image)
    began = time.monotonic()
    run = QemuMachine(accel="tcg").run(artifact, guest, [], 600)
    wall = time.monotonic() - began
    started = next(float(str(r["uptime"])) for r in run.records if r.get("event") == "started")
    usecs = [float(str(r["value"])) for r in run.records if r.get("name") == "usecs_per_op"]
    return {"started": started, "wall": wall, "usecs_per_op": usecs[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, help="a lab (kbisect lab create)")
    ap.add_argument("--rev", default="lab-good", help="the revision to build")
    ap.add_argument("--boots", type=int, default=5, help="boots of each way")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    settings = Settings.from_env()
    git = Git(Path(args.repo))
    commit = git.commit_info(args.rev).hash
    builder = KernelBuilder(settings.jobs)
    both = builder.build(git.repo, commit, _spec(BOTH), lambda _: None)
    began = time.monotonic()
    host_userland.image(manifests.load(TESTCASE).tools)
    made = time.monotonic() - began  # 0 when an earlier run made it
    runs: dict[str, list[dict[str, float]]] = {Way.NINE_P: [], Way.IMAGE: []}
    for i in range(args.boots):
        for way in (Way.NINE_P, Way.IMAGE) if i % 2 == 0 else (Way.IMAGE, Way.NINE_P):
            runs[way].append(_boot(both, way))
    no_9p = builder.build(git.repo, commit, _spec(NO_9P), lambda _: None)
    alone = run_testcase(manifests.load(TESTCASE), no_9p, QemuMachine(accel="tcg"))
    summary = {
        "image_seconds": round(made, 1),
        "image_mib": round(
            max(p.stat().st_size for p in (settings.cache_dir() / "images").glob("*.squashfs"))
            / 2**20
        ),
        "ways": {
            way: {
                key: {
                    "median": round(statistics.median(r[key] for r in rs), 2),
                    "each": [round(r[key], 2) for r in rs],
                }
                for key in ("started", "wall", "usecs_per_op")
            }
            for way, rs in runs.items()
        },
        "no_9p_kernel": {
            "chosen": choose(no_9p).value,
            "userland": alone.userland,
            "usecs_per_op": alone.score.primary_metric.value,
        },
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"image: {summary['image_mib']} MiB, made in {made:.1f} s (0: made before)")
    for way, figures in summary["ways"].items():  # type: ignore[union-attr]
        line = ", ".join(f"{k} {v['median']} (each {v['each']})" for k, v in figures.items())
        print(f"{way}: {line}")
    ratio = (
        summary["ways"][Way.IMAGE]["started"]["median"]  # type: ignore[index]
        / summary["ways"][Way.NINE_P]["started"]["median"]  # type: ignore[index]
    )
    print(f"script start, image / 9p: {ratio:.2f}")
    print(f"a kernel without 9p: {summary['no_9p_kernel']}")


if __name__ == "__main__":
    main()
