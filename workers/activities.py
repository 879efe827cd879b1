"""The activities: validate a job, build a commit, write a verify commit, run a testcase.

Classes constructed with their settings and backends (a Builder, a Machine), so a second
backend is a new class and the activities are unit-testable without a server. Errors
become data or typed failures here: a commit that does not build or boot is a result
(the workflow skips it); bad input is a non-retryable UserError; a host problem is a
retryable InfraError. Every classification is logged with the commit, so a person can
see why a commit was skipped.
"""

import concurrent.futures
import contextlib
import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from kbisect.backends import Builder, Machine
from kbisect.builders import artifact_cache, artifact_store, kconfig, prebuilt
from kbisect.builders.backport_found import change_to_take
from kbisect.builders.backport_plan import plan_backport
from kbisect.builders.diff_functions import changed_functions
from kbisect.builders.patched_commit import stored_patch, with_fixups
from kbisect.builders.sources import inert_commits, read_sources
from kbisect.builders.verify_commit import make_verify_commit
from kbisect.contract import (
    BACKPORT_CHANGE,
    BUILD,
    CHANGED_FUNCTIONS,
    CLASSIFY,
    DUET,
    EXPLAIN,
    PLAN_BACKPORT,
    PREPARE_VERIFY,
    TEST,
    TRACE,
    VALIDATE,
    VALIDATE_SWEEP,
    BuildRequest,
    BuildResult,
    ErrorType,
    Mode,
    TestRequest,
    TestResult,
    TestStatus,
    TraceRequest,
    TraceResult,
    ValidatedJob,
)
from kbisect.errors import (
    BootError,
    CannotTestError,
    InfraError,
    KernelBuildError,
    TestcaseFailedError,
    UserError,
)
from kbisect.infra.git import Git
from kbisect.model import Artifact
from kbisect.settings import Settings
from kbisect.testcases import duet
from kbisect.testcases import manifest as manifests
from kbisect.testcases.explain_run import explain_boot, explain_spec
from kbisect.testcases.runner import build_spec, run_testcase
from kbisect.testcases.trace_run import trace_testcase
from kbisect.workers.validation import validate, validate_sweep
from kbisect.workflows.backport_types import BackportPlan, BackportRequest
from kbisect.workflows.bisect_types import (
    BisectRequest,
    ClassifyRequest,
    ClassifyResult,
    DuetRequest,
    DuetResult,
    VerifyCommit,
    VerifyRequest,
)
from kbisect.workflows.explain_types import (
    ChangedFunctionsRequest,
    ExplainBootRequest,
    ExplainBootResult,
)
from kbisect.workflows.investigation_types import BackportChange, BackportChangeRequest
from kbisect.workflows.sweep_types import SweepJob, SweepRequest, cannot_test

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
HEARTBEAT_EVERY = 10.0


def typed_failures(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """UserError -> non-retryable failure; InfraError -> retryable failure, one line each."""

    def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(self, *args, **kwargs)
        except UserError as exc:
            activity.logger.warning("bad input, the job fails: %s", exc)
            raise ApplicationError(str(exc), type=ErrorType.USER, non_retryable=True) from exc
        except InfraError as exc:
            activity.logger.warning("host problem, retried (never a verdict): %s", exc)
            raise ApplicationError(str(exc), type=ErrorType.INFRA) from exc

    # wraps: Temporal reads the argument types through __wrapped__.
    return cast(Callable[Concatenate[S, P], R], functools.wraps(fn)(wrapper))


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


def heartbeating(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Git work on a build host, run under with_heartbeats: a host that dies mid-way is
    noticed at the heartbeat timeout and its work retried elsewhere, not at the end of
    the ten-minute GIT_TIMEOUT (a killed build worker held a job that long)."""

    def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return with_heartbeats(lambda _report: fn(self, *args, **kwargs))

    return cast(Callable[Concatenate[S, P], R], functools.wraps(fn)(wrapper))


class BuildActivities:
    """Git and kernel builds: the build queue's activities."""

    def __init__(self, settings: Settings, builder: Builder, builds: int = 1) -> None:
        self.settings = settings
        self.builder = builder
        self.store = artifact_store.from_settings(settings)
        # Builds at once in this process (`kbisect worker --builds N`); git work is not
        # counted, so validation never waits behind a build.
        self._slots = threading.BoundedSemaphore(max(1, builds))

    @activity.defn(name=VALIDATE)
    @typed_failures
    @heartbeating
    def validate_job(self, req: BisectRequest) -> ValidatedJob:
        job = validate(req)
        activity.logger.info(
            "validated: %d commits between %s and %s",
            len(job.order),
            ",".join(o[:12] for o in job.old),
            job.new[:12],
        )
        return job

    @activity.defn(name=VALIDATE_SWEEP)
    @typed_failures
    @heartbeating
    def validate_sweep(self, req: SweepRequest) -> SweepJob:
        job = validate_sweep(req)
        activity.logger.info(
            "sweep validated: %d kernels, testcases %s",
            len(job.kernels),
            ",".join(t.name for t in job.testcases),
        )
        return job

    @activity.defn(name=BUILD)
    @typed_failures
    def build_kernel(self, req: BuildRequest) -> BuildResult:
        spec_of = explain_spec if req.explain else build_spec
        spec = spec_of(
            manifests.load(req.testcase, Path(req.repo)), kconfig.stored_config(req.config)
        )
        if req.aligned:
            spec = kconfig.aligned(spec)
        subject = Git(Path(req.repo)).commit_info(req.commit).subject
        activity.logger.info("build %s %s: start", req.commit[:12], subject)

        def work(report: Callable[[str], None]) -> BuildResult:
            built, applied = req.commit, []  # or with the job's fixups, where they apply
            if req.fixups:
                fixups = [stored_patch(f.path, f.name) for f in req.fixups]
                patched = with_fixups(Git(Path(req.repo)), req.commit, fixups)
                built, applied = patched.tip, [p.source for p in patched.patches]
                activity.logger.info("build %s: with fixups %s", req.commit[:12], applied)
            report("waiting for a build slot")
            try:
                with self._slots:
                    art = self.builder.build(Path(req.repo), built, spec, report)
            except KernelBuildError as exc:
                activity.logger.info(
                    "build %s: the commit does not build (skip): %s", req.commit[:12], exc
                )
                return BuildResult(
                    commit=req.commit,
                    ok=False,
                    error=str(exc),
                    log=exc.log_path,
                    subject=subject,
                    fixups=applied,
                )
            activity.logger.info(
                "build %s: done in %.0f s%s", req.commit[:12], art.seconds, " (cached)" * art.cached
            )
            if self.store is not None and art.prebuilt:
                art = prebuilt.as_cache_entry(art)  # VM hosts lack the package or file
            if self.store is not None and self.store.publish(art):
                activity.logger.info(
                    "build %s: put in the store %s", req.commit[:12], self.store.redacted
                )
            return BuildResult(
                commit=req.commit,
                ok=True,
                artifact=art,
                log=art.build_log,
                seconds=art.seconds,
                cached=art.cached,
                subject=subject,
                host=self.settings.this_host,
                fixups=applied,
            )

        return with_heartbeats(work)

    @activity.defn(name=CLASSIFY)
    @typed_failures
    @heartbeating
    def classify_commits(self, req: ClassifyRequest) -> ClassifyResult:
        lists = [read_sources(p) for p in req.sources]
        if not lists or not all(lists):  # built on another host, or an older cache entry
            activity.logger.info("no compiled-file lists here: every commit gets a build")
            return ClassifyResult(inert={})
        compiled = set().union(*lists)
        inert = inert_commits(Git(Path(req.repo)), req.commits, compiled)
        activity.logger.info(
            "%d of %d commits touch none of the %d files the config compiles",
            len(inert),
            len(req.commits),
            len(compiled),
        )
        return ClassifyResult(inert=inert, compiled=len(compiled))

    @activity.defn(name=PLAN_BACKPORT)
    @typed_failures
    @heartbeating
    def plan_backport(self, req: BackportRequest) -> BackportPlan:
        plan = plan_backport(req)
        activity.logger.info("backport of %s to %s: %s", req.change[:12], req.target[:12],
                             plan.message)  # fmt: skip
        return plan

    @activity.defn(name=BACKPORT_CHANGE)
    @typed_failures
    @heartbeating
    def backport_change(self, req: BackportChangeRequest) -> BackportChange:
        change, revert = change_to_take(req.repo, req.culprit, req.mode == Mode.REGRESSION)
        return BackportChange(change, revert)

    @activity.defn(name=CHANGED_FUNCTIONS)
    @typed_failures
    @heartbeating
    def changed_functions(self, req: ChangedFunctionsRequest) -> list[str]:
        return changed_functions(Git(Path(req.repo)), req.parent, req.culprit)

    @activity.defn(name=PREPARE_VERIFY)
    @typed_failures
    @heartbeating
    def prepare_verify(self, req: VerifyRequest) -> VerifyCommit:
        made = make_verify_commit(Git(Path(req.repo)), req.change, req.onto, req.revert)
        activity.logger.info(
            "verify commit for %s onto %s: %s",
            req.change[:12],
            req.onto[:12],
            made.commit or made.error,
        )
        return made


class VmActivities:
    """Boot a built kernel and run the testcase: the VM queue's activity."""

    def __init__(self, settings: Settings, machine: Machine) -> None:
        self.settings = settings
        self.machine = machine
        self.store = artifact_store.from_settings(settings)

    def _here(self, art: Artifact, progress: Callable[[str], None]) -> Artifact:
        """The artifact ready to boot, its image checked against its build's sha256. With a
        store, the one in this host's own cache (never the build host's paths, even when
        they are on this machine): fetched from the store when missing, its sha256s
        checked. Called under with_heartbeats: a long fetch heartbeats."""
        if self.store is not None:
            local = self.store.fetch(art, progress)  # this host's own entry, else the store's
            if local is None:
                raise InfraError(
                    f"the kernel of {art.commit[:12]} is neither in this host's cache nor in "
                    f"the store {self.store.redacted}: give the build hosts the same "
                    "KBISECT_STORE"
                )
            art = local
        artifact_cache.check_before_boot(art)  # a changed image: retried, no verdict
        return art

    @activity.defn(name=TEST)
    @typed_failures
    def run_test(self, req: TestRequest) -> TestResult:
        manifest = manifests.load(req.testcase, Path(req.repo))
        activity.logger.info(
            "test %s: %s, %s, %d repetitions on %s",
            req.commit[:12],
            manifest.name,
            req.profile,
            req.repetitions,
            self.machine.name,
        )

        def fetched_then_run(report: Callable[[str], None]) -> TestResult:
            here = dataclasses.replace(req, artifact=self._here(req.artifact, report))
            return self._run(here, manifest, report)

        return with_heartbeats(fetched_then_run)

    @activity.defn(name=DUET)
    @typed_failures
    def run_duet(self, req: DuetRequest) -> DuetResult:
        """Both boots at one moment: the reserved CPUs held for the two, each guest pinned
        to its half, so what the host does meanwhile reaches both."""
        pair = duet.pinned_pair(self.machine)
        manifest = manifests.load(req.tests[0].testcase, Path(req.tests[0].repo))
        activity.logger.info(
            "duet %s: %s on CPUs %s of %s",
            " beside ".join(t.commit[:12] for t in req.tests),
            manifest.name,
            " and ".join(",".join(map(str, m.pin)) for m in pair),
            self.machine.name,
        )

        def both(report: Callable[[str], None]) -> DuetResult:
            tests = [
                dataclasses.replace(t, artifact=self._here(t.artifact, report)) for t in req.tests
            ]
            runs = [functools.partial(self._run, t, manifest, report, held=True) for t in tests]
            return DuetResult(duet.at_once(self.machine, pair, runs, report))

        return with_heartbeats(both)

    def _run(
        self,
        req: TestRequest,
        manifest: manifests.Manifest,
        report: Callable[[str], None],
        machine: Machine | None = None,
        held: bool = False,
    ) -> TestResult:
        """One boot on `machine` (None: this worker's); `held`: the caller holds its lock."""
        machine = machine or self.machine
        try:
            spec = manifest.metrics.get(req.metric)
            exact = spec is not None and spec.exact
            r = run_testcase(
                manifest,
                req.artifact,
                machine,
                req.profile,
                req.repetitions,
                report,
                exact,
                req.signature,
                held,
            )
        except CannotTestError as exc:
            activity.logger.info("test %s: %s", req.commit[:12], cannot_test(str(exc)))
            return TestResult(
                commit=req.commit,
                status=TestStatus.TESTCASE_FAILED,
                error=cannot_test(str(exc)),
                console=exc.console_path,
            )
        except (BootError, TestcaseFailedError) as exc:
            status = (
                TestStatus.BOOT_FAILED if isinstance(exc, BootError) else TestStatus.TESTCASE_FAILED
            )
            activity.logger.info("test %s: %s (skip): %s", req.commit[:12], status, exc)
            return TestResult(
                commit=req.commit, status=status, error=str(exc), console=exc.console_path
            )
        values = {k: m.value for k, m in r.score.metrics.items()}
        activity.logger.info(
            "test %s: %s in %.0f s%s: %s",
            req.commit[:12],
            r.bad or "ok",
            r.run.seconds,
            f" (host userland over {r.userland})" if r.userland else "",
            values,
        )
        return TestResult(
            commit=req.commit,
            status=TestStatus.OK,
            values=values,
            samples=r.score.primary_metric.samples,
            metric_samples={k: list(m.samples) for k, m in r.score.metrics.items()},
            warmup=list(r.score.primary_metric.warmup),
            console=r.run.console,
            seconds=r.run.seconds,
            host=machine.host,
            bad=r.bad,
            excerpt=r.excerpt,
            userland=r.userland,
        )

    @activity.defn(name=TRACE)
    @typed_failures
    def run_trace(self, req: TraceRequest) -> TraceResult:
        """A traced boot for the report; a kernel that cannot be traced is an answer."""
        manifest = manifests.load(req.testcase, Path(req.repo))
        activity.logger.info(
            "trace %s: %s on %s", req.commit[:12], manifest.name, self.machine.name
        )

        def traced(report: Callable[[str], None]) -> TraceResult:
            art = self._here(req.artifact, report)
            try:
                d = trace_testcase(manifest, art, self.machine, req.profile, report)
            except (BootError, TestcaseFailedError, UserError) as exc:
                activity.logger.info("trace %s: none: %s", req.commit[:12], exc)
                return TraceResult(commit=req.commit, error=str(exc))
            return TraceResult(commit=req.commit, diagnostics=d.to_json())

        return with_heartbeats(traced)

    @activity.defn(name=EXPLAIN)
    @typed_failures
    def run_explain(self, req: ExplainBootRequest) -> ExplainBootResult:
        """An explain boot: the metric, the statistics' deltas, the CPU profile. A kernel
        that does not boot or a testcase that fails is an answer, as a test's is."""
        manifest = manifests.load(req.testcase, Path(req.repo))
        activity.logger.info(
            "explain %s: %s on %s", req.commit[:12], manifest.name, self.machine.name
        )

        def explained(report: Callable[[str], None]) -> ExplainBootResult:
            art = self._here(req.artifact, report)
            try:
                b = explain_boot(manifest, art, self.machine, req.profile, report)
            except (BootError, TestcaseFailedError) as exc:
                status = (
                    TestStatus.BOOT_FAILED
                    if isinstance(exc, BootError)
                    else TestStatus.TESTCASE_FAILED
                )
                activity.logger.info("explain %s: %s: %s", req.commit[:12], status, exc)
                return ExplainBootResult(commit=req.commit, status=status, error=str(exc))
            return b.result(req.commit, req.metric, self.machine.host)

        return with_heartbeats(explained)


def defined(*objects: object) -> list[Callable[..., object]]:
    """Every activity these objects define, bound: what a worker registers, so one added
    to a class is served without a second list to keep."""
    found = []
    for obj in objects:
        for name, fn in inspect.getmembers(type(obj), inspect.isfunction):
            if activity._Definition.from_callable(fn) is not None:
                found.append(getattr(obj, name))
    return found
