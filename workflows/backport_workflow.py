"""BackportWorkflow: the change a bisection found, taken to the kernel that ships, and
measured there before and after.

`kbisect backport JOB --target REV` starts it. A build host looks in the repository first
(builders.backport_plan): a target that already carries the change (a cherry-pick under
another hash) ends here, and so does a change that no series of upstream commits takes
there. Otherwise the target and the target with the series are built with the job's
config and booted in rounds on one VM host, as a sweep's pair is, until the engine's gate
decides (or the budget is spent): "verified" only when the series makes the target
better on the job's testcase. A workflow of its own: the bisection's history stays as it
was.
"""

import statistics

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from kbisect.contract import BACKPORT_WORKFLOW, PASS_FAIL_BOOTS, TestStatus
    from kbisect.decide.backport import failures, side_values, unlike_the_job
    from kbisect.decide.sweep import Sweep
    from kbisect.words import boots_a_side
    from kbisect.workflows.activity_calls import (
        Blocking,
        JobActivities,
        JobFailed,
        JobSite,
        ShowsStatus,
        plan_backport,
        testcase_job,
        validate_sweep,
    )
    from kbisect.workflows.backport_types import (
        BACKPORT_SIDES,
        BackportProgress,
        BackportRequest,
        BackportResult,
        BackportWord,
    )
    from kbisect.workflows.search_attributes import SA_TESTCASE
    from kbisect.workflows.series_measure import Builds, build_series, measure_series
    from kbisect.workflows.sweep_types import PairWord, SweepBoot, SweepJob, SweepRequest


@workflow.defn(name=BACKPORT_WORKFLOW)
class BackportWorkflow(ShowsStatus):
    _progress: BackportProgress
    _noun = "backport job"

    def __init__(self) -> None:
        self._progress = BackportProgress(status="planning")
        self._blocking = Blocking(self._on_blocked, self._on_clear)
        self._status = "planning"

    @workflow.query(name="progress")
    def progress(self) -> BackportProgress:
        return self._progress

    def _done(self, result: BackportResult) -> BackportResult:
        # `kbisect status` shows the answer's word: verified, already there, ...
        self._set("done", result.message, shown=result.word)
        return result

    @workflow.run
    async def run(self, req: BackportRequest) -> BackportResult:
        p = self._progress
        p.target, p.change = req.target, req.change
        if req.search_attributes:
            self._sa = True
            workflow.upsert_search_attributes([SA_TESTCASE.value_set(req.testcase)])
        try:
            plan = await plan_backport(req)
        except JobFailed as err:
            self._set("failed", err.message)
            raise
        p.series = plan.series
        result = BackportResult(
            word=plan.word, plan=plan, repo=req.repo, target=req.target,
            target_name=req.target_name, testcase=req.testcase, job=req.job,
            id=workflow.info().workflow_id, message=plan.message,
        )  # fmt: skip
        if plan.word:  # already there, or nothing applies: nothing to build
            return self._done(result)
        self._set("validating", plan.message)
        sweep_req = SweepRequest(
            req.repo, [req.target, plan.patched], [req.testcase], metric=req.metric,
            profile=req.profile, boots=req.boots, min_effect=req.min_effect,
            build_queue=req.build_queue, vm_queue=req.vm_queue, pass_fail_ok=True,
        )  # fmt: skip
        try:
            job = await validate_sweep(sweep_req)
        except JobFailed as err:
            self._set("failed", err.message)
            raise
        p.planned = 2 * req.boots
        calls = JobActivities(JobSite.of(req), self._blocking)
        sweep = Sweep(2, job.testcases, req.boots, req.min_effect)
        self._set("building", "the target without and with the series")
        builds = await build_series(calls, sweep, job)
        self._set("measuring", "the target without and with the series, in turn")
        result.testcases, result.boots = job.testcases, p.boots
        for side, commit in zip(BACKPORT_SIDES, job.kernels, strict=True):
            art = builds[job.testcases[0].name, commit].artifact
            result.kernels[side] = art.kernel if art else ""
        if job.testcases[0].pass_fail:
            p.pass_fail = True
            boots = req.boots if req.flaky else PASS_FAIL_BOOTS
            p.planned = 2 * boots
            await _pass_fail_boots(calls, job, builds, boots, p.boots)
            return self._done(_failures(result))
        await measure_series(calls, sweep, job, builds, p.boots)
        (pair,) = sweep.pairs()
        result.pair = pair
        unlike = unlike_the_job(req.good_value, req.bad_value, p.boots)
        verified = pair.verdict == PairWord.CHANGED and pair.direction == "better" and not unlike
        result.word = BackportWord.VERIFIED if verified else BackportWord.NOT_VERIFIED
        result.message = _figures(result) + (f"; but {unlike}" if unlike else "")
        return self._done(result)


async def _pass_fail_boots(
    calls: JobActivities, job: SweepJob, builds: Builds, boots: int, out: list[SweepBoot]
) -> None:
    """Each side booted `boots` times, in turn, one guest at a time: a boot is bad when the
    testcase fails or the kernel does not boot (no value, and why), good when it passes."""
    tc = job.testcases[0]
    tested = testcase_job(tc)
    for _ in range(boots):
        for k, commit in enumerate(job.kernels):
            art = builds[tc.name, commit].artifact
            if art is None:
                raise JobFailed(f"{commit[:12]} does not build: {builds[tc.name, commit].error}")
            test = await calls.test(tested, commit, art, tc.repetitions)
            passed = test.status == TestStatus.OK and not test.bad
            why = "" if passed else (test.bad or f"{test.status}: {test.error}")
            out.append(SweepBoot(tc.name, k, 1.0 if passed else None, host=test.host, error=why))


def _failures(r: BackportResult) -> BackportResult:
    """A pass/fail testcase's verdict: verified when the target fails and, with the series,
    passes every boot (the job's bad side, then its good side)."""
    r.failures = failures(r.boots)
    (bad, n), (still, m) = r.failures["without"], r.failures["with"]
    r.word = BackportWord.VERIFIED if bad > 0 and still == 0 else BackportWord.NOT_VERIFIED
    r.message = (
        f"{r.word}: {r.testcase} failed {bad} of {n} boots of {r.shown_target} without the "
        f"series, {still} of {m} with it"
    )
    return r


def _figures(r: BackportResult) -> str:
    """The verdict in one line, with the before and after."""
    pair = r.pair
    assert pair is not None
    name = r.shown_target
    if pair.effect is None:
        return f"{r.word}: {pair.message or 'no boot gave the metric'}"
    # the sides' levels first ("8 → 512 sectors"): a counter's change in percent says less
    sides = [side_values(r.boots, k) for k in (0, 1)]
    without, with_ = (statistics.median(v) if v else float("nan") for v in sides)
    interval = (
        f", 95% interval {pair.low:+.1%} to {pair.high:+.1%}"
        if pair.low is not None and pair.high is not None and pair.low != pair.high
        else ""
    )
    return (
        f"{r.word}: {pair.metric} on {name}, without → with the backport: "
        f"{without:g} → {with_:g} {pair.unit}".rstrip()
        + f" ({pair.effect:+.1%}{interval}; {pair.verdict}"
        + (f", {pair.direction}" if pair.direction else "")
        + f"; {boots_a_side(pair.boots_old, pair.boots_new)})"
    )
