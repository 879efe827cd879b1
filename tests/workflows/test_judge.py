"""The judgements inside the workflow, as pure functions: table-tested."""

import pytest

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
from kbisect.model import Artifact
from kbisect.workflows import judge
from kbisect.workflows.strategy import State
from kbisect.workflows.verdict import Calibration

CAL = Calibration(metric="sectors", old=[512.0, 512.0], new=[8.0, 8.0])
ART = Artifact(commit="c", tree="t", config_hash="h", kernel="/k", config="/c", build_log="/l")
BUILT = BuildResult(commit="c", ok=True, artifact=ART, seconds=12.0)
BROKEN = BuildResult(commit="c", ok=False, error="kernel does not build: x.c", seconds=3.0)
STEP = Step(commit="c", subject="s", verdict=Verdict.SKIP, source=StepSource.TEST, round=2)


def ok(*samples: float) -> TestResult:
    median = sorted(samples)[len(samples) // 2]
    return TestResult("c", TestStatus.OK, {"sectors": median}, list(samples), seconds=5.0)


@pytest.mark.parametrize(
    ("build", "test", "mode", "state", "verdict", "source"),
    [
        (BROKEN, None, Mode.REGRESSION, State.SKIP, Verdict.SKIP, StepSource.BUILD_FAILED),
        (
            BUILT,
            TestResult("c", TestStatus.BOOT_FAILED, error="panic: x"),
            Mode.REGRESSION,
            State.SKIP,
            Verdict.SKIP,
            StepSource.BOOT_FAILED,
        ),
        (BUILT, ok(500, 510, 512), Mode.REGRESSION, State.OLD, Verdict.GOOD, StepSource.TEST),
        (BUILT, ok(500, 510, 512), Mode.FIX, State.OLD, Verdict.BAD, StepSource.TEST),
        (BUILT, ok(8, 9, 8), Mode.REGRESSION, State.NEW, Verdict.BAD, StepSource.TEST),
        (BUILT, ok(8, 9, 8), Mode.FIX, State.NEW, Verdict.GOOD, StepSource.TEST),
        (BUILT, ok(260, 250, 270), Mode.REGRESSION, State.SKIP, Verdict.SKIP, StepSource.TEST),
    ],
)
def test_judge_step(
    build: BuildResult,
    test: TestResult | None,
    mode: Mode,
    state: State,
    verdict: Verdict,
    source: StepSource,
) -> None:
    j = judge.judge_step(STEP, build, test, CAL, "sectors", mode)
    assert (j.state, j.step.verdict, j.step.source) == (state, verdict, source)
    assert j.step.round == 2 and j.step.build_seconds == build.seconds
    assert judge.needs_retest(j) == (state == State.SKIP and source == StepSource.TEST)


def test_a_failed_step_keeps_its_error() -> None:
    j = judge.judge_step(STEP, BROKEN, None, CAL, "sectors", Mode.REGRESSION)
    assert j.step.note == "kernel does not build: x.c" and j.step.value is None


def test_a_retest_that_decides_says_so() -> None:
    first = ok(260, 250, 270)
    j = judge.judge_retested(STEP, BUILT, first, ok(*[500.0] * 6), CAL, "sectors", Mode.FIX)
    assert (j.state, j.step.verdict) == (State.OLD, Verdict.BAD)
    assert j.step.note == "unsure at first: retested, median of 9 samples"
    assert j.step.test_seconds == 10.0 and j.step.value == 500.0


def test_a_retest_that_fails_keeps_the_commit_skipped() -> None:
    failed = TestResult("c", TestStatus.BOOT_FAILED, error="panic")
    j = judge.judge_retested(STEP, BUILT, ok(260, 250, 270), failed, CAL, "sectors", Mode.FIX)
    assert j.state == State.SKIP and j.step.note == "between the endpoints: neither good nor bad"
    assert j.step.value == 260


def test_endpoint_problems_name_the_endpoint_and_what_to_do() -> None:
    assert judge.endpoint_problem(Verdict.GOOD, "a" * 40, BUILT, ok(512)) == ""
    problem = judge.endpoint_problem(Verdict.GOOD, "a" * 40, BROKEN, None)
    assert problem.startswith("the good endpoint aaaaaaaaaaaa does not build")
    assert problem.endswith("pass a good revision that builds")
    boot = TestResult("c", TestStatus.BOOT_FAILED, error="panic: y", console="/con")
    problem = judge.endpoint_problem(Verdict.BAD, "b" * 40, BUILT, boot)
    assert "failed: panic: y (console: /con)" in problem


def _base(kind: str) -> Verification:
    return Verification(kind, "c", "o", VerificationStatus.INCONCLUSIVE, "")


@pytest.mark.parametrize(
    ("kind", "build", "test", "status", "words"),
    [
        ("revert", BUILT, ok(512), VerificationStatus.CONFIRMED, "like the old endpoint"),
        ("revert", BUILT, ok(8), VerificationStatus.CONTRADICTED, "like the new endpoint"),
        ("backport", BUILT, ok(8), VerificationStatus.CONFIRMED, "like the new endpoint"),
        ("backport", BUILT, ok(512), VerificationStatus.CONTRADICTED, "like the old endpoint"),
        ("revert", BUILT, ok(260), VerificationStatus.INCONCLUSIVE, "between the endpoints"),
        ("revert", BROKEN, None, VerificationStatus.INCONCLUSIVE, "it does not build"),
        (
            "backport",
            BUILT,
            TestResult("c", TestStatus.TESTCASE_FAILED, error="status 1"),
            VerificationStatus.INCONCLUSIVE,
            "applied to the old endpoint, it fails: status 1",
        ),
    ],
)
def test_verification_of(
    kind: str,
    build: BuildResult,
    test: TestResult | None,
    status: VerificationStatus,
    words: str,
) -> None:
    v = judge.verification_of(_base(kind), build, test, CAL, "sectors")
    assert v.status == status and words in v.message
