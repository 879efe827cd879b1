"""benchmarks.noisy_labs without labs or QEMU: its options, what a --resume file lets it
skip, and the real drift load of benchmarks.host_drift (it ramps, stops, and never
outlives its parent)."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from benchmarks import host_drift, noisy_labs
from benchmarks.noisy_labs import Job, Run

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def test_the_new_options_parse() -> None:
    args = noisy_labs.parse_args([])
    assert (args.slowdown, args.drift, args.resume) == ([25], False, None)
    assert (args.drift_peak, args.drift_ramp, args.drift_limit) == (50, 5, 3)
    args = noisy_labs.parse_args(["--slowdown", "10", "25", "--drift", "--resume", "r.jsonl"])
    assert (args.slowdown, args.drift, args.resume) == ([10, 25], True, Path("r.jsonl"))


class FakeLabs:
    """_make_lab and _bisect without kbisect: each call recorded, every answer right."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[str] = []
        self.bisected: list[tuple[Job, str]] = []
        self.drifts: list[tuple[float, float, float]] = []
        self.delays: list[float] = []
        monkeypatch.setattr(noisy_labs, "_make_lab", self.make_lab)
        monkeypatch.setattr(noisy_labs, "_bisect", self.bisect)
        monkeypatch.setattr(host_drift, "load", self.load)

    def make_lab(self, dest: Path, seed: int, slowdown: int, commits: int) -> Path:
        self.made.append(dest.name)
        truth = {"culprit": f"{seed:020d}{slowdown:020d}"}
        Path(f"{dest}.truth.json").write_text(json.dumps(truth))
        return dest

    def bisect(self, lab: Path, job: Job, good: str, truth: str | None) -> Run:
        self.bisected.append((job, good))
        answer = truth or "no difference"
        run = Run(lab.name, job.kind, answer, answer, True, 8, 6, 60.0, 0.99, "{}", 0, 0, False)
        return replace(run, seed=job.seed, slowdown=job.slowdown, drift=job.drift, burst=job.burst)

    @contextmanager
    def load(self, peak: float, ramp: float, limit: float, delay: float = 0.0) -> Iterator[int]:
        self.drifts.append((peak, ramp, limit))
        self.delays.append(delay)
        yield 0


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_resumed_file_runs_only_the_jobs_not_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    labs = FakeLabs(monkeypatch)
    resume = tmp_path / "runs.jsonl"
    argv = ["--seeds", "1,2", "--aa", "1", "--slowdown", "25", "10", "--dir", str(tmp_path)]
    argv += ["--resume", str(resume)]
    first = noisy_labs.run_all(noisy_labs.parse_args(argv))
    # Per slowdown: culprits on labs 1 and 2, then A/A on lab 1 from its culprit.
    assert [(j.seed, j.slowdown, j.kind) for j, _ in labs.bisected] == [
        (1, 25, "culprit"),
        (2, 25, "culprit"),
        (1, 25, "A/A"),
        (1, 10, "culprit"),
        (2, 10, "culprit"),
        (1, 10, "A/A"),
    ]
    assert labs.bisected[2][1] == f"{1:020d}{25:020d}"  # the A/A range starts at the culprit
    made = [f"lab-{seed}-slowdown{slowdown}" for slowdown in (25, 10) for seed in (1, 2)]
    assert labs.made == made
    assert _rows(resume) == [asdict(r) for r in first]
    assert "slowdown=10%" in capsys.readouterr().out

    labs.made.clear()
    labs.bisected.clear()
    again = noisy_labs.run_all(noisy_labs.parse_args(argv))
    assert (labs.made, labs.bisected, again) == ([], [], first)
    assert capsys.readouterr().out.count("(resumed)") == 6

    # The last job's row lost (cut short by a killed session) and its lab gone: that job
    # alone runs, on a lab made again.
    text = resume.read_text().splitlines()
    resume.write_text("\n".join(text[:-1]) + '\n{"lab": "lab-1-slo')
    Path(tmp_path / "lab-1-slowdown10.truth.json").unlink()
    noisy_labs.run_all(noisy_labs.parse_args(argv))
    assert labs.made == ["lab-1-slowdown10"]
    assert labs.bisected == [(Job(1, 10, False, "A/A"), f"{1:020d}{10:020d}")]
    assert "not a JSON row" in capsys.readouterr().err


def test_a_row_keeps_the_job_s_boots_in_order_and_older_rows_load(tmp_path: Path) -> None:
    steps = [
        {"index": -1, "scores": [80.0, 79.0], "hosts": ["vm", "vm"], "boot_numbers": [1, 4]},
        {"index": 63, "scores": [60.0, 61.0], "hosts": ["vm", "vm"], "boot_numbers": [2, 3]},
        {"index": 31, "scores": [62.0], "hosts": ["vm"], "boot_numbers": [5]},
        {"index": 20, "scores": [], "hosts": [], "boot_numbers": []},  # same kernel
    ]
    steps[2]["repetitions"] = [[61.0, 62.0, 64.0]]  # the other steps from an older report
    assert noisy_labs.in_order(steps) == [
        (1, -1, 80.0, "vm", []),
        (2, 63, 60.0, "vm", []),
        (3, 63, 61.0, "vm", []),
        (4, -1, 79.0, "vm", []),
        (5, 31, 62.0, "vm", [61.0, 62.0, 64.0]),
    ]
    with pytest.raises(ValueError):  # a step whose lists disagree is no sequence
        noisy_labs.in_order([{"index": 3, "scores": [1.0], "hosts": [], "boot_numbers": [1]}])
    # a row written before the boots were kept still resumes
    run = Run("lab-1-slowdown25", "culprit", "x", "x", True, 8, 6, 60.0, 0.99, "{}", 1, 25, False)
    old = {k: v for k, v in asdict(run).items() if k not in ("boots_in_order", "same_kernel")}
    resume = tmp_path / "runs.jsonl"
    resume.write_text(json.dumps(old) + "\n")
    assert noisy_labs._load(resume) == {run.job: run}


def _quiet_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str
) -> tuple[FakeLabs, list[Run]]:
    """Lab 7's job on a quiet host, then again with these options; the second's runs."""
    labs = FakeLabs(monkeypatch)
    resume = tmp_path / "runs.jsonl"
    argv = ["--seeds", "7", "--aa", "0", "--dir", str(tmp_path), "--resume", str(resume)]
    noisy_labs.run_all(noisy_labs.parse_args(argv))
    assert labs.drifts == []
    return labs, noisy_labs.run_all(noisy_labs.parse_args([*argv, *options]))


def test_drift_is_part_of_the_key_and_reaches_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    drift = ["--drift", "--drift-peak", "50", "--drift-ramp", "2", "--drift-limit", "1"]
    labs, runs = _quiet_then(tmp_path, monkeypatch, *drift)
    assert [j for j, _ in labs.bisected] == [
        Job(7, 25, False, "culprit"),
        Job(7, 25, True, "culprit"),
    ]
    assert labs.drifts == [(0.5, 120, 3600)]
    assert runs[0].drift and " drift: " in capsys.readouterr().out.splitlines()[-1]


def test_a_burst_is_part_of_the_key_and_takes_every_core_from_its_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    labs, runs = _quiet_then(tmp_path, monkeypatch, "--burst", "30", "--burst-at", "45")
    assert [j for j, _ in labs.bisected] == [
        Job(7, 25, False, "culprit"),
        Job(7, 25, False, "culprit", 30.0),
    ]
    cores = os.cpu_count() or 1
    assert (labs.drifts, labs.delays) == ([(1.0, 0.0, 30.0)] * cores, [45.0] * cores)
    assert runs[0].burst == 30 and " burst 30s: " in capsys.readouterr().out.splitlines()[-1]


def test_the_load_waits_its_delay_before_it_starts() -> None:
    start = time.monotonic()
    with host_drift.load(peak=1.0, ramp=0.0, limit=5.0, grace=2.0, delay=1.5) as pid:
        idle = _window(pid, start, 0.5, 1.3)
        busy = _window(pid, start, 1.8, 2.6)
    assert idle < 0.2 < busy, (idle, busy)


def _cpu(pid: int) -> float:
    """Seconds of CPU `pid` has used (utime + stime in /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    utime, stime = stat.rsplit(")", 1)[1].split()[11:13]
    return (int(utime) + int(stime)) / TICKS


def _alive(pid: int) -> bool:
    """Running, not gone and not a zombie nobody reaps (PID 1 in a container may not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _window(pid: int, start: float, t0: float, t1: float) -> float:
    """CPU seconds `pid` used between t0 and t1 seconds after `start`."""
    time.sleep(max(0.0, start + t0 - time.monotonic()))
    before = _cpu(pid)
    time.sleep(max(0.0, start + t1 - time.monotonic()))
    return _cpu(pid) - before


def _nice(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split()[18]


def test_the_load_ramps_its_duty_cycle_and_is_gone_after_the_block() -> None:
    start = time.monotonic()
    with host_drift.load(peak=0.5, ramp=2.0, grace=2.0) as pid:
        assert _alive(pid)
        # at the priority of the jobs it is to slow: a niced load took nothing from a guest
        assert _nice(pid) == _nice(os.getpid())
        early = _window(pid, start, 0.4, 1.2)  # duty ~0.05 to 0.3: ~0.1 s expected
        late = _window(pid, start, 2.2, 3.0)  # duty 0.5: ~0.4 s expected
    assert late > 1.5 * early, (early, late)
    assert not _alive(pid)


def test_the_load_ends_itself_when_its_parent_dies() -> None:
    parent = (
        "import os, sys, time\n"
        "from benchmarks import host_drift\n"
        "load = host_drift.load(0.1, 1.0)  # kept: a collected one would stop it\n"
        "print(load.__enter__(), flush=True)\n"
        "sys.stdin.readline()\n"
        "os._exit(0)  # no finally: the load is left behind\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", parent], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    pid = int(proc.stdout.readline())
    time.sleep(0.5)
    assert _alive(pid)
    proc.stdin.close()
    proc.wait(5)
    assert _gone_within(pid, 5)


def test_the_load_ends_at_its_limit_or_once_orphaned() -> None:
    start = time.monotonic()
    host_drift.run(peak=0.2, ramp=0.0, limit=0.3, parent=os.getppid())
    assert 0.3 <= time.monotonic() - start < 1.0
    start = time.monotonic()
    host_drift.run(peak=0.2, ramp=0.0, limit=60, parent=-1)
    assert time.monotonic() - start < 0.1


def test_duty_ramps_linearly_then_holds() -> None:
    assert [host_drift.duty(t, 0.4, 10) for t in (0, 5, 10, 20)] == [0, 0.2, 0.4, 0.4]
    with pytest.raises(ValueError), host_drift.load(peak=1.5, ramp=1):
        pass


def test_stop_kills_what_ignores_terminate() -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(1, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline()
    start = time.monotonic()
    host_drift.stop(proc, grace=0.3)
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - start < 3
