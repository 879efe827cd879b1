"""After the search: the named commit verified (reverted on the new endpoint, or applied
to the old one, and booted until the engine's test decides) and, with --trace, traced.

Workflow code only. `say` sets the job's status line; `showing` the commits under test.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.exceptions import ActivityError

from kbisect.contract import Mode, TestResult, TestStatus
from kbisect.decide import engine_report
from kbisect.decide.record import Run
from kbisect.workflows.activity_calls import JobActivities, cause, raise_if_cancelled
from kbisect.workflows.bisect_types import Verification, VerificationStatus
from kbisect.workflows.job_decisions import JobDecisions
from kbisect.workflows.job_state import JobState
from kbisect.workflows.kernels import Kernels


@dataclass(frozen=True)
class Ended:
    """A job whose search has ended, and its status line (`say`)."""

    state: JobState
    calls: JobActivities
    kernels: Kernels
    d: JobDecisions
    say: Callable[[str], None]
    show: Callable[[str, int, TestResult, str], None]  # a boot's line (BootOutcomes.show)


async def verify(job: Ended, culprit: str, showing: Callable[[list[str]], None]) -> Verification:
    """Revert the culprit on the new endpoint (or apply the fix to the old one) and boot
    that: it must behave like the old endpoint (or like the new one)."""
    state, calls, say = job.state, job.calls, job.say
    revert = state.req.mode == Mode.REGRESSION
    onto = state.job.new if revert else state.job.old[0]
    v = Verification(
        kind="revert" if revert else "backport",
        change=culprit,
        onto=onto,
        status=VerificationStatus.INCONCLUSIVE,
        message="",
    )
    where = "reverted on the new endpoint" if revert else "applied to the old endpoint"
    say(f"testing {culprit[:12]} {where}")
    try:
        made = await calls.prepare_verify(culprit, onto, revert)
        v.commit, v.subject = made.commit, made.subject
        if made.commit is None:
            v.message = made.error
            return v
        state.subjects.setdefault(made.commit, made.subject)  # its build's line names it
        showing([made.commit])
        return await _boots(job, v, made.commit, where)
    except ActivityError as err:  # the bisection's answer stands without it
        raise_if_cancelled(err)
        v.message = f"could not verify: {cause(err)}"
        return v
    finally:
        showing([])


async def _boots(job: Ended, v: Verification, commit: str, where: str) -> Verification:
    """Boots of the verification kernel until the engine's test decides, or its cap."""
    state, kernels, d = job.state, job.kernels, job.d
    raw: list[float] = []
    runs: list[Run] = []
    # On a host that swings, a boot of the kernel it was made from (v.onto, an endpoint)
    # before each boot: what that one reads beyond its side, the next shares
    beside = v.onto if d.plan.pairs_verification else None
    while True:
        base: list[float] = []
        if beside is not None:
            _, before = await kernels.built_and_tested(beside)
            if before is not None and before.status == TestStatus.OK:
                base = list(before.samples_of(state.job.primary))
                number = d.boots_of(beside) + len(runs) + 1  # after its own steps' boots
                job.show(beside, number, before, " (beside the verification)")
        build, test = await kernels.built_and_tested(commit)
        if not build.ok or test is None or test.status != TestStatus.OK:
            why = build.error if not build.ok else test.error if test else "no test ran"
            v.message = f"{where}, it does not build or run: {why}"
            return v
        v.values = test.values
        job.show(commit, len(runs) + 1, test, f" (verification: {where})")
        samples = test.samples_of(state.job.primary)
        raw.append(engine_report.boot_value(samples))
        runs.append(Run(list(samples), base))
        verifying = await d.judge(runs, new_side=beside == d.new_end)
        if verifying.decision is not None:
            break
    v = engine_report.verification_of(v, raw, verifying)
    if beside is not None:
        v.message += f"; each boot beside one of {beside[:12]}, as the host swings"
    if state.job.pass_fail and not state.job.flaky and v.status != VerificationStatus.CONFIRMED:
        v.message += "; if the failure comes and goes, bisect again with --flaky"
    return v


async def trace(job: Ended, culprit: str) -> dict[str, dict[str, Any]]:
    """A traced boot of each endpoint and of the named commit, one after another."""
    found: dict[str, dict[str, Any]] = {}
    for commit in dict.fromkeys((job.d.old_end, job.d.new_end, culprit)):
        job.say(f"tracing {commit[:12]} (blktrace)")
        build = await job.kernels.build(commit)
        if not build.ok or build.artifact is None:
            found[commit] = {"error": f"does not build: {build.error}"}
            continue
        try:
            traced = await job.calls.trace(job.state.job, commit, build.artifact)
        except ActivityError as err:  # the answer stands without its trace
            raise_if_cancelled(err)
            found[commit] = {"error": cause(err)}
            continue
        found[commit] = traced.diagnostics or {"error": traced.error}
    return found
