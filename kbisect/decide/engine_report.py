"""The engine's state in the job's words: steps for the table, messages, the outcome.

Pure: the workflow passes the job's record (each boot's samples, host and number), what
it saw of each commit besides (seconds, the last test's other metrics) and the latest plan
(kbisect.decide.plan); these shape it into contract types.
"""

import math
import statistics
from dataclasses import dataclass, field, replace

from kbisect.contract import FLAKY_BOOTS_FACTOR, Mode, TestResult, ValidatedJob, commit_boots_cap
from kbisect.decide.endpoints import Effect, Gate, boots
from kbisect.decide.plan import Judged, Plan, Verifying
from kbisect.decide.record import Kind, Record
from kbisect.decide.strategy import State
from kbisect.decide.terms import Decision, EngineConfig
from kbisect.decide.verdict import verdict_for
from kbisect.workflows.bisect_types import (
    BisectRequest,
    EndpointChange,
    JobStatus,
    Step,
    StepSource,
    Verification,
    VerificationStatus,
)


def config_of(req: BisectRequest, job: ValidatedJob) -> EngineConfig:
    """The job's engine settings; a commit's cap rises with --max-boots (commit_boots_cap)."""
    commit_cap = commit_boots_cap(req.max_boots)
    fields: dict[str, object] = {
        "mode": req.mode,
        "better": job.better,
        "parallel": max(1, req.parallel),
        "min_effect": req.min_effect,
        "max_endpoint_boots": req.max_boots,
        "max_commit_boots": commit_cap,
    }
    if job.pass_fail and job.flaky:
        fields["max_endpoint_boots"] = req.max_boots * FLAKY_BOOTS_FACTOR
        fields["max_commit_boots"] = commit_cap * FLAKY_BOOTS_FACTOR
        fields["min_rate_step"] = req.min_rate_step
    return EngineConfig(**fields)  # type: ignore[arg-type]


@dataclass
class Seen:
    """What the workflow saw of one commit that the record does not keep: for display."""

    last: TestResult | None = None
    build_seconds: float = 0.0
    test_seconds: float = 0.0
    failed: StepSource | None = None  # why it has no score
    failure: str = ""
    bad: TestResult | None = None  # a pass/fail job's first bad boot of the commit
    failed_run: str = ""  # the run folder of the boot that failed (evidence.run_folder)
    build_log: str = ""  # its kernel's build log (evidence.build_log_of)
    fixups: list[str] = field(default_factory=list)  # the --fixup names it was built with


@dataclass
class Measured(Seen):
    """One commit's boots as the record has them, with what was seen of it besides."""

    raw: list[float] = field(default_factory=list)  # each boot's median repetition
    repetitions: list[list[float]] = field(default_factory=list)  # each boot's, as raw
    hosts: list[str] = field(default_factory=list)  # the VM host of each boot
    boot_numbers: list[int] = field(default_factory=list)  # the job's boots so far, at each
    runs: list[str] = field(default_factory=list)  # each boot's run folder (Event.run)
    set_aside: list[int] = field(default_factory=list)  # boot numbers set aside as wild


def boot_value(samples: list[float]) -> float:
    return statistics.median(samples)


def measured(
    record: Record, seen: dict[str, Seen], set_aside: dict[str, list[int]] | None = None
) -> dict[str, Measured]:
    """Each commit seen, with its boots from the record: the job's boot k is the record's
    k-th BOOT event (the workflow counts a boot as it records it); `set_aside`: by commit,
    the places of its boots the engine set aside as wild (Plan.set_aside)."""
    found = {commit: Measured(**vars(s)) for commit, s in seen.items()}
    number = 0
    for event in record.events:
        if event.kind == Kind.BOOT:
            number += 1
            m = found.setdefault(event.commit, Measured())
            m.raw.append(boot_value(event.samples))
            m.repetitions.append(list(event.samples))
            m.hosts.append(event.host or "")
            m.boot_numbers.append(number)
            m.runs.append(event.run)
    for commit, places in (set_aside or {}).items():
        if (wild := found.get(commit)) is not None:
            numbers = wild.boot_numbers
            wild.set_aside = [numbers[i] for i in places if i < len(numbers)]
    return found


def with_boots(step: Step, m: Measured) -> Step:
    """`step` with every boot of `m` so far: its value and its per-boot lists, which stay
    aligned (each boot's score, repetitions, host and number) however often a step is brought up to
    date."""
    step.boots, step.scores = len(m.raw), list(m.raw)
    step.hosts, step.boot_numbers = list(m.hosts), list(m.boot_numbers)
    step.runs, step.build_log, step.fixups = list(m.runs), m.build_log, list(m.fixups)
    step.repetitions = [list(r) for r in m.repetitions]
    step.set_aside = list(m.set_aside)
    if m.raw:
        step.value = boot_value(m.raw)
    return step


def endpoint_change(
    effect: Effect | None,
    old: Measured | None,
    new: Measured | None,
    pass_fail: bool,
    flaky: bool = False,
) -> EndpointChange | None:
    """The engine's effect in numbers, with the endpoints' own figures: their medians, or
    for pass/fail boots the share of them that failed (and the change, that share's: a
    flaky job's engine weighs it with an interval, another's boots all agree)."""
    if effect is None:
        return None

    def level(m: Measured | None) -> float | None:
        if m is None or not m.raw:
            return None
        return sum(v <= 0 for v in m.raw) / len(m.raw) if pass_fail else boot_value(m.raw)

    a, b = level(old), level(new)
    if pass_fail and not flaky and a is not None and b is not None:
        effect = Effect(b - a, b - a, b - a, effect.p, effect.boots_old, effect.boots_new)
    if not math.isfinite(effect.value):
        return None
    return EndpointChange(
        value=effect.value,
        low=effect.low if math.isfinite(effect.low) else None,
        high=effect.high if math.isfinite(effect.high) else None,
        boots_old=effect.boots_old,
        boots_new=effect.boots_new,
        old=a,
        new=b,
    )


def aside(step: Step) -> str:
    """The step's note's end for its boots set aside as wild ("" when none)."""
    if not step.set_aside:
        return ""
    which = ", ".join(str(n) for n in step.set_aside)
    return (
        f"; boot(s) {which} set aside: far off the kernel's others (a disturbed host?), "
        "shown, not weighed"
    )


def endpoint_step(old: bool, commit: str, subject: str, mode: Mode, m: Measured) -> Step:
    step = Step(
        commit=commit,
        subject=subject,
        verdict=mode.old_word if old else mode.new_word,
        source=StepSource.ENDPOINT,
        values=m.last.values if m.last else {},
        position=0.0 if old else 1.0,
        build_seconds=m.build_seconds,
        test_seconds=m.test_seconds,
    )
    with_boots(step, m)
    step.note = aside(step).removeprefix("; ")
    return step


def certainty(state: State, confidence: float, mode: Mode, n: int) -> str:
    """A step's figure for what it is: the posterior that the change lies after the
    commit (an old-like verdict), or at it or before it (a new-like one)."""
    where = "after it" if state == State.OLD else "at it or before it"
    return f"{boots(n)}; the {Mode(mode).change_word} is {where}: {confidence:.1%}"


def decision_step(
    judged: Judged, commit: str, subject: str, mode: Mode, m: Measured, round_: int
) -> Step:
    d = judged.decision
    step = Step(
        commit=commit,
        subject=subject,
        verdict=verdict_for(d.state, mode),
        source=m.failed or _source(d),
        note=m.failure or d.note,
        build_seconds=m.build_seconds,
        test_seconds=m.test_seconds,
        round=round_,
        confidence=d.confidence if d.state != State.SKIP and d.llr else None,
        same_as=d.verdict_of,
        failed_run=m.failed_run,
    )
    with_boots(step, m)
    if m.raw:
        step.values = m.last.values if m.last else {}
        # None: every boot ran on a VM host that booted no references (yet)
        step.position = judged.position
        if not step.note and step.confidence is not None:
            step.note = certainty(judged.decision.state, step.confidence, mode, len(m.raw))
    step.note += aside(step)
    return step


def new_steps(
    plan: Plan,
    recorded: set[str],
    kept: list[str],
    measured: dict[str, Measured],
    subjects: dict[str, str],
    mode: Mode,
    round_: int,
) -> list[Step]:
    """A step for each verdict not shown yet (added to `recorded`), then one for each
    commit in `kept`: booted after a person marked it, its boot taken in."""
    steps = []
    for commit, judged in plan.decisions.items():
        if commit not in recorded:
            recorded.add(commit)
            m, subject = measured.get(commit, Measured()), subjects.get(commit, "")
            steps.append(decision_step(judged, commit, subject, mode, m, round_))
    for commit in kept:
        judged = plan.decisions[commit]
        step = decision_step(judged, commit, subjects.get(commit, ""), mode, measured[commit], 0)
        step.source = StepSource.TEST
        step.note = f"a person marked it {verdict_for(judged.decision.state, mode)} meanwhile; kept"
        steps.append(step)
    return steps


def bring_up_to_date(
    steps: list[Step], measured: dict[str, Measured], plan: Plan, mode: Mode
) -> None:
    """Steps recorded when a verdict was first reached, with the boots since (endpoint
    re-measurements, the culprit's rechecks) and the verdict as the engine has it now (the
    posterior engine weighs every boot again to the end: a verdict can turn)."""
    for step in steps:
        m = measured.get(step.commit)
        if m is None or not m.raw or step.source not in (StepSource.TEST, StepSource.ENDPOINT):
            continue
        with_boots(step, m)
        if step.source == StepSource.ENDPOINT:
            step.note = aside(step).removeprefix("; ")
        judged = plan.decisions.get(step.commit)
        if step.source == StepSource.TEST and judged is not None and judged.decision.firm:
            step.verdict = verdict_for(judged.decision.state, mode)
            step.confidence = judged.certainty
            note = certainty(judged.decision.state, step.confidence, mode, step.boots)
            step.note = note + aside(step)


def _source(d: Decision) -> StepSource:
    if d.twin:
        return StepSource.SAME_KERNEL
    return StepSource.MARKED if d.note.startswith("marked") else StepSource.TEST


def gate_outcome(
    plan: Plan, flaky: bool, mode: Mode, metric: str, pass_fail: bool = False
) -> tuple[JobStatus, str] | None:
    """The job's end when the endpoints do not allow a bisection, else None."""
    gate = plan.gate
    assert gate is not None
    if gate.gate == Gate.DIFFERENT:
        return None
    if flaky:  # its gate's message says it in failure rates
        return JobStatus.NO_DIFFERENCE, gate.message
    if pass_fail and gate.gate in (Gate.SAME, Gate.WRONG_WAY) and gate.effect.boots_old:
        return JobStatus.NO_DIFFERENCE, _pass_fail_ends(plan, mode)
    if gate.gate == Gate.WRONG_WAY:
        other = Mode.FIX if mode == Mode.REGRESSION else Mode.REGRESSION
        better = "better" if mode == Mode.REGRESSION else "worse"
        return JobStatus.NO_DIFFERENCE, (
            f"the new endpoint is {better}, not {'worse' if better == 'better' else 'better'}: "
            f"{metric} {gate.message}; to bisect that change, use --mode {other}"
        )
    if gate.gate == Gate.UNDECIDED:
        return JobStatus.NO_DIFFERENCE, f"{metric}: {gate.message}"
    if gate.effect.boots_old == 0:  # decided by the images, with no boot
        return JobStatus.NO_DIFFERENCE, f"endpoints do not differ: {gate.message}"
    return JobStatus.NO_DIFFERENCE, f"endpoints do not differ: {metric} {gate.message}"


def _pass_fail_ends(plan: Plan, mode: Mode) -> str:
    """Why a pass/fail job has nothing to bisect, in its endpoints' words."""
    old, new = plan.old_passes, plan.new_passes
    if old == new:
        both = "pass" if old else "fail"
        must = f"the {mode.new_word} one must fail" if old else f"the {mode.old_word} one must pass"
        return (
            f"both endpoints {both}: {must} for a pass/fail bisection "
            "(check the range, the testcase and its signature)"
        )
    other = Mode.FIX if mode == Mode.REGRESSION else Mode.REGRESSION
    return (
        f"the {mode.old_word} endpoint fails and the {mode.new_word} one passes: "
        f"to find that change, use --mode {other}"
    )


def pass_fail_effect(plan: Plan, new_end: str, old_end: str, measured: dict[str, Measured]) -> str:
    """The endpoints' difference in a pass/fail job's words: what the bad side does."""
    if plan.rates:  # a flaky job: the endpoints' failure rates
        return plan.rates
    bad_end = new_end if not plan.new_passes else old_end
    m = measured.get(bad_end)
    how = m.bad.bad if m is not None and m.bad is not None else "fails"
    return f"good boots pass, bad ones {'fail' if how == 'fails' else how}"


def verification_of(base: Verification, raw: list[float], verifying: Verifying) -> Verification:
    """The culprit reverted on new must behave like old (regression); applied to old,
    like new (fix). A lean short of the test's threshold is inconclusive. `raw`: each
    boot's value; `verifying`: the same boots as the engine's test read them."""
    revert = base.kind == "revert"
    where = "reverted on the new endpoint" if revert else "applied to the old endpoint"
    value = statistics.median(raw)
    d = verifying.decision
    done = replace(base, value=value, position=verifying.position, boots=len(raw))
    if d is None or d.state == State.SKIP:
        done.message = f"{where}, it stays between the endpoints after {len(raw)} boots"
        return done
    expected = State.OLD if revert else State.NEW
    side = "old" if d.state == State.OLD else "new"
    done.status = (
        VerificationStatus.CONFIRMED if d.state == expected else VerificationStatus.CONTRADICTED
    )
    done.message = (
        f"{where}, it behaves like the {side} endpoint ({boots(len(raw))}; {d.confidence:.1%} "
        "likely)"
    )
    return done
