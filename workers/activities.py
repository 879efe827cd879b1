"""Thin activity wrappers: validate a job, build a commit, run a testcase.

Errors become data or typed failures here: a commit that does not build or boot is a
result (the workflow skips it); bad input is a non-retryable UserError; a host problem
is a retryable InfraError.
"""

import concurrent.futures
import contextlib
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.contract import (
    BUILD,
    PREPARE_VERIFY,
    TEST,
    VALIDATE,
    BisectRequest,
    BuildRequest,
    BuildResult,
    TestRequest,
    TestResult,
    ValidatedJob,
    VerifyCommit,
    VerifyRequest,
)
from kbisect.errors import (
    BootError,
    InfraError,
    KernelBuildError,
    TestcaseFailedError,
    UserError,
)
from kbisect.git import Git
from kbisect.infra.qemu import QemuMachine
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec, profile, run_testcase
from kbisect.verify_commit import make_verify_commit

P = ParamSpec("P")
R = TypeVar("R")
HEARTBEAT_EVERY = 10.0
# Subjects of a larger range would take the job's first payload near Temporal's 2 MB limit.
MAX_SUBJECTS = 5000
# Builds at once in this process (`kbisect worker --builds N`); validation is not counted.
_build_slots = threading.BoundedSemaphore(1)


def set_build_concurrency(builds: int) -> None:
    global _build_slots
    _build_slots = threading.BoundedSemaphore(max(1, builds))


def typed_failures(fn: Callable[P, R]) -> Callable[P, R]:
    """UserError -> non-retryable failure; InfraError -> retryable failure, one line each."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise ApplicationError(str(exc), type="UserError", non_retryable=True) from exc
        except InfraError as exc:
            raise ApplicationError(str(exc), type="InfraError") from exc

    return wrapper


def with_heartbeats(work: Callable[[Callable[[str], None]], R]) -> R:
    """Run work in a helper thread; heartbeat from the activity thread with its progress.

    When the activity is cancelled (job cancelled, worker shutting down), the next progress
    report raises, so the work stops and kills its make or QEMU instead of running on.
    """
    latest = ["started"]
    lock = threading.Lock()
    stop = threading.Event()

    def report(text: str) -> None:
        if stop.is_set():
            raise InfraError("stopped: the job was cancelled or the worker is shutting down")
        with lock:
            latest[0] = text

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(work, report)
    try:
        while True:
            try:
                return future.result(timeout=HEARTBEAT_EVERY)
            except concurrent.futures.TimeoutError:
                with lock:
                    activity.heartbeat(latest[0])
    except BaseException:
        stop.set()
        with contextlib.suppress(BaseException):
            future.result(timeout=30)  # let it kill its subprocesses
        raise
    finally:
        pool.shutdown(wait=False)


@activity.defn(name=VALIDATE)
@typed_failures
def validate_job(req: BisectRequest) -> ValidatedJob:
    git = Git(Path(req.repo))
    git.check_repo()
    if req.mode not in ("regression", "fix"):
        raise UserError(f"unknown mode {req.mode!r}: use regression or fix")
    if not req.good:
        raise UserError("give at least one --good revision")
    goods = [git.resolve(g) for g in req.good]
    bad = git.resolve(req.bad)
    manifest = manifests.load(req.testcase)
    prof = profile(req.profile or manifest.profile)
    if req.mode == "regression":
        old, new = goods, bad
        for g in goods:
            if not git.is_ancestor(g, bad):
                raise UserError(
                    f"good {g[:12]} is not an ancestor of bad {bad[:12]}: swap them, or pass "
                    "--mode fix if the newer revision is the good one"
                )
    else:
        if len(goods) != 1:
            raise UserError("fix mode takes one --good (the fixed, newer revision)")
        old, new = [bad], goods[0]
        if not git.is_ancestor(bad, new):
            raise UserError(
                f"in fix mode bad {bad[:12]} (still broken) must be an ancestor of good "
                f"{new[:12]} (fixed): swap them, or drop --mode fix"
            )
    if new in old:
        raise UserError("good and bad are the same commit: nothing to bisect")
    order, parent_index, subjects = _range(git, old, new)
    metric = manifest.metrics[manifest.primary]
    return ValidatedJob(
        old=old,
        new=new,
        order=order,
        parent_index=parent_index,
        subjects=subjects,
        testcase=manifest.name,
        primary=manifest.primary,
        unit=metric.unit,
        better=metric.better.value,
        profile=prof.name,
        repetitions=req.repetitions or manifest.repetitions,
        test_timeout=manifest.timeout_for(req.repetitions or manifest.repetitions),
        old_subjects={o: git.commit_info(o).subject for o in old},
    )


def _range(git: Git, old: list[str], new: str) -> tuple[list[str], list[list[int]], dict[str, str]]:
    """The commits in new but not old: hashes newest first, parents as indices, subjects
    (only for ranges small enough to carry them; builds report the others)."""
    excluded = [f"^{o}" for o in old]
    out = git.run("rev-list", "--topo-order", "--parents", new, *excluded, "--")
    rows = [line.split() for line in out.splitlines() if line.strip()]
    order = [r[0] for r in rows]
    index = {h: i for i, h in enumerate(order)}
    parent_index = [[index[p] for p in r[1:] if p in index] for r in rows]
    subjects: dict[str, str] = {}
    if len(order) <= MAX_SUBJECTS:
        log = git.run("log", "--format=%H%x00%s", "--topo-order", new, *excluded, "--")
        subjects = dict(line.split("\0", 1) for line in log.splitlines() if "\0" in line)
    return order, parent_index, subjects


@activity.defn(name=BUILD)
@typed_failures
def build_kernel(req: BuildRequest) -> BuildResult:
    spec = build_spec(manifests.load(req.testcase))

    subject = Git(Path(req.repo)).commit_info(req.commit).subject

    def work(report: Callable[[str], None]) -> BuildResult:
        report("waiting for a build slot")
        try:
            with _build_slots:
                art = KernelBuilder().build(Path(req.repo), req.commit, spec, report)
        except KernelBuildError as exc:
            return BuildResult(
                commit=req.commit, ok=False, error=str(exc), log=exc.log_path, subject=subject
            )
        return BuildResult(
            commit=req.commit,
            ok=True,
            artifact=art,
            log=art.build_log,
            seconds=art.seconds,
            cached=art.cached,
            subject=subject,
        )

    return with_heartbeats(work)


@activity.defn(name=TEST)
@typed_failures
def run_test(req: TestRequest) -> TestResult:
    manifest = manifests.load(req.testcase)

    def work(report: Callable[[str], None]) -> TestResult:
        try:
            r = run_testcase(
                manifest, req.artifact, QemuMachine(), req.profile, req.repetitions, report
            )
        except BootError as exc:
            return TestResult(
                commit=req.commit, status="boot-failed", error=str(exc), console=exc.console_path
            )
        except TestcaseFailedError as exc:
            return TestResult(
                commit=req.commit,
                status="testcase-failed",
                error=str(exc),
                console=exc.console_path,
            )
        return TestResult(
            commit=req.commit,
            status="ok",
            values={k: m.value for k, m in r.score.metrics.items()},
            samples=r.score.primary_metric.samples,
            console=r.run.console,
            seconds=r.run.seconds,
        )

    return with_heartbeats(work)


@activity.defn(name=PREPARE_VERIFY)
@typed_failures
def prepare_verify(req: VerifyRequest) -> VerifyCommit:
    return make_verify_commit(Git(Path(req.repo)), req.change, req.onto, req.revert)
