"""BisectWorkflow: validate, calibrate the endpoints, then bisect until one commit is named.

Deterministic: every decision is a pure function (workflows.strategy, workflows.verdict);
everything that touches git, make or QEMU is an activity on the build or VM queue.
"""

import asyncio
import statistics
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

with workflow.unsafe.imports_passed_through():
    from kbisect.jobs import (
        BisectRequest,
        BisectResult,
        BuildRequest,
        BuildResult,
        MarkRequest,
        Progress,
        Step,
        TestRequest,
        TestResult,
        ValidatedJob,
        Verification,
        VerifyCommit,
        VerifyRequest,
    )
    from kbisect.model import Artifact
    from kbisect.workflows import strategy
    from kbisect.workflows.details import details_markdown
    from kbisect.workflows.strategy import Graph, Search, State
    from kbisect.workflows.verdict import Calibration, Verdict, classify, state_for, verdict_for

# Activity names: the workers register their implementations under these.
VALIDATE = "validate_job"
BUILD = "build_kernel"
TEST = "run_testcase"
PREPARE_VERIFY = "prepare_verify"
# Jobs recorded before the verify step existed replay without it.
VERIFY_PATCH = "verify-named-commit"
RETEST_PATCH = "retest-when-unsure"

SA_TESTCASE = SearchAttributeKey.for_keyword("KbisectTestcase")
SA_STATUS = SearchAttributeKey.for_keyword("KbisectStatus")
SA_CULPRIT = SearchAttributeKey.for_keyword("KbisectCulprit")
SEARCH_ATTRIBUTES = (SA_TESTCASE, SA_STATUS, SA_CULPRIT)

# A user error (bad revision, testcase...) fails the job at once; a host error is retried.
VALIDATE_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=["UserError"])
BUILD_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    maximum_attempts=5,
    non_retryable_error_types=["UserError"],
)
TEST_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    maximum_attempts=3,
    non_retryable_error_types=["UserError"],
)


# Our pure modules are deterministic and stateless: share them with the sandbox instead
# of re-importing them per run (a re-import also makes two copies of each enum class).
PASSTHROUGH = (
    "kbisect.jobs",
    "kbisect.model",
    "kbisect.workflows.strategy",
    "kbisect.workflows.verdict",
    "kbisect.workflows.details",
)


def sandbox_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )


T = TypeVar("T")


class JobFailed(ApplicationError):
    def __init__(self, message: str) -> None:
        super().__init__(message, type="JobFailed", non_retryable=True)


@workflow.defn(name="BisectWorkflow")
class BisectWorkflow:
    def __init__(self) -> None:
        self._progress = Progress(status="validating")
        self._search: Search | None = None
        self._job: ValidatedJob | None = None
        self._subjects: dict[str, str] = {}
        self._mode = "regression"
        self._sa = True
        self._resumes = 0  # how often a person said "resume" (see _until_done)
        self._blocked: list[str] = []  # what each blocked step waits on
        self._unblocked = ("", "")  # status and message to go back to

    # --- watching -------------------------------------------------------------------
    @workflow.query(name="progress")
    def progress(self) -> Progress:
        return self._progress

    @workflow.update(name="mark")
    def mark(self, req: MarkRequest) -> str:
        assert self._search is not None
        verdict = Verdict(req.verdict)
        self._apply(
            req.commit,
            state_for(verdict, self._mode),
            Step(
                commit=req.commit,
                subject=self._subjects.get(req.commit, ""),
                verdict=verdict.value,
                source="marked",
                note="marked by a person",
            ),
        )
        return f"{req.commit[:12]} marked {verdict.value}"

    @mark.validator
    def _validate_mark(self, req: MarkRequest) -> None:
        if self._search is None:
            raise ValueError("the job is still validating: mark once it is bisecting")
        if req.verdict not in ("good", "bad", "skip"):
            raise ValueError(f"verdict must be good, bad or skip, not {req.verdict!r}")
        if req.commit not in self._search.graph.parents and req.commit not in self._search.old:
            raise ValueError(f"{req.commit[:12]} is not in this job's range")
        if self._progress.status not in ("bisecting", "calibrating"):
            raise ValueError(f"the job is {self._progress.status}: nothing left to mark")

    @workflow.update(name="resume")
    def resume(self) -> str:
        self._resumes += 1
        return f"resuming {len(self._blocked)} blocked step(s)"

    @resume.validator
    def _validate_resume(self) -> None:
        if not self._blocked:
            raise ValueError(f"the job is {self._progress.status}, not blocked: nothing to resume")

    # --- the job --------------------------------------------------------------------
    @workflow.run
    async def run(self, req: BisectRequest) -> BisectResult:
        self._mode, self._sa = req.mode, req.search_attributes
        self._progress.mode = req.mode
        self._progress.testcase = req.testcase
        self._progress.repo = req.repo
        self._upsert(SA_TESTCASE.value_set(req.testcase), SA_STATUS.value_set("validating"))
        job = await self._validate(req)
        self._job = job
        graph, subjects = range_of(job)
        self._subjects = {**job.old_subjects, **subjects}
        self._search = Search(graph=graph, new=job.new, old=set(job.old))
        self._progress.metric, self._progress.unit = job.primary, job.unit
        self._progress.old, self._progress.new = job.old, job.new

        calibration = await self._calibrate(req, job)
        ok, why = calibration.differs()
        if not ok:
            return self._finish(req, "no-difference", None, [], f"endpoints do not differ: {why}")
        self._set_status("bisecting", why)
        rounds = 0
        while nxt := strategy.spread_commits(self._search, req.parallel):
            rounds += 1
            await asyncio.gather(
                *(self._bisect_step(req, job, c, calibration, rounds) for c in nxt)
            )
        result = strategy.outcome(self._search)
        assert result is not None
        if result.culprit:
            subject = self._subjects.get(result.culprit, "")
            word = "fixed" if req.mode == "fix" else "first bad"
            message = f"{word} commit: {result.culprit} {subject}"
            if req.verify and workflow.patched(VERIFY_PATCH):
                v = await self._verify(req, job, result.culprit, calibration)
                self._progress.verification = v
                message += f"; {v.status}: {v.message}"
            return self._finish(req, "found", result.culprit, result.candidates, message)
        return self._finish(
            req,
            "ambiguous",
            None,
            result.candidates,
            f"skipped commits leave {len(result.candidates)} candidates; one of them is the "
            f"{'fix' if req.mode == 'fix' else 'first bad commit'}",
        )

    async def _validate(self, req: BisectRequest) -> ValidatedJob:
        try:
            job: ValidatedJob = await workflow.execute_activity(
                VALIDATE,
                req,
                result_type=ValidatedJob,
                task_queue=req.build_queue,
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=VALIDATE_RETRY,
            )
            return job
        except ActivityError as err:
            raise JobFailed(_cause(err)) from err

    async def _calibrate(self, req: BisectRequest, job: ValidatedJob) -> Calibration:
        self._set_status("calibrating", "scoring both endpoints")
        old, new = job.old[0], job.new
        self._progress.current = [old, new]
        (b_old, t_old), (b_new, t_new) = await asyncio.gather(
            self._evaluate(req, job, old), self._evaluate(req, job, new)
        )
        self._progress.current = []
        for commit, b, t, side in ((old, b_old, t_old, "old"), (new, b_new, t_new, "new")):
            word = verdict_for(State.OLD if side == "old" else State.NEW, req.mode).value
            if not b.ok:
                raise JobFailed(
                    f"the {word} endpoint {commit[:12]} does not build: {b.error} "
                    f"(log: {b.log}); pass a {word} revision that builds"
                )
            assert t is not None
            if t.status != "ok":
                raise JobFailed(
                    f"the {word} endpoint {commit[:12]} failed: {t.error} "
                    f"(console: {t.console}); pass a {word} revision that runs the testcase"
                )
            self._record(
                Step(
                    commit=commit,
                    subject=self._subjects.get(commit, ""),
                    verdict=word,
                    source="endpoint",
                    value=t.values.get(job.primary),
                    values=t.values,
                    position=0.0 if side == "old" else 1.0,
                    build_seconds=b.seconds,
                    test_seconds=t.seconds,
                )
            )
        assert t_old is not None and t_new is not None
        return Calibration(metric=job.primary, old=t_old.samples, new=t_new.samples)

    async def _bisect_step(
        self,
        req: BisectRequest,
        job: ValidatedJob,
        commit: str,
        calibration: Calibration,
        round_: int,
    ) -> None:
        assert self._search is not None
        self._progress.current.append(commit)
        self._refresh()
        build, test = await self._evaluate(req, job, commit)
        self._progress.current.remove(commit)
        subject = self._subjects.get(commit, "")
        step = Step(
            commit=commit,
            subject=subject,
            verdict="skip",
            source="test",
            build_seconds=build.seconds,
            round=round_,
        )
        if not build.ok:
            step.source, step.note = "build-failed", build.error
            state = State.SKIP
        elif test is None or test.status != "ok":
            assert test is not None
            step.source, step.note, step.test_seconds = test.status, test.error, test.seconds
            state = State.SKIP
        else:
            value = test.values[job.primary]
            c = classify(value, calibration)
            if c.state == State.SKIP and workflow.patched(RETEST_PATCH):
                # Unsure: noise, more often than not. Measure again, longer, before skipping.
                assert build.artifact is not None
                again = await self._test(req, job, commit, build.artifact, job.repetitions * 2)
                if again.status == "ok":
                    samples = test.samples + again.samples
                    value = statistics.median(samples)
                    c = classify(value, calibration)
                    test.values = {**again.values, job.primary: value}
                    test.seconds += again.seconds
                    step.note = f"unsure at first: retested, median of {len(samples)} samples"
            state = c.state
            step.value, step.values, step.position, step.margin = (
                value,
                test.values,
                c.position,
                c.margin,
            )
            step.test_seconds = test.seconds
            if state == State.SKIP:
                step.note = "between the endpoints: neither good nor bad"
        step.verdict = verdict_for(state, req.mode).value
        if commit in self._search.marks:
            step.note = f"a person marked it {self._search.marks[commit].value} meanwhile; kept"
            self._record(step)
            return
        self._apply(commit, state, step)

    async def _verify(
        self, req: BisectRequest, job: ValidatedJob, culprit: str, calibration: Calibration
    ) -> Verification:
        """Revert the culprit on the new endpoint (or apply the fix to the old one) and test
        that: it must behave like the old endpoint (or like the new one)."""
        revert = req.mode == "regression"
        v = Verification(
            kind="revert" if revert else "backport",
            change=culprit,
            onto=job.new if revert else job.old[0],
            status="inconclusive",
            message="",
        )
        where = "reverted on the new endpoint" if revert else "applied to the old endpoint"
        self._set_status("verifying", f"testing {culprit[:12]} {where}")
        try:
            made: VerifyCommit = await workflow.execute_activity(
                PREPARE_VERIFY,
                VerifyRequest(repo=req.repo, change=culprit, onto=v.onto, revert=revert),
                result_type=VerifyCommit,
                task_queue=req.build_queue,
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=VALIDATE_RETRY,
            )
            v.commit, v.subject = made.commit, made.subject
            if made.commit is None:
                v.message = made.error
                return v
            self._progress.current = [made.commit]
            self._refresh()
            build, test = await self._evaluate(req, job, made.commit)
        except ActivityError as err:  # the bisection's answer stands without it
            v.message = f"could not verify: {_cause(err)}"
            return v
        finally:
            self._progress.current = []
        if not build.ok:
            v.message = f"{where}, it does not build: {build.error}"
            return v
        assert test is not None
        if test.status != "ok":
            v.message = f"{where}, it fails: {test.error}"
            return v
        v.value, v.values = test.values[job.primary], test.values
        c = classify(v.value, calibration)
        v.position = c.position
        expected = State.OLD if revert else State.NEW
        side = "old" if c.state == State.OLD else "new"
        if c.state == State.SKIP:
            v.message = f"{where}, {job.primary} is {v.value:g}: between the endpoints"
        else:
            v.status = "confirmed" if c.state == expected else "contradicted"
            v.message = f"{where}, {job.primary} is {v.value:g}, like the {side} endpoint"
        return v

    async def _evaluate(
        self, req: BisectRequest, job: ValidatedJob, commit: str
    ) -> tuple[BuildResult, TestResult | None]:
        build: BuildResult = await self._until_done(
            f"building {commit[:12]}",
            lambda: workflow.execute_activity(
                BUILD,
                BuildRequest(repo=req.repo, commit=commit, testcase=job.testcase),
                result_type=BuildResult,
                task_queue=req.build_queue,
                start_to_close_timeout=timedelta(hours=3),
                heartbeat_timeout=timedelta(seconds=90),
                retry_policy=BUILD_RETRY,
            ),
        )
        if build.subject:
            self._subjects.setdefault(commit, build.subject)
        if not build.ok:
            return build, None
        assert build.artifact is not None
        return build, await self._test(req, job, commit, build.artifact, job.repetitions)

    async def _test(
        self,
        req: BisectRequest,
        job: ValidatedJob,
        commit: str,
        artifact: Artifact,
        repetitions: int,
    ) -> TestResult:
        # job.test_timeout is for job.repetitions; a retest runs more.
        scale = max(1.0, repetitions / max(1, job.repetitions))
        result: TestResult = await self._until_done(
            f"testing {commit[:12]}",
            lambda: workflow.execute_activity(
                TEST,
                TestRequest(
                    repo=req.repo,
                    commit=commit,
                    testcase=job.testcase,
                    profile=job.profile,
                    repetitions=repetitions,
                    artifact=artifact,
                ),
                result_type=TestResult,
                task_queue=req.vm_queue,
                start_to_close_timeout=timedelta(seconds=job.test_timeout * scale + 300),
                heartbeat_timeout=timedelta(seconds=60),
                retry_policy=TEST_RETRY,
            ),
        )
        return result

    async def _until_done(self, what: str, start: Callable[[], Awaitable[T]]) -> T:
        """Run an activity; when it keeps failing after all retries (a full disk, a missing
        tool, a worker that times out, a bug), wait for a person to fix it and resume,
        instead of failing a job that may hold hours of finished steps. A commit that does
        not build or boot is not a failure here but a result; bad input still fails."""
        while True:
            try:
                return await start()
            except ActivityError as err:
                if _cause_type(err) == "UserError":
                    raise
                problem = f"{what}: {_cause(err)}"
            seen = self._resumes
            if not self._blocked:
                self._unblocked = (self._progress.status, self._progress.message)
            self._blocked.append(problem)
            workflow_id = workflow.info().workflow_id
            self._set_status(
                "blocked", f"{problem}; fix the host, then run: kbisect resume {workflow_id}"
            )
            await workflow.wait_condition(lambda seen=seen: self._resumes > seen)  # type: ignore[misc]
            self._blocked.remove(problem)
            if not self._blocked:
                self._set_status(*self._unblocked)

    # --- state and display ---------------------------------------------------------------
    def _index(self, commit: str) -> int:
        order = self._search.graph.order if self._search else ()
        return len(order) - 1 - order.index(commit) if commit in order else -1

    def _record(self, step: Step) -> None:
        step.index = self._index(step.commit)
        self._progress.steps.append(step)
        self._refresh()

    def _apply(self, commit: str, state: State, step: Step) -> None:
        assert self._search is not None
        self._search.mark(commit, state)
        self._record(step)

    def _refresh(self) -> None:
        if self._search is not None:
            cands = strategy.candidates(self._search)
            self._progress.candidates = len(cands)
            self._progress.steps_left = strategy.steps_left(self._search)
        workflow.set_current_details(details_markdown(self._progress, self._subjects))

    def _set_status(self, status: str, message: str) -> None:
        self._progress.status, self._progress.message = status, message
        self._upsert(SA_STATUS.value_set(status))
        self._refresh()

    def _upsert(self, *updates: object) -> None:
        if self._sa:
            workflow.upsert_search_attributes(list(updates))  # type: ignore[arg-type]

    def _finish(
        self,
        req: BisectRequest,
        status: str,
        culprit: str | None,
        candidates: list[str],
        message: str,
    ) -> BisectResult:
        self._progress.current = []
        self._set_status(status, message)
        if culprit:
            self._upsert(SA_CULPRIT.value_set(culprit))
        assert self._job is not None
        return BisectResult(
            status=status,
            mode=req.mode,
            testcase=req.testcase,
            repo=req.repo,
            old=self._job.old,
            new=self._job.new,
            culprit=culprit,
            candidates=candidates,
            steps=self._progress.steps,
            message=message,
            metric=self._job.primary,
            unit=self._job.unit,
            verification=self._progress.verification,
            profile=self._job.profile,
            repetitions=self._job.repetitions,
            subjects={
                c: self._subjects.get(c, "")
                for c in sorted({*candidates, *(s.commit for s in self._progress.steps)})
            },
        )


def range_of(job: ValidatedJob) -> tuple[Graph, dict[str, str]]:
    """The job's commit graph and the subjects it carries (compact or, for jobs recorded
    before it, the list of nodes)."""
    if job.order:
        parents = {
            h: tuple(job.order[i] for i in idx)
            for h, idx in zip(job.order, job.parent_index, strict=True)
        }
        return Graph(parents=parents, order=tuple(job.order)), dict(job.subjects)
    graph = Graph(
        parents={c.hash: tuple(c.parents) for c in job.commits},
        order=tuple(c.hash for c in job.commits),
    )
    return graph, {c.hash: c.subject for c in job.commits}


def _root(err: ActivityError) -> BaseException | None:
    cause = err.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return cause


def _cause(err: ActivityError) -> str:
    cause = _root(err)
    return cause.message if isinstance(cause, ApplicationError) else str(err)


def _cause_type(err: ActivityError) -> str:
    cause = _root(err)
    return (cause.type or "") if isinstance(cause, ApplicationError) else ""
