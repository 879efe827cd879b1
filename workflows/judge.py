"""What a step's results mean: pure functions over plain data, table-tested.

The workflow runs the activities; these decide. A commit that does not build or boot is
skipped; a score is placed between the endpoints (workflows.verdict.classify); a score in
the undecided middle is measured again before it is skipped; the named commit, reverted
or applied, must behave like the expected endpoint.
"""

import statistics
from dataclasses import dataclass, replace

from kbisect.contract import (
    BuildResult,
    Mode,
    Step,
    StepSource,
    TestResult,
    TestStatus,
    Verdict,
    Verification,
    VerificationStatus,
)
from kbisect.workflows.strategy import State
from kbisect.workflows.verdict import Calibration, classify, verdict_for


@dataclass(frozen=True)
class Judgement:
    state: State
    step: Step


def endpoint_problem(word: str, commit: str, build: BuildResult, test: TestResult | None) -> str:
    """Why an endpoint cannot anchor the bisection ('' when it can): the user passed it."""
    if not build.ok:
        return (
            f"the {word} endpoint {commit[:12]} does not build: {build.error} "
            f"(log: {build.log}); pass a {word} revision that builds"
        )
    if test is None or test.status != TestStatus.OK:
        error, console = (test.error, test.console) if test else ("no test ran", "")
        return (
            f"the {word} endpoint {commit[:12]} failed: {error} "
            f"(console: {console}); pass a {word} revision that runs the testcase"
        )
    return ""


def endpoint_step(
    commit: str,
    subject: str,
    old: bool,
    mode: Mode,
    build: BuildResult,
    test: TestResult,
    primary: str,
) -> Step:
    return Step(
        commit=commit,
        subject=subject,
        verdict=mode.old_word if old else mode.new_word,
        source=StepSource.ENDPOINT,
        value=test.values.get(primary),
        values=test.values,
        position=0.0 if old else 1.0,
        build_seconds=build.seconds,
        test_seconds=test.seconds,
    )


def judge_step(
    step: Step,
    build: BuildResult,
    test: TestResult | None,
    calibration: Calibration,
    primary: str,
    mode: Mode,
) -> Judgement:
    """The verdict of a tested commit. `step` carries commit, subject and round."""
    step = replace(step, build_seconds=build.seconds, verdict=Verdict.SKIP)
    if not build.ok:
        return Judgement(
            State.SKIP, replace(step, source=StepSource.BUILD_FAILED, note=build.error)
        )
    if test is None or test.status != TestStatus.OK:
        assert test is not None
        skipped = replace(
            step, source=StepSource(test.status), note=test.error, test_seconds=test.seconds
        )
        return Judgement(State.SKIP, skipped)
    value = test.values[primary]
    c = classify(value, calibration)
    step = replace(
        step,
        source=StepSource.TEST,
        value=value,
        values=test.values,
        position=c.position,
        margin=c.margin,
        test_seconds=test.seconds,
        verdict=verdict_for(c.state, mode),
    )
    if c.state == State.SKIP:
        step = replace(step, note="between the endpoints: neither good nor bad")
    return Judgement(c.state, step)


def needs_retest(j: Judgement) -> bool:
    """Unsure is noise more often than not: measure again, longer, before skipping."""
    return j.state == State.SKIP and j.step.source == StepSource.TEST


def merge_retest(first: TestResult, again: TestResult, primary: str) -> TestResult:
    """Both measurements of one build as one result: the primary metric's median over all
    samples (the retest's values for the other metrics)."""
    if again.status != TestStatus.OK:
        return first
    samples = first.samples + again.samples
    value = statistics.median(samples)
    return replace(
        first,
        values={**again.values, primary: value},
        samples=samples,
        seconds=first.seconds + again.seconds,
    )


def judge_retested(
    step: Step,
    build: BuildResult,
    first: TestResult,
    again: TestResult,
    calibration: Calibration,
    primary: str,
    mode: Mode,
) -> Judgement:
    merged = merge_retest(first, again, primary)
    j = judge_step(step, build, merged, calibration, primary, mode)
    if again.status == TestStatus.OK and j.state != State.SKIP:
        note = f"unsure at first: retested, median of {len(merged.samples)} samples"
        return Judgement(j.state, replace(j.step, note=note))
    return j


def verification_of(
    base: Verification,
    build: BuildResult,
    test: TestResult | None,
    calibration: Calibration,
    primary: str,
) -> Verification:
    """The named commit reverted on new must behave like old (regression), applied to old
    like new (fix); between the endpoints, or not building or booting, is inconclusive."""
    revert = base.kind == "revert"
    where = "reverted on the new endpoint" if revert else "applied to the old endpoint"
    if not build.ok:
        return replace(base, message=f"{where}, it does not build: {build.error}")
    assert test is not None
    if test.status != TestStatus.OK:
        return replace(base, message=f"{where}, it fails: {test.error}")
    value = test.values[primary]
    c = classify(value, calibration)
    done = replace(base, value=value, values=test.values, position=c.position)
    if c.state == State.SKIP:
        return replace(done, message=f"{where}, {primary} is {value:g}: between the endpoints")
    expected = State.OLD if revert else State.NEW
    side = "old" if c.state == State.OLD else "new"
    return replace(
        done,
        status=VerificationStatus.CONFIRMED
        if c.state == expected
        else VerificationStatus.CONTRADICTED,
        message=f"{where}, {primary} is {value:g}, like the {side} endpoint",
    )
