"""BisectWorkflow: validate the range, search it with the evidence engine, conclude.

Each decision (what to boot next, what the boots say, the answer) is asked of
kbisect.decide through a local activity (workflows.job_decisions): the history records it
and a replay never runs decision code, so a better rule needs no marker. The activities
that touch git, make and QEMU are called through workflows.activity_calls. A change to
the workflow's own steps goes behind a patch marker (the table below); recorded histories
replay in tests/workflows/test_replay.py.
"""

import asyncio

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import (
        SA_CULPRIT_NAME,
        SA_STATUS_NAME,
        SA_TESTCASE_NAME,
        WORKFLOW,
        BadBoot,
        BisectRequest,
        BisectResult,
        BuildResult,
        JobStatus,
        MarkRequest,
        Progress,
        Step,
        StepSource,
        TestResult,
        TestStatus,
        Verdict,
    )
    from kbisect.decide import engine_report, strategy
    from kbisect.decide.endpoints import endpoint_problem
    from kbisect.decide.engine_report import Measured
    from kbisect.decide.evidence import Boot
    from kbisect.decide.record import Setup
    from kbisect.decide.strategy import State
    from kbisect.decide.verdict import state_for
    from kbisect.workflows import job_report, verification
    from kbisect.workflows.activity_calls import (
        Blocking,
        JobActivities,
        JobFailed,
        Resumable,
        cause,
    )
    from kbisect.workflows.details import details_markdown
    from kbisect.workflows.job_decisions import JobDecisions
    from kbisect.workflows.job_state import JobState
    from kbisect.workflows.kernels import Kernels

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
DEPRECATED = (
    ENGINE_PATCH,
    FAILED_STATUS_PATCH,
    SAME_KERNEL_PATCH,
    TRACE_PATCH,
    ROUND_AT_ONCE_PATCH,
    ROLLING_PATCH,
)

SA_TESTCASE = SearchAttributeKey.for_keyword(SA_TESTCASE_NAME)
SA_STATUS = SearchAttributeKey.for_keyword(SA_STATUS_NAME)
SA_CULPRIT = SearchAttributeKey.for_keyword(SA_CULPRIT_NAME)
SEARCH_ATTRIBUTES = (SA_TESTCASE, SA_STATUS, SA_CULPRIT)

# Deterministic, stateless modules are shared with the sandbox instead of re-imported per
# run (a re-import also makes two copies of each enum class, and `==` between them fails).
PASSTHROUGH = (
    "kbisect.contract",
    "kbisect.model",
    "kbisect.decide.strategy",
    "kbisect.decide.verdict",
    "kbisect.workflows.details",
    "kbisect.workflows.job_state",
    "kbisect.workflows.activity_calls",  # stateless; its timeouts can be tuned in tests
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
        self._progress = Progress(status=JobStatus.VALIDATING)
        self._state: JobState | None = None
        self._sa = True
        self._unblocked = ("", "")  # status and message to go back to after a block
        self._blocking = Blocking(self._on_blocked, self._on_clear)
        self._d: JobDecisions | None = None
        self._duets_asked = 0  # duets started (--duets): which half the probe takes
        self._rolling = False  # picks as hosts free up (ROLLING_PATCH)
        self._kernels: Kernels | None = None
        self._measured: dict[str, Measured] = {}
        self._recorded: set[str] = set()
        self._marked_meanwhile: set[str] = set()  # by a person while under test
        self._kept: list[str] = []  # booted after a person marked them: a step each to add

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
        calls = JobActivities(req, self._blocking)
        try:
            state = await self._validate(req, calls)
            for patch in DEPRECATED:
                workflow.deprecate_patch(patch)
            d = self._start_decisions(state)
            self._kernels = Kernels(state, calls)
            await self._search(state, calls, d)
            return await self._conclude(state, calls, d)
        except JobFailed as err:
            self._set_status(JobStatus.FAILED, err.message)
            raise

    async def _validate(self, req: BisectRequest, calls: JobActivities) -> JobState:
        self._sa = req.search_attributes
        self._progress.mode, self._progress.testcase = req.mode, req.testcase
        self._progress.repo = req.repo
        self._upsert(SA_TESTCASE.value_set(req.testcase), SA_STATUS.value_set("validating"))
        try:
            job = await calls.validate()
        except ActivityError as err:
            raise JobFailed(cause(err)) from err
        self._state = state = JobState.of(req, job)
        self._progress.metric, self._progress.unit = job.primary, job.unit
        self._progress.old, self._progress.new = job.old, job.new
        return state

    # --- the search -----------------------------------------------------------------
    @property
    def kernels(self) -> Kernels:
        assert self._kernels is not None, "no kernels before the job is validated"
        return self._kernels

    def _start_decisions(self, state: JobState) -> JobDecisions:
        config = engine_report.config_of(state.req, state.job)
        flaky = state.job.pass_fail and state.job.flaky
        graph, new, old = state.search.graph, state.job.new, state.job.old
        job = workflow.info().workflow_id
        self._d = JobDecisions(Setup.of(job, graph, new, list(old), config, flaky))
        return self._d

    async def _search(self, state: JobState, calls: JobActivities, d: JobDecisions) -> None:
        """Boot what the engine wants, a round at a time, until it has decided."""
        self._set_status(JobStatus.CALIBRATING, "booting both endpoints until they differ")
        round_ = 0
        while commits := await d.wants():
            self._record_decisions(state, round_)
            self._started_bisecting(state)
            round_ += 1
            self._progress.current = list(commits)
            self._refresh()
            # All of a round's builds first: a build never shares the host with a boot
            # of the same job (a timing would be disturbed).
            await asyncio.gather(*(self.kernels.build(c) for c in commits))
            await self.kernels.same_kernels(d, commits)
            if self._in_duets(state):
                await self._duets(state, calls, commits)
                commits = []
            await self._build_ahead(state)
            # each VM host's lock still times one guest at a time
            boots = [c for c in commits if c not in d.plan.same_as and not d.gated_same]
            await asyncio.gather(*(self._boot(state, calls, c) for c in boots))
            self._progress.current = []
            if await self._rolls(state):  # until no host has a pick; then wants() ends it
                round_ = await self._roll(state, calls, round_)
        self.kernels.stop_ahead()
        self._record_decisions(state, round_)
        if self._progress.status == JobStatus.CALIBRATING:
            self._record_endpoints(state)

    def _started_bisecting(self, state: JobState) -> None:
        """Calibrating ends once the gate says the endpoints differ."""
        d = self._d
        assert d is not None
        gate = d.plan.gate
        if gate and d.bisecting and self._progress.status == JobStatus.CALIBRATING:
            self._record_endpoints(state)
            self._set_status(JobStatus.BISECTING, f"{state.job.primary} {gate.message}")

    def _in_duets(self, state: JobState) -> bool:
        """--duets, where they mean something: a timing (a pass/fail boot is none, and a
        counter's one boot a commit needs no reference beside it)."""
        assert self._d is not None
        return state.req.duets and not self._d.plan.counter and not state.job.pass_fail

    async def _rolls(self, state: JobState) -> bool:
        """Whether the rest of the search picks a boot for each VM host as it frees up: a
        noisy metric (known once both endpoints booted) at --parallel 2 or more, on a
        farm. On one host rounds stay: all of a round's builds go before its boots."""
        assert self._d is not None
        if self._in_duets(state):
            return False  # a duet's pair goes out together, round by round
        if not self._rolling and state.req.parallel > 1 and self._apart():
            self._rolling = (await self._d.fresh()).noisy
        return self._rolling

    async def _roll(self, state: JobState, calls: JobActivities, picks: int) -> int:
        """Keep --parallel K boots in flight; as each ends, the host that ran it is handed
        the next (the engine's next_for), so no round waits for its slowest boot or its
        last build (benchmarks.farm --rolling). A VM worker takes one guest at a time, so
        the freed host is the one polling for it; a boot that lands elsewhere is still
        judged against the references of the host it ran on. Returns the picks made."""
        running: dict[asyncio.Task[str | None], str] = {}
        try:
            return await self._rolling_picks(state, calls, picks, running)
        finally:  # a job cancelled or failed stops its other boots too, as a round would
            for task in running:
                task.cancel()

    async def _rolling_picks(
        self,
        state: JobState,
        calls: JobActivities,
        picks: int,
        running: dict[asyncio.Task[str | None], str],
    ) -> int:
        d = self._d
        assert d is not None
        hosts: list[str | None] = [None] * state.req.parallel  # hosts not known yet
        while True:
            idle = []
            for host in hosts:  # every free slot asks; one with nothing now waits
                commit = await d.next_for(host, list(running.values()))
                if commit is None:
                    idle.append(host)
                    continue
                picks += 1
                self._record_decisions(state, picks)
                self._started_bisecting(state)
                task = asyncio.ensure_future(self._pick_booted(state, calls, commit))
                running[task] = commit
                await self._build_ahead(state)
            self._progress.current = list(running.values())
            self._refresh()
            if not running:
                return picks
            done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
            ended = [t for t in running if t in done]  # in start order: deterministic
            for task in ended:
                running.pop(task)
            hosts = idle + [task.result() for task in ended]

    async def _pick_booted(self, state: JobState, calls: JobActivities, commit: str) -> str | None:
        """A rolling pick: built, classified, booted. The VM host that ran it (None: it
        did not boot)."""
        assert self._d is not None
        await self.kernels.build(commit)
        await self.kernels.same_kernels(self._d, [commit])
        if commit in self._d.plan.same_as:
            return None  # its kernel is another's: that one's boots decide
        return await self._boot(state, calls, commit)

    async def _build_ahead(self, state: JobState) -> None:
        """On a farm (builds and boots on different hosts) with --parallel K, each build
        host builds one commit the next rounds will likely pick while this round boots: a
        round that waits for its builds is most of a farm's lost time (benchmarks.farm).
        More would delay the builds a round needs. On one host a build would hold the
        guests back: none then."""
        assert self._d is not None
        if self._apart() and state.req.parallel >= 2:
            await self.kernels.build_ahead(self._d)

    def _apart(self) -> bool:
        """Whether the job's builds and boots have run on different hosts (a farm)."""
        vm_hosts = {h for m in self._measured.values() for h in m.hosts}
        build_hosts = self.kernels.build_hosts()
        return bool(vm_hosts and build_hosts) and not vm_hosts & build_hosts

    async def _boot(self, state: JobState, calls: JobActivities, commit: str) -> str | None:
        """One boot of `commit` (built once), its samples given to the engine. The VM host
        that ran it (None: no test ran)."""
        build, test = await self.kernels.built_and_tested(commit)
        return self._take(state, commit, build, test)

    async def _duets(self, state: JobState, calls: JobActivities, commits: list[str]) -> None:
        """A round in duets (--duets), paired by the engine (its duet_pairs), each pair at
        one moment on one VM host (benchmarks.accuracy --duet simulates this driver)."""
        assert self._d is not None
        if self._d.gated_same:
            return
        pairs = await self._d.pairs(commits)
        # each VM host takes one duet at a time
        await asyncio.gather(*(self._duet(state, calls, p) for p in pairs))

    async def _duet(self, state: JobState, calls: JobActivities, pair: tuple[str, str]) -> None:
        """Both kernels booted at one moment, the second's boot beside the first's. A
        kernel that does not build or boot is skipped as ever; its partner's boot is
        dropped (it ran beside no guest, or one that died, so at another level)."""
        builds = [await self.kernels.build(c) for c in pair]
        arts = [b.artifact for b in builds if b.ok and b.artifact is not None]
        if len(arts) < len(pair):
            for commit, build in zip(pair, builds, strict=True):
                if not build.ok:
                    self._take(state, commit, build, None)
            return
        # The halves of the host may differ (one takes the interrupts): the probe takes
        # the first half in every other duet, so that cancels instead of leaning one way.
        self._duets_asked += 1
        order = [1, 0] if self._duets_asked % 2 == 0 else [0, 1]
        kernels = [(pair[i], arts[i]) for i in order]
        by_half = await calls.duet(state.job, kernels)
        tests = [by_half[order.index(i)] for i in range(len(pair))]
        both = all(t.status == TestStatus.OK for t in tests)
        for i, (commit, build, test) in enumerate(zip(pair, builds, tests, strict=True)):
            if both or test.status != TestStatus.OK:
                self._take(state, commit, build, test, beside=i > 0)

    def _take(
        self,
        state: JobState,
        commit: str,
        build: BuildResult,
        test: TestResult | None,
        beside: bool = False,
    ) -> str | None:
        """A boot's outcome given to the engine (`beside`: the boot taken just before this
        one ran at the same moment, a duet). The VM host that ran it (None: none ran)."""
        d = self._d
        assert d is not None
        m = self._measured.setdefault(commit, Measured())
        m.build_seconds = build.seconds
        if commit in (d.old_end, d.new_end):
            word = state.mode.old_word if commit == d.old_end else state.mode.new_word
            if problem := endpoint_problem(word, commit, build, test):
                raise JobFailed(problem)
        if test is None or test.status != TestStatus.OK:
            m.failed = StepSource(test.status) if test else StepSource.BUILD_FAILED
            m.failure = test.error if test else build.error
            d.failed(commit)
            return test.host if test else None
        samples = test.samples_of(state.job.primary)
        m.raw.append(engine_report.boot_value(samples))
        m.repetitions.append(list(samples))
        m.hosts.append(test.host)
        m.last, m.test_seconds = test, m.test_seconds + test.seconds
        if test.bad and m.bad is None:
            m.bad = test
        exact = state.job.pass_fail and not state.job.flaky
        d.boot(commit, Boot(samples, test.host, exact=exact, beside=beside))
        self._progress.boots += 1
        m.boot_numbers.append(self._progress.boots)
        said = (
            (f"bad ({test.bad})" if test.bad else "good")
            if state.job.pass_fail
            else f"{state.job.primary} {m.raw[-1]:g}"
        )
        self._progress.last_boot = f"{commit[:12]} boot {len(m.raw)}: {said}"
        self._refresh()
        if commit in self._marked_meanwhile:  # its step once the engine has the boot
            self._marked_meanwhile.discard(commit)
            self._kept.append(commit)
        return test.host

    def _record_endpoints(self, state: JobState) -> None:
        assert self._d is not None
        for commit in (self._d.old_end, self._d.new_end):
            self._record(
                engine_report.endpoint_step(
                    commit == self._d.old_end,
                    commit,
                    state.subjects.get(commit, ""),
                    state.mode,
                    self._measured.setdefault(commit, Measured()),
                )
            )

    def _record_decisions(self, state: JobState, round_: int) -> None:
        assert self._d is not None
        plan, subjects = self._d.plan, state.subjects
        recorded, kept, measured = self._recorded, self._kept, self._measured
        for step in engine_report.new_steps(
            plan, recorded, kept, measured, subjects, state.mode, round_
        ):
            self._record(step)
        self._kept = []

    async def _conclude(
        self, state: JobState, calls: JobActivities, d: JobDecisions
    ) -> BisectResult:
        res = d.result
        self._record_decisions(state, 0)  # a step still to add for a kept boot
        engine_report.bring_up_to_date(self._progress.steps, self._measured, d.plan, state.mode)
        extra: dict[str, object] = {"effect": res.effect, "boots": res.boots, "notes": res.notes}
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
            engine_report.pass_fail_effect(d.plan, d.new_end, d.old_end, self._measured)
            if state.job.pass_fail
            else f"{state.job.primary} {res.effect}"
        )
        message = (
            f"{state.mode.culprit_word} commit: {res.culprit} {subject} "
            f"({res.confidence:.1%} sure; {effect})"
        )
        after = verification.Ended(state, calls, self.kernels, d, self._verifying)
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
        kernel, same_as = culprit, d.plan.same_as
        while kernel not in self._measured and kernel in same_as:
            kernel = same_as[kernel]
        for commit in (kernel, d.new_end, d.old_end):
            m = self._measured.get(commit)
            if m is not None and m.bad is not None:
                return BadBoot(commit, m.bad.bad, m.bad.excerpt)
        return None

    # --- state and display -----------------------------------------------------------
    def _verifying(self, message: str) -> None:
        self._set_status(JobStatus.VERIFYING, message)

    def _showing(self, commits: list[str]) -> None:
        self._progress.current = commits
        self._refresh()

    def _record(self, step: Step) -> None:
        step.index = self._state.index(step.commit) if self._state else -1
        self._progress.steps.append(step)
        self._refresh()

    def _apply(self, commit: str, state: State, step: Step) -> None:
        assert self._d is not None
        self._d.mark(commit, state)
        self._recorded.add(commit)
        self._marked_meanwhile.add(commit)
        self._record(step)

    def _refresh(self) -> None:
        subjects: dict[str, str] = {}
        if self._d is not None and self._d.asked:
            self._progress.candidates = self._d.plan.candidates
            self._progress.steps_left = self._d.plan.steps_left
        elif self._state is not None:  # nothing asked yet: the whole range
            self._progress.candidates = len(strategy.candidates(self._state.search))
            self._progress.steps_left = strategy.steps_left(self._state.search)
        if self._state is not None:
            subjects = self._state.subjects
        workflow.set_current_details(details_markdown(self._progress, subjects))

    def _set_status(self, status: JobStatus, message: str) -> None:
        self._progress.status, self._progress.message = status, message
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
