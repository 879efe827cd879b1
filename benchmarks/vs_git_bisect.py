"""Benchmark: kbisect against an expert's `git bisect run` script, same lab, one run.

The script is what a kernel engineer writes by hand: one clone, the same config as
kbisect's (tinyconfig, the base and testcase fragments), and for each step `make
olddefconfig bzImage` in place (incremental), then the same QEMU testcase on the image,
good when the primary metric is on the good side of a threshold the expert already knows
(the midpoint of the endpoints' values, given for free: kbisect measures its endpoints),
with the boots kbisect gives that metric (a count: two repetitions, no warm-up).
It builds with plain gcc, as such scripts do; --script-ccache gives it kbisect's ccache.

kbisect runs its README job on the same lab: `kbisect bisect` with its defaults (the
endpoints booted, the culprit verified by a revert), through the local service. Nothing
else should run on the host meanwhile. Prints both wall times and their ratio; the lab's
truth is read only to say whether each named the right commit. Run:
    .venv/bin/python -m benchmarks.vs_git_bisect [--lab DIR] [--seed N] [--json]
A lab's commits are the same for the same seed, so a second run with one seed finds
kbisect's kernels already built: the default seed is a new one each run.
"""

import argparse
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kbisect.builders import kconfig
from kbisect.infra.qemu import QemuMachine
from kbisect.model import Artifact
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec, run_testcase

TESTCASE = "nvme-snapshot-read"
KBISECT = [sys.executable, "-m", "kbisect"]
# The expert's rule, known from looking at the endpoints by hand (512 vs 8 sectors): good
# above their geometric midpoint.
RULE = "avg_read_sectors>64"
FIRST_BAD = re.compile(r"^([0-9a-f]{40}) is the first bad commit", re.M)


@dataclass
class Side:
    name: str
    seconds: float
    culprit: str
    right: bool
    builds: int
    boots: int


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["step"]:  # called by the script's step.sh
        return run_step(*argv[1:4])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab", type=Path, help="an existing lab (default: a fresh one)")
    p.add_argument(
        "--seed",
        type=int,
        help="seed of the fresh lab (default: a new one; a seed used before finds "
        "kbisect's kernels already built)",
    )
    p.add_argument("--commits", type=int, default=64, help="commits in the fresh lab")
    p.add_argument("--script-ccache", action="store_true", help="the script uses ccache too")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kbisect-vs-git-"))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1000, 10**6)
    if not args.lab:
        print(f"lab seed {seed}", file=sys.stderr, flush=True)
    try:
        lab = args.lab or _make_lab(work / "lab", seed, args.commits)
        truth = json.loads(Path(f"{lab}.truth.json").read_text())["culprit"]
        script = _expert(lab, work, truth, args.script_ccache)
        print(f"{script.name}: {script.seconds:.0f} s", file=sys.stderr, flush=True)
        ours = _kbisect(lab, truth)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = ours.seconds / script.seconds
    if args.json:
        print(json.dumps({"script": asdict(script), "kbisect": asdict(ours), "ratio": ratio}))
        return 0
    row = "{:<28} {:>9} {:>7} {:>6} {:>14} {:>6}"
    print(row.format("", "wall (s)", "builds", "boots", "culprit", "right"))
    for s in (script, ours):
        print(row.format(s.name, f"{s.seconds:.0f}", s.builds, s.boots, s.culprit[:12], s.right))
    print(f"kbisect / script wall time: {ratio:.2f}")
    return 0


def _make_lab(dest: Path, seed: int, commits: int) -> Path:
    argv = [*KBISECT, "lab", "create", str(dest), "--seed", str(seed), "--commits", str(commits)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return dest


def _expert(lab: Path, work: Path, truth: str, ccache: bool) -> Side:
    """`git bisect run` over in-place builds in one clone; the clock includes the clone."""
    start = time.monotonic()
    tree = work / "tree"
    subprocess.run(["git", "clone", "-q", str(lab), str(tree)], check=True)
    manifest = manifests.load(TESTCASE)
    _configure(tree, manifest)
    step = work / "step.sh"
    cc = "ccache gcc" if ccache else "gcc"
    jobs = Settings.from_env().jobs
    image = tree / "arch/x86/boot/bzImage"
    guest = [sys.executable, "-m", "benchmarks.vs_git_bisect", "step", str(image), RULE]
    step.write_text(
        "#!/bin/sh\n"
        "# One bisection step: build in place, run the testcase, say good (0) or bad (1).\n"
        f"make -s olddefconfig >/dev/null 2>&1 && make -s -j{jobs} CC={shlex.quote(cc)} "
        f"bzImage >>{shlex.quote(str(work / 'make.log'))} 2>&1 || exit 125\n"
        f"exec {shlex.join([*guest, str(work / 'steps.log')])}\n"
    )
    step.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if ccache:
        env["CCACHE_DIR"] = str(Settings.from_env().cache_dir() / "ccache")
    git = ["git", "-C", str(tree)]
    subprocess.run([*git, "bisect", "start", "lab-bad", "lab-good"], check=True, env=env)
    out = subprocess.run(
        [*git, "bisect", "run", str(step)], capture_output=True, text=True, env=env, check=False
    )
    seconds = time.monotonic() - start
    m = FIRST_BAD.search(out.stdout)
    steps = (work / "steps.log").read_text().splitlines() if (work / "steps.log").exists() else []
    name = "git bisect run" + (" (ccache)" if ccache else " (gcc)")
    culprit = m.group(1) if m else "none"
    return Side(name, seconds, culprit, culprit == truth, len(steps), len(steps))


def _configure(tree: Path, manifest: manifests.Manifest) -> None:
    """The config kbisect builds with, made the way a person would."""
    frags = kconfig.fragments_for(build_spec(manifest))
    paths = []
    for i, text in enumerate(frags):
        path = tree.parent / f"fragment-{i}.config"
        path.write_text(text)
        paths.append(str(path))
    make = ["make", "-s", "-C", str(tree)]
    subprocess.run([*make, "tinyconfig"], check=True, stdout=subprocess.DEVNULL)
    merge = [str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(tree)]
    subprocess.run(
        [*merge, str(tree / ".config"), *paths], check=True, cwd=tree, stdout=subprocess.DEVNULL
    )
    subprocess.run([*make, "olddefconfig"], check=True, stdout=subprocess.DEVNULL)


def _kbisect(lab: Path, truth: str) -> Side:
    start = time.monotonic()
    argv = [
        *KBISECT,
        "bisect",
        "--repo",
        str(lab),
        "--good",
        "lab-good",
        "--bad",
        "lab-bad",
        "--testcase",
        TESTCASE,
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    job = re.search(r"^job (\S+)", out.stderr + out.stdout, re.M)  # the id is on stderr
    if not job:
        raise SystemExit(f"kbisect did not start a job:\n{out.stdout}{out.stderr}")
    rep = subprocess.run(
        [*KBISECT, "report", job.group(1), "--json"], capture_output=True, text=True, check=True
    )
    report = json.loads(rep.stdout)
    culprit = report.get("culprit") or "none"
    steps = report.get("steps", [])
    # inert commits are the only steps with no build; the verification is one more build
    built = [s for s in steps if not s.get("note", "").startswith("touches no file")]
    builds = len(built) + (1 if (report.get("verification") or {}).get("commit") else 0)
    return Side("kbisect", seconds, culprit, culprit == truth, builds, int(report.get("boots", 0)))


def run_step(image: str, rule: str, log: str) -> int:
    """The script's testcase run on one image: 0 good, 1 bad, 125 cannot test."""
    metric, _, threshold = rule.partition(">")
    manifest = manifests.load(TESTCASE)
    art = Artifact(
        commit="in-place", tree="", config_hash="", kernel=image, config="", build_log=""
    )
    machine = QemuMachine(accel=Settings.from_env().accel)
    exact = manifest.metrics[metric].exact  # the same boots as kbisect's: a count needs
    reps = manifest.repetitions_for(metric)  # no warm-up and two repetitions
    try:
        run = run_testcase(manifest, art, machine, repetitions=reps, exact=exact)
        value = run.score.metrics[metric].value
    except Exception as exc:  # a panic or hang: git bisect skips the commit
        with open(log, "a") as fh:
            fh.write(f"skip {exc}\n")
        return 125
    with open(log, "a") as fh:
        fh.write(f"{metric} {value}\n")
    return 0 if value > float(threshold) else 1


if __name__ == "__main__":
    sys.exit(main())
