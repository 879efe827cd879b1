"""Benchmark: what a libvirt domain adds to a boot, against QEMU started directly.

Same kernel, same guest image, same disks: boots alternate between QemuMachine and
LibvirtMachine (the order flips every pair, so drift hits both alike). Two kinds of boot:
`probe`, the guest's init stops at once (boot and power-off only), and `testcase`, the
seed's nvme-snapshot-read with one repetition on the fast profile, whose verdict and
request size must be the same under both. The wall time is around Machine.run (libvirt's
connection, domain XML and events included). Nothing else should run on the host. Run:
    .venv/bin/python -m benchmarks.libvirt_overhead --repo LAB [--rev lab-good] [--boots 5]
        [--uri qemu:///session] [--json]
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from kbisect.backends import Machine
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.infra.git import Git
from kbisect.infra.initramfs import build_image
from kbisect.infra.libvirt_machine import LibvirtMachine
from kbisect.infra.qemu import PROFILES, QemuMachine
from kbisect.model import Artifact, Disk
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec

TESTCASE = "nvme-snapshot-read"


def _boot(machine: Machine, artifact: Artifact, kind: str) -> tuple[float, str, float]:
    """Wall seconds, outcome, and the avg read size (testcase boots; 0 for probes)."""
    m = manifests.load(TESTCASE)
    params = {**m.params, "KB_REPETITIONS": "1", "KB_NDISKS": str(len(m.disks))}
    image = build_image(m.tools, m.script, params, extra=m.files)
    probe = kind == "probe"
    disks = [] if probe else [Disk(d.name, d.size_mib, PROFILES["fast"]) for d in m.disks]
    began = time.monotonic()
    run = machine.run(artifact, image, disks, 600, cmdline="kbisect.probe=1" if probe else "")
    seconds = time.monotonic() - began
    sizes = [r.get("value") for r in run.records if r.get("name") == "avg_read_sectors"]
    return seconds, run.outcome.value, float(str(sizes[-1])) if sizes else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True)
    ap.add_argument("--rev", default="lab-good")
    ap.add_argument("--boots", type=int, default=5, help="boots of each kind per machine")
    ap.add_argument("--uri", default="qemu:///session")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = Settings.from_env()
    git = Git(Path(args.repo))
    commit = git.commit_info(args.rev).hash
    spec = build_spec(manifests.load(TESTCASE))
    artifact = KernelBuilder(settings.jobs).build(git.repo, commit, spec, lambda _: None)
    machines: dict[str, Callable[[], Machine]] = {
        "qemu": lambda: QemuMachine(accel="tcg"),
        "libvirt": lambda: LibvirtMachine(uri=args.uri, accel="tcg"),
    }
    results: dict[str, dict[str, list[tuple[float, str, float]]]] = {}
    for kind in ("probe", "testcase"):
        for i in range(args.boots):
            order = ["qemu", "libvirt"] if i % 2 == 0 else ["libvirt", "qemu"]
            for name in order:
                got = _boot(machines[name](), artifact, kind)
                results.setdefault(kind, {}).setdefault(name, []).append(got)
    summary = {
        kind: {
            name: {
                "seconds": [round(s, 2) for s, _, _ in runs],
                "median": round(statistics.median(s for s, _, _ in runs), 2),
                "outcomes": sorted({o for _, o, _ in runs}),
                "avg_read_sectors": sorted({v for _, _, v in runs}),
            }
            for name, runs in by_machine.items()
        }
        for kind, by_machine in results.items()
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    for kind, by_machine in summary.items():
        q, lv = by_machine["qemu"], by_machine["libvirt"]
        print(
            f"{kind}: qemu median {q['median']} s {q['seconds']}, libvirt median "
            f"{lv['median']} s {lv['seconds']}: +{lv['median'] - q['median']:.2f} s; outcomes "
            f"{q['outcomes']} / {lv['outcomes']}; avg_read_sectors {q['avg_read_sectors']} / "
            f"{lv['avg_read_sectors']}"
        )


if __name__ == "__main__":
    main()
