"""How much two guests booted at one moment share: a duet's correlation, measured.

Boots one kernel N times as a duet (both guests the same kernel, each pinned to its half
of --cpus) and N times alone on the first half, interleaved (duet, single, duet, ...),
and prints what `benchmarks.accuracy --duet R` and `kbisect bisect --duets` rest on:
- R: the correlation of the two guests' scores across duets (the share of a boot's
  noise the host gives both alike, which a probe judged beside its reference cancels);
- the halves' mean difference (the workflow alternates halves so that it cancels);
- a duet's difference against that of two successive single boots (what judging a probe
  beside its reference saves over judging it against the last one);
- a duet guest's level against a single boot's (what sharing the host costs).
Only on a host with nothing else running: a build or another guest meanwhile is what this
measures. By hand, with a lab from `kbisect lab create`:
    .venv/bin/python -m benchmarks.duet_correlation --repo LAB --duets 30 --cpus 0,1
"""

import argparse
import itertools
import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.decide.engine_report import boot_value
from kbisect.infra import host_lock
from kbisect.infra.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.settings import Settings
from kbisect.testcases import duet
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec, run_testcase

Z95 = 1.96


@dataclass(frozen=True)
class Figures:
    duets: int
    r: float  # correlation of the two guests' log scores across duets
    halves: float  # mean log(second half / first half)
    halves_half_width: float  # its 95% interval's half width
    duet_diff_sd: float  # sd of log(second / first) within a duet
    single_diff_sd: float  # sd of log(next single / single)
    cost: float  # mean log(duet guest / single boot): a duet guest's level against alone
    single_cv: float  # sd of the singles' log scores


def figures(pairs: list[tuple[float, float]], singles: list[float]) -> Figures:
    """The figures of (first half, second half) duet scores and single scores, in order."""
    a = [math.log(x) for x, _ in pairs]
    b = [math.log(y) for _, y in pairs]
    s = [math.log(x) for x in singles]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    steps = [later - earlier for earlier, later in itertools.pairwise(s)]
    return Figures(
        duets=len(pairs),
        r=statistics.correlation(a, b),
        halves=statistics.fmean(diffs),
        halves_half_width=Z95 * statistics.stdev(diffs) / math.sqrt(len(diffs)),
        duet_diff_sd=statistics.stdev(diffs),
        single_diff_sd=statistics.stdev(steps),
        cost=statistics.fmean(a + b) - statistics.fmean(s),
        single_cv=statistics.stdev(s),
    )


def measure(args: argparse.Namespace) -> tuple[list[tuple[float, float]], list[float]]:
    settings = Settings.from_env()
    manifest = manifests.load(args.testcase)
    commit = Git(args.repo).commit_info(args.rev).hash
    art = KernelBuilder(settings.jobs).build(
        args.repo, commit, build_spec(manifest), lambda _: None
    )
    cpus = host_lock.parse_cpus(args.cpus, keep_one=False)
    machine = QemuMachine(cpus=args.guest_cpus, accel=settings.accel, pin=cpus)
    pair = duet.pinned_pair(machine)
    reps = args.repetitions or manifest.repetitions

    def score(on: QemuMachine, held: bool) -> float:
        run = run_testcase(manifest, art, on, args.profile, reps, held=held)
        if args.metric not in run.score.metrics:
            raise SystemExit(f"{manifest.name} has no metric {args.metric!r}: give --metric")
        return boot_value(list(run.score.metrics[args.metric].samples))

    pairs, singles = [], []
    for i in range(args.duets):
        runs = [lambda m: score(m, True)] * 2
        first, second = duet.at_once(machine, pair, runs)
        pairs.append((first, second))
        singles.append(score(pair[0], False))
        print(f"{i + 1}/{args.duets}: duet {first:g} {second:g}, alone {singles[-1]:g}", flush=True)
    return pairs, singles


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--repo", type=Path, required=True, help="a kernel tree (a lab)")
    p.add_argument("--rev", default="HEAD", help="the kernel to boot (HEAD)")
    p.add_argument("--testcase", default="nvme-snapshot-read", help="the testcase")
    p.add_argument("--metric", default="throughput", help="a timing of the testcase (throughput)")
    p.add_argument("--profile", help="device profile (the testcase's)")
    p.add_argument("--repetitions", type=int, help="runs per boot (the testcase's)")
    p.add_argument("--duets", type=int, default=30, help="duets, and as many single boots (30)")
    p.add_argument("--cpus", default="0,1", help="the CPUs the two halves split (0,1)")
    p.add_argument("--guest-cpus", type=int, default=1, help="each guest's vCPUs (1)")
    p.add_argument("--json", action="store_true", help="the figures as one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    pairs, singles = measure(args)
    f = figures(pairs, singles)
    if args.json:
        print(json.dumps(asdict(f)))
        return 0
    print(f"{f.duets} duets and as many single boots of {args.rev}: {args.testcase} {args.metric}")
    print(f"R, the two guests' correlation: {f.r:.2f}")
    print(f"second half against first: {f.halves:+.2%} +- {f.halves_half_width:.2%}")
    print(
        f"sd of a duet's difference {f.duet_diff_sd:.2%} against two successive single "
        f"boots' {f.single_diff_sd:.2%} (a single boot's sd {f.single_cv:.2%})"
    )
    print(f"a duet guest against a single boot: {f.cost:+.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
