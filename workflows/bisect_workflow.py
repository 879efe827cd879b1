"""BisectWorkflow: validate the range, search it with the evidence engine, conclude.

Each decision (what to boot next, what the boots say, the answer) is asked of
kbisect.decide through a local activity (workflows.job_decisions): the history records it
and a replay never runs decision code, so a better rule needs no marker. The activities
that touch git, make and QEMU are called through workflows.activity_calls; how a round's
boots go out (one each, in duets, rolling picks) is workflows.boot_rounds, and each boot
goes once into the record through workflows.boot_outcomes. A change to the workflow's own
steps goes behind a patch marker (the table below); recorded histories replay in
tests/workflows/test_replay.py.
"""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import WORKFLOW, ErrorType, Verdict
    from kbisect.decide import engine_report, strategy
    from kbisect.decide.engine_report import Measured, Seen
    from kbisect.decide.levels import UNFIT_WILD
    from kbisect.decide.record import Setup
    from kbisect.decide.strategy import State
    from kbisect.decide.verdict import state_for
    from kbisect.workflows import job_report, verification
    from kbisect.workflows.activity_calls import (
        Blocking,
        JobActivities,
        JobFailed,
        JobSite,
        Resumable,
        cause,
        cause_type,
        raise_if_cancelled,
    )
    from kbisect.workflows.bisect_types import (
        STATUS_CHANGES_KEPT,
        BadBoot,
        BisectRequest,
        BisectResult,
        JobStatus,
        MarkRequest,
        Progress,
        StatusChange,
        Step,
        StepSource,
    )
    from kbisect.workflows.boot_outcomes import BootOutcomes
    from kbisect.workflows.boot_rounds import BootRounds
    from kbisect.workflows.details import details_markdown
    from kbisect.workflows.job_decisions import JobDecisions
    from kbisect.workflows.job_state import JobState
    from kbisect.workflows.kernels import Kernels
    from kbisect.workflows.search_attributes import SA_CULPRIT, SA_STATUS, SA_TESTCASE

# Patch markers, for the workflow's own steps only (the decisions are recorded, not
# re-run): Temporal's lifecycle is patched() (old and new branch), then deprecate_patch()
# once the old branch is gone (both kinds of history still replay), then nothing once no
# job started before the deprecation can still be running. Upgrading across a removal
# needs those jobs finished or cancelled (docs/development.md).
# Deprecated: every job takes the new branch; the old code is gone.
ENGINE_PATCH = "noisy-engine"  # boots until the evidence decides
FAILED_STATUS_PATCH = "status-on-failure"  # a failed job's KbisectStatus says failed
SAME_KERNEL_PATCH = "same-kernel"  # inert commits unbuilt, one verdict per image
TRACE_PATCH = "trace-named-commit"  # --trace: traced boots of the endpoints and culprit
ROUND_AT_ONCE_PATCH = "round-at-once"  # a round's boots go out together, one to each VM
# host with room (each host's lock still times one guest at a time)
ROLLING_PATCH = "rolling-picks"  # a noisy --parallel K job on a farm: once the endpoints'
# first boots are in, a pick for each VM host as it frees up, not rounds
# Live: a job that fails on bad input an activity found (past validation) is listed failed
USER_FAILURE_PATCH = "status-on-activity-user-error"
DEPRECATED = (
    ENGINE_PATCH,
    FAILED_STATUS_PATCH,
    SAME_KERNEL_PATCH,
    TRACE_PATCH,
    ROUND_AT_ONCE_PATCH,
    ROLLING_PATCH,
)

# Deterministic, stateless modules are shared with the sandbox instead of re-imported per
# run (a re-import also makes two copies of each enum class, and `==` between them fails).
PASSTHROUGH = (
    "kbisect.contract",
    "kbisect.workflows.bisect_types",
    "kbisect.workflows.sweep_types",
    "kbisect.workflows.series_types",
    "kbisect.workflows.explain_types",
    "kbisect.workflows.backport_types",
    "kbisect.model",
    "kbisect.decide.strategy",
    "kbisect.decide.verdict",
    "kbisect.workflows.details",
    "kbisect.workflows.job_state",
    "kbisect.workflows.activity_calls",  # stateless; its timeouts can be tuned in tests
    "kbisect.workflows.search_attributes",
    "kbisect.decide.stats",
    "kbisect.decide.evidence",
    "kbisect.decide.endpoints",
    "kbisect.decide.engine",
    "kbisect.decide.posterior",
    "kbisect.decide.split_likelihood",
    "kbisect.decide.trend",
    "kbisect.decide.terms",
    "kbisect.decide.levels",
    "kbisect.decide.rates",
    "kbisect.decide.exact",
    "kbisect.decide.engine_report",
    "kbisect.decide.sweep",
    "kbisect.decide.backport",
    "kbisect.decide.record",
    "kbisect.decide.plan",
)


def sandbox_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )


@workflow.defn(name=WORKFLOW)
class BisectWorkflow(Resumable):
    def __init__(self) -> None:
        self._progress = Progress(
            status=JobStatus.VALIDATING, changes=[StatusChange(JobStatus.VALIDATING)]
        )
        self._state: JobState | None = None
        self._sa = True
        self._unblocked = ("", "")  # status and message to go back to after a block
        self._blocking = Blocking(self._on_blocked, self._on_clear)
        self._d: JobDecisions | None = None
        self._outcomes: BootOutcomes | None = None
        self._kernels: Kernels | None = None
        self._wild_at_hold = 0  # boots set aside as wild when the job last held for them
        self._recorded: set[str] = set()

    # --- watching and steering -------------------------------------------------------
    @workflow.query(name="progress")
    def progress(self) -> Progress:
        return self._progress

    def status_word(self) -> str:
        return self._progress.status

    @workflow.update(name="mark")
    def mark(self, req: MarkRequest) -> str:
        assert self._state is not None
        verdict = Verdict(req.verdict)
        step = Step(
            commit=req.commit,
            subject=self._state.subjects.get(req.commit, ""),
            verdict=verdict,
            source=StepSource.MARKED,
            note="marked by a person",
        )
        self._apply(req.commit, state_for(verdict, self._state.mode), step)
        return f"{req.commit[:12]} marked {verdict}"

    @mark.validator
    def _validate_mark(self, req: MarkRequest) -> None:
        if self._state is None or self._d is None:
            raise ValueError("the job is still validating: mark once it is bisecting")
        if req.verdict not in tuple(Verdict):
            raise ValueError(f"verdict must be good, bad or skip, not {req.verdict!r}")
        search = self._state.search
        if req.commit not in search.graph.parents and req.commit not in search.old:
            raise ValueError(f"{req.commit[:12]} is not in this job's range")
        if self._progress.status not in (JobStatus.BISECTING, JobStatus.CALIBRATING):
            raise ValueError(f"the job is {self._progress.status}: nothing left to mark")

    # --- the job ---------------------------------------------------------------------
    @workflow.run
    async def run(self, req: BisectRequest) -> BisectResult:
        """Validate the range, boot what the engine asks for until it has decided, then
        verify, trace and report the answer."""
        calls = JobActivities(JobSite.of(req, req.fixups), self._blocking)
        try:
            state = await self._validate(req, calls)
            for patch in DEPRECATED:
                workflow.deprecate_patch(patch)
            d = self._start_decisions(state)
            self._kernels = Kernels(state, calls, self._show_building)
            await self._search(state, calls, d)
            return await self._conclude(state, calls, d)
        except JobFailed as err:
            self._set_status(JobStatus.FAILED, err.message)
            raise
        except ActivityError as err:
            # bad input an activity found past validation (a kernel without a module the
            # testcase needs): the job is listed as failed, with that line, not as running
            if cause_type(err) == ErrorType.USER and workflow.patched(USER_FAILURE_PATCH):
                self._set_status(JobStatus.FAILED, cause(err))
            raise

    async def _validate(self, req: BisectRequest, calls: JobActivities) -> JobState:
        self._sa = req.search_attributes
        self._progress.mode, self._progress.testcase = req.mode, req.testcase
        self._progress.repo = req.repo
        self._upsert(SA_TESTCASE.value_set(req.testcase), SA_STATUS.value_set("validating"))
        try:
            job = await calls.validate(req)
        except ActivityError as err:
            raise_if_cancelled(err)
            raise JobFailed(cause(err)) from err
        self._state = state = JobState.of(req, job)
        calls.subjects = state.subjects  # the activities' summaries name each commit
        self._progress.metric, self._progress.unit = job.primary, job.unit
        self._progress.old, self._progress.new = job.old, job.new
        return state

    # --- the search -----------------------------------------------------------------
    @property
    def kernels(self) -> Kernels:
        assert self._kernels is not None, "no kernels before the job is validated"
        return self._kernels

    @property
    def outcomes(self) -> BootOutcomes:
        assert self._outcomes is not None, "no boots before the decisions start"
        return self._outcomes

    def _start_decisions(self, state: JobState) -> JobDecisions:
        config = engine_report.config_of(state.req, state.job)
        flaky = state.job.pass_fail and state.job.flaky
        graph, new, old = state.search.graph, state.job.new, state.job.old
        job = workflow.info().workflow_id
        self._d = JobDecisions(Setup.of(job, graph, new, list(old), config, flaky))
        self._outcomes = BootOutcomes(state, self._d, self._progress, self._refresh)
        return self._d

    async def _unless_unfit(self, d: JobDecisions) -> None:
        """A host whose boots keep reading wild is unfit for timing: the job says so and
        waits for `kbisect resume` (once the host is quiet) rather than boot on; again
        after as many more wild boots."""
        wild = sum(len(places) for places in d.plan.set_aside.values())
        if d.plan.unfit and wild >= self._wild_at_hold + UNFIT_WILD:
            self._wild_at_hold = wild
            await self._blocking.hold(d.plan.unfit)

    async def _search(self, state: JobState, calls: JobActivities, d: JobDecisions) -> None:
        """Boot what the engine wants, a round at a time, until it has decided."""
        self._set_status(JobStatus.CALIBRATING, "booting both endpoints until they differ")
        rounds = BootRounds(
            state,
            calls,
            self.kernels,
            d,
            self.outcomes,
            lambda picks: self._decided(state, picks),
            self._showing,
        )
        round_ = 0
        while commits := await d.wants():
            self._decided(state, round_)
            await self._unless_unfit(d)
            round_ += 1
            self._showing(list(commits))
            # All of a round's builds first: a build never shares the host with a boot
            # of the same job (a timing would be disturbed).
            await asyncio.gather(*(self.kernels.build(c) for c in commits))
            await self.kernels.same_kernels(d, commits)
            if rounds.in_duets():
                await rounds.duets(commits)
                commits = []
            await rounds.build_ahead()
            # each VM host's lock still times one guest at a time
            boots = [c for c in commits if c not in d.plan.same_as and not d.gated_same]
            await asyncio.gather(*(rounds.boot(c) for c in boots))
            self._progress.current = []
            if await rounds.rolls():  # until no host has a pick; then wants() ends it
                round_ = await rounds.roll(round_)
        self.kernels.stop_ahead()
        self._record_decisions(state, round_)
        if self._progress.status == JobStatus.CALIBRATING:
            self._record_endpoints(state)
        else:
            self._bring_up_to_date(state)

    def _decided(self, state: JobState, round_: int) -> None:
        """Steps for the verdicts the engine has reached; calibrating ends once the gate
        says the endpoints differ."""
        d = self._d
        assert d is not None
        self._record_decisions(state, round_)
        gate = d.plan.gate
        if gate and d.bisecting and self._progress.status == JobStatus.CALIBRATING:
            self._record_endpoints(state)
            self._set_status(JobStatus.BISECTING, f"{state.job.primary} {gate.message}")
        elif self._progress.status == JobStatus.BISECTING:
            self._bring_up_to_date(state)

    def _record_endpoints(self, state: JobState) -> None:
        assert self._d is not None
        ends = (self._d.old_end, self._d.new_end)
        for commit in ends:  # an endpoint never booted (identical images) has its step too
            self.outcomes.seen.setdefault(commit, Seen())
        measured = self.outcomes.measured()
        for commit in ends:
            subject = state.subjects.get(commit, "")
            old = commit == self._d.old_end
            self._record(
                engine_report.endpoint_step(old, commit, subject, state.mode, measured[commit])
            )

    def _bring_up_to_date(self, state: JobState) -> dict[str, Measured]:
        """The steps with the boots since their verdicts, as the ended job's report has
        them (references go on while bisecting: the endpoints' steps kept calibration's
        "5+5 boots" with 12+12 booted); what was measured."""
        assert self._d is not None
        measured = self.outcomes.measured()
        engine_report.bring_up_to_date(self._progress.steps, measured, self._d.plan, state.mode)
        self._refresh()
        return measured

    def _record_decisions(self, state: JobState, round_: int) -> None:
        assert self._d is not None
        plan, subjects, kept = self._d.plan, state.subjects, self.outcomes.kept()
        measured = self.outcomes.measured()
        for step in engine_report.new_steps(
            plan, self._recorded, kept, measured, subjects, state.mode, round_
        ):
            self._record(step)

    async def _conclude(
        self, state: JobState, calls: JobActivities, d: JobDecisions
    ) -> BisectResult:
        res = d.result
        self._record_decisions(state, 0)  # a step still to add for a kept boot
        measured = self._bring_up_to_date(state)
        extra: dict[str, object] = {"effect": res.effect, "boots": res.boots, "notes": res.notes}
        extra["change"] = engine_report.endpoint_change(
            res.change,
            measured.get(d.old_end),
            measured.get(d.new_end),
            state.job.pass_fail,
            d.record.setup.flaky,
        )
        ended = engine_report.gate_outcome(
            d.plan, d.record.setup.flaky, state.mode, state.job.primary, state.job.pass_fail
        )
        if ended:
            return self._finish(ended[0], None, [], ended[1], extra)
        if not res.culprit:
            message = f"{res.message}; one of them is the {state.mode.change_word}"
            return self._finish(JobStatus.AMBIGUOUS, None, res.candidates, message, extra)
        subject = state.subjects.get(res.culprit, "")
        effect = (
            engine_report.pass_fail_effect(d.plan, d.new_end, d.old_end, measured)
            if state.job.pass_fail
            else f"{state.job.primary} {res.effect}"
        )
        message = (
            f"{state.mode.culprit_word} commit: {res.culprit} {subject} "
            f"({res.confidence:.1%} sure; {effect})"
        )
        after = verification.Ended(
            state, calls, self.kernels, d, self._verifying, self.outcomes.show
        )
        if state.req.verify:
            v = await verification.verify(after, res.culprit, self._showing)
            self._progress.verification = v
            message += f"; {v.status}: {v.message}"
        if state.req.trace:
            extra["diagnostics"] = await verification.trace(after, res.culprit)
        extra["confidence"] = res.confidence
        if state.job.pass_fail:
            extra["bad_boot"] = self._bad_boot(res.culprit, d)
        return self._finish(JobStatus.FOUND, res.culprit, res.candidates, message, extra)

    def _bad_boot(self, culprit: str, d: JobDecisions) -> BadBoot | None:
        """The console of a bad boot for the report: the culprit's own (regression), else
        the nearest bad kernel booted (in fix mode the culprit is good: the old endpoint).
        A culprit named through its twin (a byte-identical image) shows its twin's boot."""
        kernel, same_as, seen = culprit, d.plan.same_as, self.outcomes.seen
        while kernel not in seen and kernel in same_as:
            kernel = same_as[kernel]
        for commit in (kernel, d.new_end, d.old_end):
            m = seen.get(commit)
            if m is not None and m.bad is not None:
                return BadBoot(commit, m.bad.bad, m.bad.excerpt)
        return None

    # --- state and display -----------------------------------------------------------
    def _verifying(self, message: str) -> None:
        self._set_status(JobStatus.VERIFYING, message)

    def _showing(self, commits: list[str]) -> None:
        self._progress.current = commits
        self._refresh()

    def _show_building(self, building: dict[str, str]) -> None:
        if building != self._progress.building:
            self._progress.building = building
            self._refresh()

    def _record(self, step: Step) -> None:
        step.index = self._state.index(step.commit) if self._state else -1
        self._progress.steps.append(step)
        self._refresh()

    def _apply(self, commit: str, state: State, step: Step) -> None:
        assert self._d is not None
        self._d.mark(commit, state)
        self._recorded.add(commit)
        self.outcomes.marked(commit)
        self._record(step)

    def _refresh(self) -> None:
        subjects: dict[str, str] = {}
        if self._d is not None and self._d.asked:
            self._progress.candidates = self._d.plan.candidates
            self._progress.steps_left = self._d.plan.steps_left
            self._progress.likeliest = dict(self._d.plan.likeliest)
        elif self._state is not None:  # nothing asked yet: the whole range
            self._progress.candidates = len(strategy.candidates(self._state.search))
            self._progress.steps_left = strategy.steps_left(self._state.search)
        if self._state is not None:
            subjects = self._state.subjects
        workflow.set_current_details(details_markdown(self._progress, subjects))

    def _set_status(self, status: JobStatus, message: str) -> None:
        p = self._progress
        if status != p.status and len(p.changes) < STATUS_CHANGES_KEPT:
            p.changes.append(StatusChange(status, message))
        p.status, p.message = status, message
        self._upsert(SA_STATUS.value_set(status))
        self._refresh()

    def _on_blocked(self, problem: str, first: bool) -> None:
        if first:
            self._unblocked = (self._progress.status, self._progress.message)
        job_id = workflow.info().workflow_id
        message = f"{problem}; fix the host, then run: kbisect resume {job_id}"
        self._set_status(JobStatus.BLOCKED, message)

    def _on_clear(self) -> None:
        status, message = self._unblocked
        self._set_status(JobStatus(status), message)

    def _upsert(self, *updates: object) -> None:
        if self._sa:
            workflow.upsert_search_attributes(list(updates))  # type: ignore[arg-type]

    def _finish(
        self,
        status: JobStatus,
        culprit: str | None,
        candidates: list[str],
        message: str,
        extra: dict[str, object] | None = None,
    ) -> BisectResult:
        assert self._state is not None
        self._progress.current = []
        self._set_status(status, message)
        if culprit:
            self._upsert(SA_CULPRIT.value_set(culprit))
        progress = self._progress
        return job_report.result_of(
            self._state,
            status,
            culprit,
            candidates,
            progress.steps,
            message,
            progress.verification,
            extra or {},
        )
