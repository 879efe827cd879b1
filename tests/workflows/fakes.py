"""Fake activities over a scenario: a DAG, a culprit and broken commits (no git, make, QEMU).

They are registered under the real activity names, so the workflow under test is the
real one. A scenario is looked up by the job's `repo` field.
"""

import asyncio
import dataclasses
import hashlib
import math
import random
import statistics
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from benchmarks.dags import culprit_is_in, validated_job
from kbisect.contract import (
    BACKPORT_CHANGE,
    BUILD,
    CHANGED_FUNCTIONS,
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
    TestRequest,
    TestResult,
    TestStatus,
    TraceRequest,
    TraceResult,
    ValidatedJob,
)
from kbisect.decide.strategy import Graph
from kbisect.model import Artifact
from kbisect.testcases.manifest import PASSED
from kbisect.workers.decisions import decide
from kbisect.workflows.backport_types import BackportPlan, BackportRequest, BackportWord
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
from kbisect.workflows.series_types import (
    SeriesAlert,
    SeriesKernel,
    SeriesPlan,
    SeriesRecord,
    SeriesTick,
    SeriesWatch,
)
from kbisect.workflows.sweep_types import (
    CANNOT_TEST,
    PairWord,
    SweepJob,
    SweepRequest,
    SweepTestcase,
)

FAST, SLOW = 512.0, 8.0


def swinging_speeds(seed: int, phi: float, size: float, boots: int) -> list[float]:
    """A host's speed at each boot when it swings: exp(size x an AR(1) correlated `phi`
    from one boot to the next, of unit variance)."""
    rng, swing, speeds = random.Random(seed), 0.0, []
    for _ in range(boots):
        swing = phi * swing + math.sqrt(1 - phi * phi) * rng.gauss(0, 1)
        speeds.append(math.exp(size * swing))
    return speeds


@dataclass
class Scenario:
    graph: Graph
    culprit: str
    mode: str = "regression"
    broken_build: set[str] = field(default_factory=set)
    built_by_fixup: set[str] = field(default_factory=set)  # of broken_build: with a --fixup
    broken_boot: set[str] = field(default_factory=set)
    same_endpoints: bool = False
    user_error: str = ""
    test_delay: float = 0.0
    verify_conflicts: bool = False
    # Whether reverting the named commit restores the old behaviour (False: the change
    # needs more than that commit, e.g. a follow-up it depends on).
    revert_restores: bool = True
    large: bool = False
    subjects: dict[str, str] = field(default_factory=dict)  # commit -> subject ("subject of c")
    traces: list[str] = field(default_factory=list)  # commits traced, in order
    duets: list[tuple[str, ...]] = field(default_factory=list)  # each duet's commits, in order
    broken_trace: set[str] = field(default_factory=set)
    backport_found: str = ""  # the target's commit that is the change (a backport job)
    boot_user_error: str = ""  # every boot's activity fails with this bad-input error
    cannot_test: dict[str, str] = field(default_factory=dict)  # commit -> why (CannotTestError)
    explains: list[str] = field(default_factory=list)  # commits of explain boots, in order
    explain_builds: Counter[str] = field(default_factory=Counter)  # diagnostics kernels
    aligned_builds: Counter[str] = field(default_factory=Counter)  # aligned functions
    # The culprit's change is code layout's: kernels with aligned functions all read FAST.
    layout_only: bool = False
    touched: list[str] = field(default_factory=list)  # the functions every diff changes
    # A series watch's kernels (its `tree` is the scenario): the last measured, then the
    # new ones; none: nothing new.
    series: list[str] = field(default_factory=list)
    timing: bool = False  # the sweep's testcases read a timing, not a counter
    disks: bool = False  # ... and have disks of their own (blktrace can trace them)
    noisy: dict[str, list[float]] = field(default_factory=dict)  # values of successive tests
    host_failures: Counter[str] = field(default_factory=Counter)  # builds failing on the host
    # Host trouble that Temporal's retries get past: a build that fails N times with a
    # retryable InfraError, or goes silent (no heartbeat) N times; "validate": the job's
    # validation does.
    flaky: Counter[str] = field(default_factory=Counter)
    silent: Counter[str] = field(default_factory=Counter)
    silent_seconds: float = 4.0
    noise: float = 0.0  # run-to-run noise: the sigma of a lognormal factor on each sample
    slow: float = SLOW  # the metric where the culprit's change is in
    # The host's speed changes for good after this many boots of the job (0: never).
    shift_after: int = 0
    shift: float = 1.0
    # The host's speed at each boot of the job, in turn (a swing: workflows.trend).
    speeds: tuple[float, ...] = ()
    # Commits that change no file the config compiles: the classify activity says so
    # (the fake artifacts then list one compiled file).
    inert: set[str] = field(default_factory=set)
    # Commits whose image is byte-identical to their parent's (a change the compiler drops).
    same_image: set[str] = field(default_factory=set)
    # A pass/fail testcase: slow kernels panic (a bad boot), fast ones pass.
    pass_fail: bool = False
    # ... whose failure comes and goes: old-like and new-like kernels fail at these rates
    fail_rates: tuple[float, float] | None = None
    builds: Counter[str] = field(default_factory=Counter)
    tests: Counter[str] = field(default_factory=Counter)
    validations: int = 0
    in_flight: int = 0  # boots running now, and the most ever at once
    most_in_flight: int = 0
    # A farm: builds and boots report different hosts (else one host for both, "").
    farm: bool = False
    build_delay: float = 0.0
    built_while_booting: int = 0  # builds that ended while a boot of the job ran
    # VM hosts vm-1, vm-2, ... (a farm), each a guest at a time, its boots this many times
    # test_delay; a boot takes the first one free, as the free host's worker polls.
    vm_speeds: tuple[float, ...] = ()
    vm_busy: set[str] = field(default_factory=set)
    vm_boots: dict[str, list[str]] = field(default_factory=dict)  # by host, its commits
    # Boots that started while one that started before the last boot ended still ran:
    # never in rounds (each waits for its slowest boot), often with rolling picks.
    ended: int = 0
    running_marks: list[int] = field(default_factory=list)  # `ended` at each one's start
    overtaking: int = 0

    def value(self, commit: str) -> float:
        if self.same_endpoints:
            return FAST
        if commit.startswith(VERIFY_PREFIX):
            # Reverted on new (regression) or applied to old (fix): both undo the slowness
            # when the named commit is the true one.
            named = commit.split(":")[1]
            return FAST if named == self.culprit and self.revert_restores else self.slow
        has = culprit_is_in(self.graph, self.culprit, commit)
        # regression: the culprit brings the slowness; fix: the culprit removes it
        return self.slow if has == (self.mode == "regression") else FAST


SCENARIOS: dict[str, Scenario] = {}
VERIFY_PREFIX = "verify:"


def request(scenario: Scenario, queue: str, **kw: object) -> BisectRequest:
    """A job over the scenario on its own queue (SCENARIOS holds it under a fresh key)."""
    key = f"scenario-{uuid.uuid4().hex[:8]}"
    SCENARIOS[key] = scenario
    return BisectRequest(
        repo=key,
        good=["root"],
        bad="tip",
        testcase="nvme-snapshot-read",
        mode=scenario.mode,
        build_queue=queue,
        vm_queue=queue,
        **kw,  # type: ignore[arg-type]
    )


@activity.defn(name=VALIDATE)
async def validate_job(req: BisectRequest) -> ValidatedJob:
    s = SCENARIOS[req.repo]
    s.validations += 1
    if s.silent["validate"] > 0:
        s.silent["validate"] -= 1
        await asyncio.sleep(s.silent_seconds)  # its build host died mid-way: no heartbeat
    if s.user_error:
        raise ApplicationError(s.user_error, type="UserError", non_retryable=True)
    # A large range carries no subjects: the builds report them.
    subjects = {} if s.large else {c: s.subjects.get(c, f"subject of {c}") for c in s.graph.order}
    job = validated_job(s.graph, subjects, old="root")
    if s.pass_fail:
        return dataclasses.replace(
            job,
            primary=PASSED,
            unit="boots",
            repetitions=1,
            pass_fail=True,
            flaky=s.fail_rates is not None,
        )
    return job


@activity.defn(name=BUILD)
async def build_kernel(req: BuildRequest) -> BuildResult:
    s = SCENARIOS[req.repo]
    s.builds[req.commit] += 1
    s.explain_builds[req.commit] += req.explain
    s.aligned_builds[req.commit] += req.aligned
    if s.flaky[req.commit] > 0:
        s.flaky[req.commit] -= 1
        raise ApplicationError("make: vfork: Resource temporarily unavailable", type="InfraError")
    if s.silent[req.commit] > 0:
        s.silent[req.commit] -= 1
        await asyncio.sleep(s.silent_seconds)  # a hung worker: no heartbeat, no result
    if s.host_failures[req.commit] > 0:
        s.host_failures[req.commit] -= 1
        # As a full disk ends up after the activity's retries run out.
        raise ApplicationError(
            "no space left on device in /cache: free some", type="InfraError", non_retryable=True
        )
    await asyncio.sleep(s.build_delay)
    s.built_while_booting += s.in_flight > 0
    fixups = [f.name for f in req.fixups] if req.commit in s.built_by_fixup else []
    if req.commit in s.broken_build and not fixups:
        return BuildResult(
            commit=req.commit, ok=False, error="kernel does not build: x.c", log="/logs/build.log"
        )
    art = Artifact(
        commit=req.commit,
        tree="t",
        config_hash="aligned" if req.aligned else "c",
        kernel="/k",
        config="/c",
        build_log=f"/cache/artifacts/{_hex(req.commit)}-{'0' * 20}/build.log",  # as a worker's
        sources="/sources" if s.inert else "",
        image_sha256=_image_of(s, req.commit) if s.same_image else "",
    )
    return BuildResult(
        commit=req.commit,
        ok=True,
        artifact=art,
        seconds=1.0,
        subject=f"built {req.commit}",
        host="build-1" if s.farm else "",
        fixups=fixups,
    )


def _image_of(s: Scenario, commit: str) -> str:
    while commit in s.same_image:
        commit = s.graph.parents[commit][0]
    return f"sha-{commit}"


@activity.defn(name=TEST)
async def run_test(req: TestRequest) -> TestResult:
    return await _boot(req)


@activity.defn(name=DUET)
async def run_duet(req: DuetRequest) -> DuetResult:
    """The kernels at one moment: the host's speed (`speeds`) reaches both alike, each
    guest's own noise is its own."""
    s = SCENARIOS[req.tests[0].repo]
    s.duets.append(tuple(t.commit for t in req.tests))
    moment = sum(s.tests.values()) + 1
    return DuetResult([await _boot(t, moment) for t in req.tests])


async def _boot(req: TestRequest, moment: int | None = None) -> TestResult:
    """A boot; `moment`: the job's boot count the host is at (None: this boot's own)."""
    s = SCENARIOS[req.repo]
    if s.boot_user_error:
        raise ApplicationError(s.boot_user_error, type="UserError", non_retryable=True)
    s.tests[req.commit] += 1
    if why := s.cannot_test.get(req.commit):  # as the activity answers a CannotTestError
        return TestResult(req.commit, TestStatus.TESTCASE_FAILED, error=f"{CANNOT_TEST}: {why}")
    s.in_flight += 1
    s.most_in_flight = max(s.most_in_flight, s.in_flight)
    s.overtaking += any(mark < s.ended for mark in s.running_marks)
    mark = s.ended
    s.running_marks.append(mark)
    host = "vm-1" if s.farm else ""
    try:
        speed = 1.0
        if s.vm_speeds:
            host, speed = await _vm_host(s)
            s.vm_boots.setdefault(host, []).append(req.commit)
        await asyncio.sleep(s.test_delay * speed)
    finally:
        s.in_flight -= 1
        s.vm_busy.discard(host)
        s.running_marks.remove(mark)
        s.ended += 1
    if req.commit in s.broken_boot:
        return TestResult(
            commit=req.commit, status="boot-failed", error="panic: x", console="/logs/console.log"
        )
    if req.commit == "root":  # the old endpoint, outside the graph
        v = SLOW if s.mode == "fix" and not s.same_endpoints else FAST
    elif s.noisy.get(req.commit):
        v = s.noisy[req.commit].pop(0)
    elif s.layout_only and req.artifact.config_hash == "aligned":
        v = FAST
    else:
        v = s.value(req.commit)
    if s.pass_fail:
        bad = v != FAST
        if s.fail_rates is not None:  # reproducible: the commit and its boot's number
            rng = random.Random(f"{req.commit}-{s.tests[req.commit]}")
            bad = rng.random() < s.fail_rates[bad]
        return TestResult(
            commit=req.commit,
            status="ok",
            values={PASSED: float(not bad)},
            samples=[float(not bad)],
            seconds=2.0,
            console=_console(),
            bad="panic" if bad else "",
            excerpt=f"Kernel panic - not syncing: lab ({req.commit})" if bad else "",
        )
    moment = sum(s.tests.values()) if moment is None else moment
    if s.shift_after and moment > s.shift_after:
        v *= s.shift
    if s.speeds:
        v *= s.speeds[moment % len(s.speeds)]
    samples = [v] * req.repetitions
    if s.noise:
        rng = random.Random(f"{req.commit}-{s.tests[req.commit]}")  # reproducible
        samples = [v * math.exp(rng.gauss(0, s.noise)) for _ in samples]
    return TestResult(
        commit=req.commit,
        status="ok",
        values={"avg_read_sectors": statistics.median(samples)},
        samples=samples,
        seconds=2.0,
        host=host,
        console=_console(),
    )


def _hex(commit: str) -> str:
    return hashlib.sha1(commit.encode()).hexdigest()[:20]


def _console() -> str:
    """A boot's console path as a VM worker's cache has it: its own run folder."""
    return f"/cache/runs/20261207-000000-{uuid.uuid4().hex[:8]}/console.log"


async def _vm_host(s: Scenario) -> tuple[str, float]:
    """The first of the scenario's VM hosts free (waiting for one), taken, and its speed."""
    while True:
        for i, speed in enumerate(s.vm_speeds):
            if (host := f"vm-{i + 1}") not in s.vm_busy:
                s.vm_busy.add(host)
                return host, speed
        await asyncio.sleep(0.005)


@activity.defn(name=PREPARE_VERIFY)
async def prepare_verify(req: VerifyRequest) -> VerifyCommit:
    s = SCENARIOS[req.repo]
    subject = f"Revert {req.change}" if req.revert else req.change
    if s.verify_conflicts:
        return VerifyCommit(None, subject, f"{req.change} does not apply cleanly: conflicts")
    return VerifyCommit(f"{VERIFY_PREFIX}{req.change}:{req.onto}", subject)


@activity.defn(name=PLAN_BACKPORT)
async def plan_backport(req: BackportRequest) -> BackportPlan:
    """The change already in the target when the scenario says so (`backport_found`), a
    conflict as verify_conflicts says, else a series that applies: the verify commit."""
    s = SCENARIOS[req.repo]
    subjects = {req.change: f"subject of {req.change}"}
    if s.backport_found:
        return BackportPlan(BackportWord.ALREADY, req.change, subjects, s.backport_found,
                            "provenance line", message="already there")  # fmt: skip
    if s.verify_conflicts:
        return BackportPlan(BackportWord.CONFLICT, req.change, subjects, message="conflicts")
    patched = f"{VERIFY_PREFIX}{req.change}:{req.target}"
    return BackportPlan("", req.change, subjects, series=[req.change], patched=patched,
                        message="applies")  # fmt: skip


@activity.defn(name=BACKPORT_CHANGE)
async def backport_change(req: BackportChangeRequest) -> BackportChange:
    """No upstream fix names a culprit here: a regression's is reverted, a fix taken."""
    return BackportChange(req.culprit, req.mode == "regression")


def bisection_builds(s: Scenario) -> int:
    """Builds of commits in the range and the endpoints, not of the verify commit."""
    return sum(n for c, n in s.builds.items() if not c.startswith(VERIFY_PREFIX))


@activity.defn(name=CLASSIFY)
async def classify_commits(req: ClassifyRequest) -> ClassifyResult:
    s = SCENARIOS[req.repo]
    inert = [c for c in req.commits if c in s.inert]
    return ClassifyResult(inert={c: s.graph.parents[c][0] for c in inert}, compiled=1)


@activity.defn(name=VALIDATE_SWEEP)
async def validate_sweep(req: SweepRequest) -> SweepJob:
    s = SCENARIOS[req.repo]
    if s.user_error:
        raise ApplicationError(s.user_error, type="UserError", non_retryable=True)
    if s.pass_fail and not req.pass_fail_ok:
        raise ApplicationError("boots passes or fails: a sweep compares scores", type="UserError",
                               non_retryable=True)  # fmt: skip
    metric = PASSED if s.pass_fail else "avg_read_sectors"
    testcases = [
        SweepTestcase(
            name,
            metric,
            "sectors",
            "higher",
            "fast",
            3,
            60.0,
            exact=not s.timing,
            pass_fail=s.pass_fail,
            disks=s.disks,
        )
        for name in req.testcases
    ]
    # "c9^" is c9's first parent, as git resolves it (explain's parent)
    kernels = [s.graph.parents[k[:-1]][0] if k.endswith("^") else k for k in req.kernels]
    return SweepJob(kernels, [f"subject of {k}" for k in kernels], testcases)


@activity.defn(name=TRACE)
async def trace_testcase(req: TraceRequest) -> TraceResult:
    """A trace whose average request size is the commit's score (512 good, 8 slow)."""
    s = SCENARIOS[req.repo]
    s.traces.append(req.commit)
    if req.commit in s.broken_trace:
        return TraceResult(req.commit, error="the traced run left no readable trace")
    v = FAST if req.commit == "root" else s.value(req.commit)
    disk = {
        "device": "nvme0n1",
        "latencies": {"q2c": {"avg_ms": 1.0 if v == FAST else 9.0, "p99_ms": None, "n": 1}},
        "requests": 10,
        "merges": 0,
        "sectors": {str(int(v)): 10},
        "avg_request_sectors": v,
    }
    return TraceResult(req.commit, {"folder": f"/runs/{req.commit}", "disks": {"origin": disk}})


LEFT_OUT_NOTE = "perf.script: its first 64 MiB read, of 80 MiB"  # each explain boot's


@activity.defn(name=EXPLAIN)
async def explain_testcase(req: ExplainBootRequest) -> ExplainBootResult:
    """An explain boot: the score, a request size that is the score (512 good, 8 slow),
    context switches that do not change, and a profile whose slow side spends its time
    in nvme_queue_rq; each within 2% noise."""
    s = SCENARIOS[req.repo]
    s.explains.append(req.commit)
    await asyncio.sleep(s.test_delay)
    if req.commit in s.broken_boot:
        return ExplainBootResult(req.commit, TestStatus.BOOT_FAILED, error="panic: oops")
    rng = random.Random(f"{req.commit}-{len(s.explains)}")
    v = s.value(req.commit)

    def noisy(x: float) -> float:
        return x * math.exp(rng.gauss(0, 0.02))

    slow = 60 if v != FAST else 10
    stacks = {"fio;vfs_read;nvme_queue_rq": slow, "fio;vfs_read;copy_to_user": 100 - slow}
    return ExplainBootResult(
        req.commit,
        TestStatus.OK,
        samples=[noisy(v) for _ in range(3)],
        stats={
            "diskstats": {"nvme0n1 rareq-sz sectors": noisy(v)},
            "stat": {"ctxt": noisy(5000.0)},
            "profile": {
                "nvme_queue_rq (self)": noisy(float(slow)),
                "copy_to_user (self)": noisy(100.0 - slow),
            },
        },
        stacks=stacks,
        folder=f"/runs/explain-{len(s.explains)}",
        host="vm-1",
        notes=[LEFT_OUT_NOTE],
    )


@activity.defn(name=CHANGED_FUNCTIONS)
async def changed_functions(req: ChangedFunctionsRequest) -> list[str]:
    return SCENARIOS[req.repo].touched


@activity.defn(name=SERIES_PLAN)
async def series_plan(watch: SeriesWatch) -> SeriesPlan:
    kernels = SCENARIOS[watch.tree].series
    if not kernels:
        return SeriesPlan(watch.tree, [], [], "nothing new")
    series = [SeriesKernel(k, k, k) for k in kernels]
    return SeriesPlan(watch.tree, kernels, series, f"{len(kernels) - 1} new since {kernels[0]}")


@activity.defn(name=SERIES_RECORD)
async def series_record(rec: SeriesRecord) -> SeriesTick:
    """Each changed pair an alert; nothing kept (the real one keeps the boots on disk)."""
    names = [k.name for k in rec.series]
    alerts = [
        SeriesAlert(
            f"{rec.watch}:{p.old}:{p.new}", rec.watch, rec.sweep, names[p.old], names[p.new], p
        )
        for p in rec.result.pairs
        if p.verdict == PairWord.CHANGED
    ]
    return SeriesTick(rec.watch, rec.sweep, rec.series, alerts, message=f"{len(alerts)} changed")


FAKES = [
    backport_change,
    changed_functions,
    decide,  # the real decisions: the workflow worker's own local activity
    validate_job,
    validate_sweep,
    build_kernel,
    run_test,
    run_duet,
    prepare_verify,
    classify_commits,
    trace_testcase,
    explain_testcase,
    plan_backport,
    series_plan,
    series_record,
]


def fake_worker(client: Client, queue: str, *workflows: type) -> Worker:
    """A worker of the real `workflows` (in Temporal's sandbox) with these fake activities,
    on `queue`: the workflow tests' way to run a job (and its child jobs)."""
    from kbisect.workflows.bisect_workflow import sandbox_runner

    return Worker(
        client,
        task_queue=queue,
        workflows=list(workflows),
        activities=FAKES,
        workflow_runner=sandbox_runner(),
        activity_executor=ThreadPoolExecutor(2),
    )
