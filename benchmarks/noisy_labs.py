"""Benchmark: real bisections on a noisy metric, on fresh labs, one job at a time.

Each lab's culprit is `--culprit slowdown:P` (read throughput about P% lower, no counter
moves; one set of labs for each `--slowdown P`), and the job bisects `--metric throughput`
on the `fast` profile through the local service, exactly as a user would. Then, for the
first `--aa` labs, a range with no culprit: from the culprit itself to lab-bad (two bad
commits), which must come out as "no difference". The lab's truth is read only here, to
score the answers and to pick the A/A range; the bisector never sees it. Nothing else
should run on the host meanwhile, unless `--drift`: then each job runs beside a bounded CPU
load that ramps up through it (benchmarks/host_drift.py), a real drift of the host; or
`--burst S`: every core busy for S seconds from `--burst-at` seconds into each job (a cron
job, a noisy neighbour: the wild boots of a disturbed host).
Prints one line a job (culprit, right, boots, builds, wall time, confidence) and keeps
each job's JSON report beside its lab (`lab-SEED-slowdownP.culprit.report.json`, `.aa.`,
`.drift` added with --drift). With `--resume FILE` each finished job is appended to FILE
and a rerun skips the jobs already there, so runs of hours finish across sessions. Run:
    .venv/bin/python -m benchmarks.noisy_labs [--seeds 101,102,103,104,105] [--aa 2]
        [--slowdown 25 10] [--drift | --burst 30] [--resume runs.jsonl]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmarks import host_drift
from benchmarks.results_file import append_row, read_rows

KBISECT = [sys.executable, "-m", "kbisect"]
BURST_AT = 75.0  # seconds into a job its --burst starts: its endpoints boot then (built by ~62 s)
TESTCASE = "nvme-snapshot-read"


BootRow = tuple[int, int, float, str, list[float]]  # Run.boots_in_order's entries


@dataclass(frozen=True)
class Job:
    """What a row is about; a resumed file holds at most one row for each."""

    seed: int
    slowdown: int
    drift: bool
    kind: str  # "culprit" or "A/A"
    burst: float = 0.0  # seconds every core was busy early in the job (--burst)


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
    seed: int
    slowdown: int
    drift: bool  # the job ran beside the host_drift load
    # Each boot of the job in its order: [boot number, the commit's place in the range
    # (-1 the old endpoint), score, VM host, its repetitions], to replay offline
    # (benchmarks.replay_lab). Rows from before it have none, or no repetitions.
    boots_in_order: list[BootRow] = field(default_factory=list)
    # The places of the commits judged the same kernel as their parent (touching no file
    # the config compiles): a replay must know them, or their neighbours stay apart.
    same_kernel: list[int] = field(default_factory=list)
    burst: float = 0.0  # --burst (rows from before it have none)

    @property
    def job(self) -> Job:
        return Job(self.seed, self.slowdown, self.drift, self.kind, self.burst)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="101,102,103,104,105", help="lab seeds, comma-separated")
    p.add_argument("--aa", type=int, default=2, help="A/A ranges, on the first labs (2)")
    p.add_argument(
        "--slowdown", type=int, nargs="+", default=[25], help="the culprit's P%%, each (25)"
    )
    p.add_argument("--commits", type=int, default=64, help="commits per lab (64)")
    p.add_argument("--dir", type=Path, default=Path("/tmp/kbisect-noisy-labs"), help="labs go here")
    p.add_argument("--json", action="store_true", help="one JSON object a job")
    p.add_argument(
        "--aa-only", action="store_true", help="only the A/A ranges, on the labs already in --dir"
    )
    p.add_argument("--drift", action="store_true", help="a ramping CPU load beside each job")
    peak, ramp, limit = host_drift.PEAK * 100, host_drift.RAMP / 60, host_drift.LIMIT / 3600
    p.add_argument(
        "--drift-peak", type=float, default=peak, help=f"its top, %% of one core ({peak:g})"
    )
    p.add_argument("--drift-ramp", type=float, default=ramp, help=f"minutes to reach it ({ramp:g})")
    p.add_argument(
        "--drift-limit", type=float, default=limit, help=f"hours before it ends itself ({limit:g})"
    )
    p.add_argument(
        "--burst", type=float, default=0.0, metavar="S", help="every core busy S seconds a job (0)"
    )
    p.add_argument(
        "--burst-at",
        type=float,
        default=BURST_AT,
        metavar="S",
        help=f"... from S s in ({BURST_AT:g})",
    )
    p.add_argument("--resume", type=Path, help="append each job here; skip the jobs already in it")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = run_all(args)
    for slowdown in args.slowdown:
        _summary([r for r in runs if r.slowdown == slowdown], slowdown, args.drift, args.burst)
    return 0


def run_all(args: argparse.Namespace) -> list[Run]:
    """Every job the arguments ask for, in order; those in --resume from there, not run."""
    seeds = [int(s) for s in args.seeds.split(",") if s]
    done = _load(args.resume)
    runs: list[Run] = []
    for slowdown in args.slowdown:
        culprits = [] if args.aa_only else [("culprit", seeds)]
        for kind, some in [*culprits, ("A/A", seeds[: args.aa])]:
            for seed in some:
                runs.append(_run(Job(seed, slowdown, args.drift, kind, args.burst), args, done))
    return runs


def _run(job: Job, args: argparse.Namespace, done: dict[Job, Run]) -> Run:
    if job in done:
        return _emit(done[job], args.json, resumed=True)
    lab = args.dir / f"lab-{job.seed}-slowdown{job.slowdown}"
    # A culprit job gets a fresh lab; an A/A one reuses it, unless its culprit job was
    # resumed from an earlier session whose lab is gone.
    if job.kind == "culprit" or not (args.aa_only or _truth_file(lab).exists()):
        _make_lab(lab, job.seed, job.slowdown, args.commits)
    truth = json.loads(_truth_file(lab).read_text())["culprit"]
    with _host(job, args):
        if job.kind == "culprit":
            run = _bisect(lab, job, "lab-good", truth)
        else:
            run = _bisect(lab, job, truth, None)
    if args.resume is not None:
        append_row(args.resume, asdict(run))
    return _emit(run, args.json)


def _truth_file(lab: Path) -> Path:
    return Path(f"{lab}.truth.json")


def _host(job: Job, args: argparse.Namespace) -> AbstractContextManager[object]:
    if job.burst:
        loads = ExitStack()
        for _ in range(os.cpu_count() or 1):  # one process a core: each takes one at most
            loads.enter_context(host_drift.load(1.0, 0.0, job.burst, delay=args.burst_at))
        return loads
    if not job.drift:
        return nullcontext()
    limit = args.drift_limit * 3600
    return host_drift.load(args.drift_peak / 100, args.drift_ramp * 60, limit)


def _load(path: Path | None) -> dict[Job, Run]:
    """The rows in a --resume file (a line cut short by a killed session is left out)."""
    if path is None:
        return {}
    names = {f.name for f in fields(Run)}
    done: dict[Job, Run] = {}
    for row in read_rows(path):
        if not names - {"boots_in_order", "same_kernel", "burst"} <= set(row) <= names:
            print(f"{path}: a row not of this benchmark, run again", file=sys.stderr)
            continue
        run = Run(**row)
        done[run.job] = run
    return done


def _make_lab(dest: Path, seed: int, slowdown: int, commits: int) -> Path:
    argv = [*KBISECT, "lab", "create", str(dest), "--seed", str(seed), "--replace", "--quiet"]
    argv += ["--culprit", f"slowdown:{slowdown}", "--commits", str(commits)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return dest


def _bisect(lab: Path, job: Job, good: str, truth: str | None) -> Run:
    argv = [*KBISECT, "bisect", "--repo", str(lab), "--good", good, "--bad", "lab-bad"]
    argv += ["--testcase", TESTCASE, "--metric", "throughput", "--json", "--no-explain"]
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
    name = ("culprit" if truth else "aa") + (".drift" if job.drift else "")
    name += f".burst{job.burst:g}" if job.burst else ""
    Path(f"{lab}.{name}.report.json").write_text(out.stdout)
    culprit = report.get("culprit")
    same = report.get("status") == "no-difference"
    answer = culprit or ("no difference" if same else str(report.get("message", "")))
    steps = report.get("steps", [])
    built = [s for s in steps if not str(s.get("note", "")).startswith("touches no file")]
    verified = bool((report.get("verification") or {}).get("commit"))
    effect = report.get("effect") or {}
    return Run(
        lab=lab.name,
        kind=job.kind,
        expected=truth or "no difference",
        answer=answer,
        right=(culprit == truth) if truth else same,
        boots=int(report.get("boots") or 0),
        builds=len(built) + verified,
        seconds=seconds,
        confidence=report.get("confidence"),
        effect=json.dumps(effect) if isinstance(effect, dict) else str(effect),
        seed=job.seed,
        slowdown=job.slowdown,
        drift=job.drift,
        boots_in_order=in_order(steps),
        same_kernel=sorted(s["index"] for s in steps if s.get("source") == "same-kernel"),
        burst=job.burst,
    )


def in_order(steps: list[dict[str, Any]]) -> list[BootRow]:
    """Every boot of a report's steps as (boot number, place, score, host, repetitions),
    in order (no repetitions from a report that kept none)."""
    boots: list[BootRow] = []
    for s in steps:
        at, scores, hosts = s.get("boot_numbers", []), s.get("scores", []), s.get("hosts", [])
        reps = s.get("repetitions") or [[] for _ in at]
        boots += zip(at, [s["index"]] * len(at), scores, hosts, reps, strict=True)
    return sorted(boots)


def _emit(run: Run, as_json: bool, resumed: bool = False) -> Run:
    if as_json:
        print(json.dumps(asdict(run)), flush=True)
    else:
        conf = "-" if run.confidence is None else f"{run.confidence:.4f}"
        host = (" drift" if run.drift else "") + (f" burst {run.burst:g}s" if run.burst else "")
        print(
            f"{run.lab} {run.kind} slowdown={run.slowdown}%{host}: {run.answer} "
            f"right={run.right} boots={run.boots} builds={run.builds} wall={run.seconds:.0f}s "
            f"confidence={conf} effect={run.effect}" + (" (resumed)" if resumed else ""),
            flush=True,
        )
    return run


def _summary(runs: list[Run], slowdown: int, drift: bool, burst: float = 0.0) -> None:
    culprits = [r for r in runs if r.kind == "culprit"]
    right = sum(r.right for r in culprits)
    wrong = sum(not r.right and len(r.answer) == 40 for r in culprits)
    aa = [r for r in runs if r.kind == "A/A"]
    print(
        f"slowdown {slowdown}%{' with drift' if drift else ''}"
        f"{f' with a {burst:g} s burst' if burst else ''}: "
        f"culprit named {right}/{len(culprits)}, wrong commit {wrong}; "
        f"A/A no difference {sum(r.right for r in aa)}/{len(aa)}; "
        f"boots {sum(r.boots for r in runs)}, wall {sum(r.seconds for r in runs) / 60:.0f} min"
    )


if __name__ == "__main__":
    sys.exit(main())
