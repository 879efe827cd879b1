"""Benchmark: real bisections on a noisy metric, on fresh labs, one job at a time.

Each lab's culprit is `--culprit slowdown:P` (read throughput about P% lower, no counter
moves), and the job bisects `--metric throughput` on the `fast` profile through the local
service, exactly as a user would. Then, for the first `--aa` labs, a range with no
culprit: from the culprit itself to lab-bad (two bad commits), which must come out as
"no difference". The lab's truth is read only here, to score the answers and to pick the
A/A range; the bisector never sees it. Nothing else should run on the host meanwhile.
Prints one line a job (culprit, right, boots, builds, wall time, confidence) and keeps
each job's JSON report beside its lab (`lab-SEED.culprit.report.json`, `.aa.`). Run:
    .venv/bin/python -m benchmarks.noisy_labs [--seeds 101,102,103,104,105] [--aa 2]
"""

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

KBISECT = [sys.executable, "-m", "kbisect"]
TESTCASE = "nvme-snapshot-read"


@dataclass
class Run:
    lab: str
    kind: str  # "culprit" or "A/A"
    expected: str  # the true culprit, or "no difference"
    answer: str  # the named commit, "no difference", or the job's message
    right: bool
    boots: int
    builds: int
    seconds: float
    confidence: float | None
    effect: str


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="101,102,103,104,105", help="lab seeds, comma-separated")
    p.add_argument("--aa", type=int, default=2, help="A/A ranges, on the first labs (2)")
    p.add_argument("--slowdown", type=int, default=25, help="the culprit's P%% (25)")
    p.add_argument("--commits", type=int, default=64, help="commits per lab (64)")
    p.add_argument("--dir", type=Path, default=Path("/tmp/kbisect-noisy-labs"), help="labs go here")
    p.add_argument("--json", action="store_true", help="one JSON object a job")
    p.add_argument(
        "--aa-only", action="store_true", help="only the A/A ranges, on the labs already in --dir"
    )
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    runs: list[Run] = []
    labs = []
    for seed in seeds:
        if args.aa_only:
            labs.append(args.dir / f"lab-{seed}")
            continue
        lab = _make_lab(args.dir / f"lab-{seed}", seed, args.slowdown, args.commits)
        labs.append(lab)
        truth = json.loads(Path(f"{lab}.truth.json").read_text())["culprit"]
        runs.append(_emit(_bisect(lab, "lab-good", "lab-bad", truth), args.json))
    for lab in labs[: args.aa]:
        culprit = json.loads(Path(f"{lab}.truth.json").read_text())["culprit"]
        runs.append(_emit(_bisect(lab, culprit, "lab-bad", None), args.json))
    right = sum(r.right for r in runs if r.kind == "culprit")
    wrong = sum(r.kind == "culprit" and not r.right and len(r.answer) == 40 for r in runs)
    aa = [r for r in runs if r.kind == "A/A"]
    culprits = len(seeds) if not args.aa_only else 0
    print(
        f"culprit named {right}/{culprits}, wrong commit {wrong}; "
        f"A/A no difference {sum(r.right for r in aa)}/{len(aa)}; "
        f"boots {sum(r.boots for r in runs)}, wall {sum(r.seconds for r in runs) / 60:.0f} min"
    )
    return 0


def _make_lab(dest: Path, seed: int, slowdown: int, commits: int) -> Path:
    argv = [*KBISECT, "lab", "create", str(dest), "--seed", str(seed), "--replace", "--quiet"]
    argv += ["--culprit", f"slowdown:{slowdown}", "--commits", str(commits)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return dest


def _bisect(lab: Path, good: str, bad: str, truth: str | None) -> Run:
    argv = [*KBISECT, "bisect", "--repo", str(lab), "--good", good, "--bad", bad]
    argv += ["--testcase", TESTCASE, "--metric", "throughput", "--json"]
    if truth is None:
        argv.append("--no-verify")
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"kbisect gave no report:\n{out.stdout}{out.stderr}") from None
    # The whole report stays beside the lab: its steps, boots and effect, for a note.
    kind = "culprit" if truth else "aa"
    Path(f"{lab}.{kind}.report.json").write_text(out.stdout)
    culprit = report.get("culprit")
    same = report.get("status") == "no-difference"
    answer = culprit or ("no difference" if same else str(report.get("message", "")))
    steps = report.get("steps", [])
    built = [s for s in steps if not str(s.get("note", "")).startswith("touches no file")]
    verified = bool((report.get("verification") or {}).get("commit"))
    effect = report.get("effect") or {}
    return Run(
        lab=lab.name,
        kind="culprit" if truth else "A/A",
        expected=truth or "no difference",
        answer=answer,
        right=(culprit == truth) if truth else same,
        boots=int(report.get("boots") or 0),
        builds=len(built) + verified,
        seconds=seconds,
        confidence=report.get("confidence"),
        effect=json.dumps(effect) if isinstance(effect, dict) else str(effect),
    )


def _emit(run: Run, as_json: bool) -> Run:
    if as_json:
        print(json.dumps(asdict(run)), flush=True)
    else:
        conf = "-" if run.confidence is None else f"{run.confidence:.4f}"
        print(
            f"{run.lab} {run.kind}: {run.answer} right={run.right} boots={run.boots} "
            f"builds={run.builds} wall={run.seconds:.0f}s confidence={conf} effect={run.effect}",
            flush=True,
        )
    return run


if __name__ == "__main__":
    sys.exit(main())
