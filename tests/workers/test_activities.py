"""The activities as classes over fake backends, run in Temporal's ActivityEnvironment
(no server): typed failures, heartbeats, and how each outcome becomes a result."""

import dataclasses
import subprocess
import threading
import time
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from kbisect.backends import Progress
from kbisect.builders.patched_commit import Patch, store_patch
from kbisect.contract import BuildRequest, ErrorType, Fixup, TestRequest, TestStatus
from kbisect.errors import DiskFullError, KernelBuildError
from kbisect.infra import qemu
from kbisect.infra.git import LAB_IDENTITY, Git
from kbisect.model import Artifact, BuildSpec, Disk, GuestImage, GuestRun, Outcome
from kbisect.settings import Settings
from kbisect.testcases import duet
from kbisect.workers import activities
from kbisect.workers.activities import BuildActivities, VmActivities
from kbisect.workflows.bisect_types import BisectRequest, DuetRequest
from kbisect.workflows.sweep_types import is_cannot_test

ART = Artifact(commit="c", tree="t", config_hash="h", kernel="/k", config="/c", build_log="/l")


class FakeBuilder:
    def __init__(self, error: Exception | None = None, seconds: float = 0.0) -> None:
        self.error, self.seconds, self.calls = error, seconds, 0
        self.built: list[str] = []  # the commits handed to the builder

    def build(self, repo: Path, commit: str, spec: BuildSpec, progress: Progress) -> Artifact:
        self.calls += 1
        self.built.append(commit)
        progress("compiling kernel/fork.o")
        time.sleep(self.seconds)
        if self.error:
            raise self.error
        return ART


class FakeMachine:
    name = "fake"
    host = "fake-host"
    pin: tuple[int, ...] = ()
    cpus = 1

    def __init__(self, run: GuestRun, together: threading.Barrier | None = None) -> None:
        self.result = run
        self.together = together  # each run waits here for the other guest of a duet
        self.pins: list[tuple[int, ...]] = []  # shared by copies: each run's CPUs

    def run(
        self,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str = "",
        progress: Progress = lambda _: None,
    ) -> GuestRun:
        self.pins.append(self.pin)
        if self.together is not None:
            self.together.wait()  # both guests of the duet run at once, or this times out
        return self.result


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "repo"
    env = {**LAB_IDENTITY, "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    hashes = []
    for i in range(4):
        (path / "f").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(path), "add", "f"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-qm", f"c{i}"], check=True, env=env)
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        hashes.append(out.stdout.strip())
    return path, hashes


def _settings(tmp_path: Path) -> Settings:
    return Settings(cache=tmp_path / "cache", data=tmp_path / "data")


def test_validate_returns_the_range(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, h = repo
    acts = BuildActivities(_settings(tmp_path), FakeBuilder())
    req = BisectRequest(repo=str(path), good=["main~3"], bad="main", testcase="nvme-snapshot-read")
    job = ActivityEnvironment().run(acts.validate_job, req)
    assert job.old == [h[0]] and job.new == h[3]
    assert job.order == [h[3], h[2], h[1]] and job.parent_index == [[1], [2], []]
    assert job.subjects[h[2]] == "c2" and job.old_subjects == {h[0]: "c0"}


@pytest.mark.parametrize(
    ("good", "bad", "mode", "words"),
    [
        ("nope", "main", "regression", "unknown revision 'nope'"),
        ("main", "main~3", "regression", "is not an ancestor"),
        ("main~3", "main", "fix", "must be an ancestor"),
        ("main", "main", "regression", "same commit"),
        ("main~1", "main", "bisect", "unknown mode"),
    ],
)
def test_validate_refuses_bad_input_without_retry(
    repo: tuple[Path, list[str]], tmp_path: Path, good: str, bad: str, mode: str, words: str
) -> None:
    path, _ = repo
    acts = BuildActivities(_settings(tmp_path), FakeBuilder())
    req = BisectRequest(repo=str(path), good=[good], bad=bad, testcase="nvme-snapshot-read")
    req.mode = mode
    with pytest.raises(ApplicationError) as err:
        ActivityEnvironment().run(acts.validate_job, req)
    assert err.value.type == ErrorType.USER and err.value.non_retryable
    assert words in err.value.message


def test_a_commit_that_does_not_build_is_a_result(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, h = repo
    builder = FakeBuilder(KernelBuildError("kernel does not build: x.c:1: error", "/log"))
    acts = BuildActivities(_settings(tmp_path), builder)
    result = ActivityEnvironment().run(
        acts.build_kernel, BuildRequest(str(path), h[1], "nvme-snapshot-read")
    )
    assert not result.ok and result.log == "/log" and "x.c:1" in result.error
    assert result.subject == "c1"


def test_a_fixup_is_built_where_it_applies_and_said_so(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """--fixup: the build of a commit the fix applies to builds that commit with it (a
    commit of its own beside the user's); where the commit holds it already, the commit."""
    path, h = repo
    settings = _settings(tmp_path)
    git = Git(path)
    fix = Patch("fix.diff", "fix.diff", git.patch(h[2]))  # f: "1" -> "2"
    stored = Fixup("fix.diff", store_patch(fix, settings.cache))
    builder = FakeBuilder()
    acts = BuildActivities(settings, builder)
    for commit, with_it in ((h[1], True), (h[2], False)):
        req = BuildRequest(str(path), commit, "nvme-snapshot-read", fixups=[stored])
        result = ActivityEnvironment().run(acts.build_kernel, req)
        assert result.ok and result.commit == commit
        assert result.fixups == (["fix.diff"] if with_it else []), result
    patched, plain = builder.built
    assert git.resolve(f"{patched}^") == h[1] and git.tree_of(patched) == git.tree_of(h[2])
    assert plain == h[2]
    # a host that cannot read the stored fixup says so at validation, a host problem
    gone = BisectRequest(str(path), ["main~3"], "main", "nvme-snapshot-read",
                         fixups=[Fixup("fix.diff", str(tmp_path / "gone.patch"))])  # fmt: skip
    with pytest.raises(ApplicationError) as err:
        ActivityEnvironment().run(acts.validate_job, gone)
    assert err.value.type == ErrorType.INFRA and "--fixup fix.diff" in err.value.message


def test_a_host_problem_is_a_retryable_failure(
    repo: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, h = repo
    acts = BuildActivities(_settings(tmp_path), FakeBuilder(DiskFullError("only 1 MiB free")))
    with pytest.raises(ApplicationError) as err:
        ActivityEnvironment().run(
            acts.build_kernel, BuildRequest(str(path), h[1], "nvme-snapshot-read")
        )
    assert err.value.type == ErrorType.INFRA and not err.value.non_retryable


def test_a_long_build_heartbeats_its_progress(
    repo: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(activities, "HEARTBEAT_EVERY", 0.05)
    path, h = repo
    acts = BuildActivities(_settings(tmp_path), FakeBuilder(seconds=0.5))
    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.extend(details)
    result = env.run(acts.build_kernel, BuildRequest(str(path), h[1], "nvme-snapshot-read"))
    assert result.ok and result.artifact == ART
    assert "compiling kernel/fork.o" in beats


def _vm(tmp_path: Path, run: GuestRun) -> VmActivities:
    return VmActivities(_settings(tmp_path), FakeMachine(run))


def _request() -> TestRequest:
    return TestRequest("r", "c" * 40, "nvme-snapshot-read", "fast", 2, ART)


@pytest.mark.parametrize(
    ("outcome", "status"),
    [(Outcome.PANIC, TestStatus.BOOT_FAILED), (Outcome.HANG, TestStatus.BOOT_FAILED)],
)
def test_a_kernel_that_does_not_boot_is_a_result(
    cache: Path, tmp_path: Path, outcome: Outcome, status: TestStatus
) -> None:
    run = GuestRun(outcome, [], str(tmp_path / "console.log"), 3.0, "tcg", "Kernel panic")
    result = ActivityEnvironment().run(_vm(tmp_path, run).run_test, _request())
    assert result.status == status and "Kernel panic" in result.error
    assert result.console == str(tmp_path / "console.log")


@pytest.mark.parametrize(
    ("status", "cannot"),
    [(125, True), (1, False)],  # 125: `git bisect run`'s "cannot test"; 1: the script failed
)
def test_a_testcase_saying_it_cannot_test_gives_the_kernel_up(
    cache: Path, tmp_path: Path, status: int, cannot: bool
) -> None:
    records: list[dict[str, object]] = [{"event": "booted"}, {"event": "done", "status": status}]
    run = GuestRun(qemu.classify_run(records, "", True)[0], records, "/console", 3.0, "tcg", "why")
    result = ActivityEnvironment().run(_vm(tmp_path, run).run_test, _request())
    assert result.status == TestStatus.TESTCASE_FAILED
    assert is_cannot_test(result.error) is cannot and "why" in result.error
    assert result.console == "/console"  # where to read why


def test_a_scored_run_carries_medians_and_samples(cache: Path, tmp_path: Path) -> None:
    records: list[dict[str, object]] = [
        {"event": "metric", "rep": r, "name": "avg_read_sectors", "value": v}
        for r, v in ((1, 4.0), (2, 8.0), (3, 10.0))  # rep 1: the manifest's warm-up
    ]
    records.append({"event": "done", "status": 0})
    run = GuestRun(Outcome.SUCCESS, records, "/console", 4.0, "tcg")
    result = ActivityEnvironment().run(_vm(tmp_path, run).run_test, _request())
    assert result.status == TestStatus.OK
    assert result.values["avg_read_sectors"] == 9.0 and result.samples == [8.0, 10.0]
    assert result.warmup == [4.0] and result.samples_of("avg_read_sectors") == [8.0, 10.0]
    assert result.host == "fake-host"  # the engine judges it against this host's references


def test_a_jobs_own_repetitions_are_all_samples(cache: Path, tmp_path: Path) -> None:
    """A job's repetitions, not the manifest's 3, bound the reps a boot's samples take."""
    records: list[dict[str, object]] = [
        {"event": "metric", "rep": r, "name": "avg_read_sectors", "value": float(r)}
        for r in range(1, 9)  # the warm-up, 6 repetitions, and one the boot never ran
    ]
    run = GuestRun(Outcome.SUCCESS, [*records, {"event": "done", "status": 0}], "/c", 4.0, "tcg")
    req = TestRequest("r", "c" * 40, "nvme-snapshot-read", "fast", 6, ART)
    result = ActivityEnvironment().run(_vm(tmp_path, run).run_test, req)
    assert result.warmup == [1.0] and result.samples == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


@pytest.mark.parametrize(
    ("metric", "warmup", "samples", "alone"),
    [
        ("avg_read_sectors", [], [4.0, 8.0, 10.0], False),  # exact: no warm-up, host shared
        ("throughput", [4.0], [8.0, 10.0], True),  # a timing: warm-up, the host alone
        ("", [4.0], [8.0, 10.0], True),  # a job from before the metric was sent
    ],
)
def test_a_job_judging_an_exact_metric_boots_without_warm_up_or_the_host_alone(
    cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    metric: str,
    warmup: list[float],
    samples: list[float],
    alone: bool,
) -> None:
    from contextlib import nullcontext

    from kbisect.testcases import runner

    locks: list[bool] = []

    def for_guest(exclusive: bool, *_: object) -> "nullcontext[None]":
        locks.append(exclusive)
        return nullcontext()

    monkeypatch.setattr(runner.host_lock, "for_guest", for_guest)
    records: list[dict[str, object]] = [
        {"event": "metric", "rep": r, "name": n, "value": v}
        for r, v in ((1, 4.0), (2, 8.0), (3, 10.0))
        for n in ("avg_read_sectors", "throughput")
    ]
    run = GuestRun(Outcome.SUCCESS, records, "/console", 4.0, "tcg")
    # the fake's reps 1-3 are within either boot's: 3, or a warm-up and 3
    req = TestRequest("r", "c" * 40, "nvme-snapshot-read", "fast", 3, ART, metric=metric)
    result = ActivityEnvironment().run(_vm(tmp_path, run).run_test, req)
    assert result.warmup == warmup and result.samples_of("throughput") == samples
    assert locks == [alone]


def _scored_run() -> GuestRun:
    records: list[dict[str, object]] = [
        {"event": "metric", "rep": r, "name": n, "value": v}
        for r, v in ((1, 4.0), (2, 8.0), (3, 10.0))
        for n in ("avg_read_sectors", "throughput")
    ]
    return GuestRun(Outcome.SUCCESS, [*records, {"event": "done", "status": 0}], "/c", 4.0, "tcg")


def test_a_duet_boots_both_kernels_at_once_each_on_half_the_reserved_cpus(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import nullcontext

    locks: list[tuple[bool, tuple[int, ...]]] = []

    def for_guest(exclusive: bool, pinned: tuple[int, ...], *_: object) -> "nullcontext[None]":
        locks.append((exclusive, tuple(pinned)))
        return nullcontext()

    monkeypatch.setattr(duet.host_lock, "for_guest", for_guest)
    machine = FakeMachine(_scored_run(), threading.Barrier(2, timeout=10))
    machine.pin = (0, 1, 2, 3)
    tests = [dataclasses.replace(_request(), commit=c * 40, metric="throughput") for c in "ab"]
    vm = VmActivities(_settings(tmp_path), machine)
    results = ActivityEnvironment().run(vm.run_duet, DuetRequest(tests)).results
    assert [r.commit for r in results] == ["a" * 40, "b" * 40]
    assert [(r.status, r.error) for r in results] == [(TestStatus.OK, "")] * 2
    assert [r.samples_of("throughput") for r in results] == [[8.0, 10.0]] * 2
    assert sorted(machine.pins) == [(0, 1), (2, 3)]  # a half each, never the same core
    assert locks == [(True, (0, 1, 2, 3))]  # the reserved CPUs held once, for both guests


def test_a_duet_on_a_worker_without_room_for_two_guests_fails_the_job(
    cache: Path, tmp_path: Path
) -> None:
    machine = FakeMachine(_scored_run())
    machine.pin = (1,)  # --measure-cpus 1: one guest's worth
    vm = VmActivities(_settings(tmp_path), machine)
    with pytest.raises(ApplicationError) as err:
        ActivityEnvironment().run(vm.run_duet, DuetRequest([_request(), _request()]))
    assert err.value.type == ErrorType.USER and err.value.non_retryable
    assert "--duets needs a VM worker whose --measure-cpus hold two guests" in err.value.message
    assert machine.pins == []  # nothing booted
