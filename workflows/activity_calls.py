"""Every activity a job calls, with its queue, timeouts and retry policy in one place.

Workflow code only: `workflow.execute_activity` needs the workflow's event loop. A call
that still fails after its retries (a full disk, a missing tool, a worker that stops
answering) does not fail the job: `Blocking` parks it until a person says resume. Bad
input (ErrorType.USER) is never retried and fails the job at once.
"""

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    is_cancelled_exception,
)

from kbisect.contract import (
    ACTIVITY_QUEUE,
    BUILD,
    CLASSIFY,
    DUET,
    EXPLAIN,
    PLAN_BACKPORT,
    PREPARE_VERIFY,
    SERIES_PLAN,
    SERIES_RECORD,
    TEST,
    TRACE,
    VALIDATE,
    VALIDATE_SWEEP,
    BuildRequest,
    BuildResult,
    ErrorType,
    Fixup,
    QueueKind,
    TestRequest,
    TestResult,
    TraceRequest,
    TraceResult,
    ValidatedJob,
    fit_summary,
)
from kbisect.model import Artifact
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
from kbisect.workflows.explain_types import ExplainBootRequest, ExplainBootResult
from kbisect.workflows.search_attributes import SA_STATUS
from kbisect.workflows.series_types import SeriesPlan, SeriesRecord, SeriesTick, SeriesWatch
from kbisect.workflows.sweep_types import SweepJob, SweepRequest, SweepTestcase

T = TypeVar("T")
R = TypeVar("R")

VALIDATE_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=[ErrorType.USER])
BUILD_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    maximum_attempts=5,
    non_retryable_error_types=[ErrorType.USER],
)
TEST_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    maximum_attempts=3,
    non_retryable_error_types=[ErrorType.USER],
)
GIT_TIMEOUT = timedelta(minutes=10)
BUILD_TIMEOUT = timedelta(hours=3)
# Workers heartbeat every 10 s (HEARTBEAT_EVERY), and the SDK sends at most one every 0.8
# timeouts: 30 s tells a dead worker's activity from a live one within 3 heartbeats, and a
# dead host's build, boot or git work is retried elsewhere half a minute after it died (not
# at the end of GIT_TIMEOUT).
BUILD_HEARTBEAT = TEST_HEARTBEAT = GIT_HEARTBEAT = timedelta(seconds=30)
TEST_SLACK = 300.0  # seconds beyond the testcase's own timeout: boot, image, disks


class JobFailed(ApplicationError):
    """The job ends failed with this one-line message (bad input, an unusable endpoint)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=ErrorType.JOB_FAILED, non_retryable=True)


async def on_a_build_host(activity: str, arg: object, result_type: type[R], queue: str) -> R:
    """A git activity on a build host (it has the repository, the trees and apt); bad
    input, or a host that cannot answer after the retries, fails the job in one line."""
    try:
        result: R = await workflow.execute_activity(
            activity,
            arg,
            result_type=result_type,
            task_queue=queue,
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=GIT_HEARTBEAT,
            retry_policy=VALIDATE_RETRY,
        )
    except ActivityError as err:
        raise_if_cancelled(err)
        raise JobFailed(cause(err)) from err
    return result


async def validate_sweep(req: SweepRequest) -> SweepJob:
    """A sweep's kernels and testcases, resolved on a build host."""
    return await on_a_build_host(VALIDATE_SWEEP, req, SweepJob, req.build_queue)


async def plan_backport(req: BackportRequest) -> BackportPlan:
    """A backport's plan, made on a build host."""
    return await on_a_build_host(PLAN_BACKPORT, req, BackportPlan, req.build_queue)


async def series_plan(watch: SeriesWatch) -> SeriesPlan:
    """A watch's new kernels, found on a build host; a tick that cannot look ends failed,
    and the next tick looks again."""
    return await on_a_build_host(SERIES_PLAN, watch, SeriesPlan, watch.build_queue)


async def series_record(rec: SeriesRecord, build_queue: str) -> SeriesTick:
    """The sweep's boots kept by kernel and testcase, its changes as alerts."""
    tick: SeriesTick = await workflow.execute_activity(
        SERIES_RECORD,
        rec,
        result_type=SeriesTick,
        task_queue=build_queue,
        start_to_close_timeout=GIT_TIMEOUT,
        heartbeat_timeout=GIT_HEARTBEAT,
        retry_policy=BUILD_RETRY,
    )
    return tick


def testcase_job(tc: SweepTestcase) -> ValidatedJob:
    """What a boot activity needs of a testcase resolved by validate_sweep, in the
    bisection's words."""
    return ValidatedJob(
        old=[],
        new="",
        testcase=tc.name,
        primary=tc.metric,
        unit=tc.unit,
        better=tc.better,
        profile=tc.profile,
        repetitions=tc.repetitions,
        test_timeout=tc.test_timeout,
        pass_fail=tc.pass_fail,
    )


class Blocking:
    """Steps waiting on a host problem, and the resume that releases them."""

    def __init__(
        self, on_blocked: Callable[[str, bool], None], on_clear: Callable[[], None]
    ) -> None:
        self.waiting: list[str] = []  # what each blocked step waits on
        self._resumes = 0
        self._on_blocked = on_blocked  # (problem, whether it is the first one waiting)
        self._on_clear = on_clear  # nothing waits any more

    def resume(self) -> str:
        self._resumes += 1
        return f"resuming {len(self.waiting)} blocked step(s)"

    async def until_done(self, what: str, start: Callable[[], Awaitable[T]]) -> T:
        while True:
            try:
                return await start()
            except ActivityError as err:
                raise_if_cancelled(err)  # it ends, it does not wait for a resume
                if cause_type(err) == ErrorType.USER:
                    raise
                problem = f"{what}: {cause(err)}"
            await self.hold(problem)

    async def hold(self, problem: str) -> None:
        """Wait on `problem` until a person resumes the job."""
        seen = self._resumes
        self.waiting.append(problem)
        self._on_blocked(problem, len(self.waiting) == 1)
        await workflow.wait_condition(lambda: self._resumes > seen)
        self.waiting.remove(problem)
        if not self.waiting:
            self._on_clear()


class Resumable:
    """A workflow whose blocked steps a person releases with the `resume` update."""

    _blocking: Blocking
    _noun = "job"

    def status_word(self) -> str:
        raise NotImplementedError

    @workflow.update(name="resume")
    def resume(self) -> str:
        return self._blocking.resume()

    @resume.validator
    def _validate_resume(self) -> None:
        if not self._blocking.waiting:
            status = self.status_word()
            raise ValueError(f"the {self._noun} is {status}, not blocked: nothing to resume")


class Progressing(Protocol):
    """A workflow's progress as its query answers it: at least a status and a message."""

    status: str
    message: str


class ShowsStatus(Resumable):
    """A stage's status in its progress, and its blocked spells: a sweep's and an explain
    job's (a bisection's progress has more to say)."""

    _progress: Progressing
    _status: str  # what it does when not blocked
    _sa = False  # the job's status goes to its search attributes too: "<_noun> <status>"

    def status_word(self) -> str:
        return self._progress.status

    def _on_blocked(self, problem: str, first: bool) -> None:
        self._progress.status, self._progress.message = "blocked", problem

    def _on_clear(self) -> None:
        self._progress.status, self._progress.message = self._status, ""

    def _set(self, status: str, message: str = "", shown: str = "") -> None:
        """The stage's status; `shown`: what `kbisect status` says instead of it."""
        self._status = status
        self._progress.status, self._progress.message = status, message
        if self._sa:
            workflow.upsert_search_attributes(
                [SA_STATUS.value_set(shown or f"{self._noun} {status}")]
            )


class HasSite(Protocol):
    """A job's request that names its repository, kernel config and queues: a
    bisection's, a sweep's, an explain job's, a backport's."""

    @property
    def repo(self) -> str: ...
    @property
    def config(self) -> str: ...
    @property
    def build_queue(self) -> str: ...
    @property
    def vm_queue(self) -> str: ...


@dataclass(frozen=True)
class JobSite:
    """What the job's activities need of its request: the repository its kernels come
    from, the user's kernel config (a path in the shared cache, "" for none) and the task
    queues of the hosts that build them and of those that boot them. Workflow code only:
    never an activity's input."""

    repo: str
    config: str
    build_queue: str
    vm_queue: str
    fixups: tuple[Fixup, ...] = ()  # a bisection's --fixup: every kernel it builds

    @classmethod
    def of(cls, req: HasSite, fixups: Iterable[Fixup] = ()) -> "JobSite":
        return cls(req.repo, req.config, req.build_queue, req.vm_queue, tuple(fixups))


class JobActivities:
    """Each activity a job calls, with a summary a person reads in the Web UI's timeline
    ("build 1823859153e5 nvme: set nomerges", "boot 1823859153e5 #2")."""

    def __init__(self, site: JobSite, blocking: Blocking) -> None:
        self.site = site
        self.blocking = blocking
        self.subjects: dict[str, str] = {}  # the job's subjects, once validated
        self._boots: Counter[str] = Counter()  # boots asked of each commit so far

    def _named(self, commit: str) -> str:
        return f"{commit[:12]} {self.subjects.get(commit, '')}"[:80].rstrip()

    def _boot_summary(self, verb: str, commit: str) -> str:
        self._boots[commit] += 1
        return f"{verb} {commit[:12]} #{self._boots[commit]}"

    def _queue(self, activity: str) -> str:
        """The job's task queue for this activity's kind (the contract says which)."""
        kind = ACTIVITY_QUEUE[activity]
        return self.site.vm_queue if kind == QueueKind.VM else self.site.build_queue

    async def validate(self, req: BisectRequest) -> ValidatedJob:
        """A bisection's request, resolved: its revisions, range and testcase."""
        job: ValidatedJob = await workflow.execute_activity(
            VALIDATE,
            req,
            result_type=ValidatedJob,
            task_queue=self._queue(VALIDATE),
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=GIT_HEARTBEAT,
            retry_policy=VALIDATE_RETRY,
            summary="validate: the revisions, the range and the testcase",
        )
        return job

    async def build(
        self, commit: str, testcase: str, explain: bool = False, aligned: bool = False
    ) -> BuildResult:
        """`explain`: the kernel an explain boot needs (the diagnostics fragment too);
        `aligned`: every function aligned (an explain job's alignment check)."""
        kind = " (diagnostics)" if explain else " (aligned)" if aligned else ""
        summary = fit_summary(f"build {self._named(commit)}{kind}")
        result: BuildResult = await self.blocking.until_done(
            f"building {commit[:12]}",
            lambda: workflow.execute_activity(
                BUILD,
                BuildRequest(
                    self.site.repo,
                    commit,
                    testcase,
                    self.site.config,
                    explain,
                    aligned,
                    list(self.site.fixups),
                ),
                result_type=BuildResult,
                task_queue=self._queue(BUILD),
                start_to_close_timeout=BUILD_TIMEOUT,
                heartbeat_timeout=BUILD_HEARTBEAT,
                retry_policy=BUILD_RETRY,
                summary=summary,
            ),
        )
        return result

    async def test(
        self, job: ValidatedJob, commit: str, artifact: Artifact, repetitions: int
    ) -> TestResult:
        # job.test_timeout is for job.repetitions; a retest runs more.
        scale = max(1.0, repetitions / max(1, job.repetitions))
        request = self._test_request(job, commit, artifact, repetitions)
        what, summary = f"testing {commit[:12]}", self._boot_summary("boot", commit)
        return await self._boot(what, TEST, request, TestResult, job.test_timeout * scale, summary)

    async def duet(
        self, job: ValidatedJob, kernels: list[tuple[str, Artifact]]
    ) -> list[TestResult]:
        """Boots of these kernels at one moment on one VM host (DuetRequest)."""
        tests = [self._test_request(job, c, a, job.repetitions) for c, a in kernels]
        what = "testing " + " beside ".join(c[:12] for c, _ in kernels)
        summary = " beside ".join(self._boot_summary("boot", c) for c, _ in kernels)
        result = await self._boot(
            what, DUET, DuetRequest(tests), DuetResult, job.test_timeout, summary
        )
        return result.results

    def _test_request(
        self, job: ValidatedJob, commit: str, artifact: Artifact, repetitions: int
    ) -> TestRequest:
        return TestRequest(
            repo=self.site.repo,
            commit=commit,
            testcase=job.testcase,
            profile=job.profile,
            repetitions=repetitions,
            artifact=artifact,
            metric=job.primary,
            signature=job.signature,
        )

    async def trace(self, job: ValidatedJob, commit: str, artifact: Artifact) -> TraceResult:
        """A traced boot for the report (one repetition under blktrace)."""
        request = TraceRequest(self.site.repo, commit, job.testcase, job.profile, artifact)
        what, summary = f"tracing {commit[:12]}", self._boot_summary("traced boot", commit)
        return await self._boot(what, TRACE, request, TraceResult, job.test_timeout * 2, summary)

    async def explain(
        self, job: ValidatedJob, commit: str, artifact: Artifact
    ) -> ExplainBootResult:
        """An explain boot (statistics and a CPU profile about the testcase's repetitions);
        perf's sampling slows the guest, so it gets twice a test's time."""
        request = ExplainBootRequest(
            self.site.repo, commit, job.testcase, job.profile, artifact, job.primary
        )
        what, summary = f"explaining {commit[:12]}", self._boot_summary("explain boot", commit)
        return await self._boot(
            what, EXPLAIN, request, ExplainBootResult, job.test_timeout * 2, summary
        )

    async def _boot(
        self,
        what: str,
        name: str,
        request: object,
        result_type: type[R],
        seconds: float,
        summary: str,
    ) -> R:
        """A VM activity: a boot of up to `seconds` of the testcase's own time."""
        result: R = await self.blocking.until_done(
            what,
            lambda: workflow.execute_activity(
                name,
                request,
                result_type=result_type,
                task_queue=self._queue(name),
                start_to_close_timeout=timedelta(seconds=seconds + TEST_SLACK),
                heartbeat_timeout=TEST_HEARTBEAT,
                retry_policy=TEST_RETRY,
                summary=fit_summary(summary),
            ),
        )
        return result

    async def classify(self, commits: list[str], sources: list[str]) -> ClassifyResult:
        result: ClassifyResult = await workflow.execute_activity(
            CLASSIFY,
            ClassifyRequest(repo=self.site.repo, commits=commits, sources=sources),
            result_type=ClassifyResult,
            task_queue=self._queue(CLASSIFY),
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=GIT_HEARTBEAT,
            retry_policy=VALIDATE_RETRY,
            summary=f"classify {len(commits)} commits: which ones change the kernel",
        )
        return result

    async def prepare_verify(self, change: str, onto: str, revert: bool) -> VerifyCommit:
        made: VerifyCommit = await workflow.execute_activity(
            PREPARE_VERIFY,
            VerifyRequest(repo=self.site.repo, change=change, onto=onto, revert=revert),
            result_type=VerifyCommit,
            task_queue=self._queue(PREPARE_VERIFY),
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=GIT_HEARTBEAT,
            retry_policy=VALIDATE_RETRY,
            summary=(
                f"verify: revert of {change[:12]} on {onto[:12]}"
                if revert
                else f"verify: {change[:12]} applied to {onto[:12]}"
            ),
        )
        return made


def _root(err: ActivityError) -> BaseException | None:
    c = err.cause
    while isinstance(c, ActivityError) and c.cause is not None:
        c = c.cause
    return c


def raise_if_cancelled(err: ActivityError | ChildWorkflowError) -> None:
    """A person cancelled the job, so the activity or stage ended "cancelled": the job
    ends cancelled too, never reading that end as a failure to note and go past."""
    if is_cancelled_exception(err):
        raise err


def cause(err: ActivityError) -> str:
    """The activity's own one-line message, not Temporal's wrapping."""
    c = _root(err)
    return c.message if isinstance(c, ApplicationError) else str(err)


def cause_type(err: ActivityError) -> str:
    c = _root(err)
    return (c.type or "") if isinstance(c, ApplicationError) else ""
