"""decide(record) -> Plan: each decision of a job, from its record alone.

The engine is a state machine; the record holds every fact and every question in order,
so replaying it rebuilds the engine exactly. A Decider keeps each job's engine between
calls (the record only grows) and replays only the new events; a record it has not seen
(a worker restarted mid-job, or another worker's job) is replayed whole. The cache is
only a cache: the record rebuilds it, and the answers are the same either way.
"""

import statistics
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kbisect.contract import LIKELIEST
from kbisect.decide import strategy
from kbisect.decide.engine import Engine
from kbisect.decide.plan import Judged, Plan, Verifying
from kbisect.decide.record import QUESTIONS, Event, Kind, Record, Setup

CACHED_JOBS = 32  # engines kept in memory, the least recently asked dropped first


def engine_of(setup: Setup) -> Engine:
    """A job's engine as the rules stand today (flaky pass/fail: failure rates); a counter
    or a deterministic pass/fail job takes its exact path."""
    return Engine(setup.graph(), setup.new, list(setup.old), setup.config, flaky=setup.flaky)


def decide(record: Record) -> Plan:
    """The answer to the record's last event (a question) from the record alone."""
    return Decider().decide(record)


@dataclass
class _Job:
    setup: Setup
    engine: Engine
    events: list[Event]
    plan: Plan


class Decider:
    """decide() with each job's engine kept between calls (thread-safe)."""

    def __init__(
        self, jobs: int = CACHED_JOBS, make: Callable[[Setup], Engine] = engine_of
    ) -> None:
        self._make = make  # the rule: a test may give another
        self._jobs: OrderedDict[str, _Job] = OrderedDict()
        self._size = jobs
        self._lock = threading.Lock()
        self.rebuilt = 0  # records replayed from their start: a cache that missed

    def decide(self, record: Record) -> Plan:
        if not record.events or record.events[-1].kind not in QUESTIONS:
            raise ValueError("a record ends with a question (wants, next-for, look...)")
        with self._lock:
            job = self._jobs.pop(record.setup.job, None)
        n = len(record.events)
        if job is None or not _extends(record, job):
            self.rebuilt += 1
            engine = self._make(record.setup)
            job = _Job(record.setup, engine, [], Plan())
        for i in range(len(job.events), n):
            job.plan = _apply(job.engine, record.events[i], last=i == n - 1)
            job.events.append(record.events[i])
        with self._lock:
            self._jobs[record.setup.job] = job
            while len(self._jobs) > self._size:
                self._jobs.popitem(last=False)
        return job.plan


def _extends(record: Record, job: _Job) -> bool:
    """Whether the record is the cached one and more (a reset job's is not)."""
    seen = len(job.events)
    return record.setup == job.setup and record.events[:seen] == job.events


def _apply(engine: Engine, event: Event, last: bool) -> Plan:
    """One event given to the engine; a question's answer, with the view after it when it
    is the record's `last` (a replay answers every earlier question too, and reads what
    settles state at that moment: whether the metric is a counter)."""
    kind = event.kind
    if kind == Kind.BOOT:
        engine.observe(event.commit, event.boot())
    elif kind == Kind.FAILED:
        engine.observe(event.commit, None)
    elif kind == Kind.MARK and event.state is not None:
        engine.mark(event.commit, event.state)
    elif kind == Kind.TWIN:
        engine.same_kernel(event.commit, event.of, event.why)
    elif kind == Kind.IDENTICAL:
        engine.identical_endpoints()
    elif kind == Kind.BUILT_AHEAD:
        engine.built_ahead(event.commit)
    if kind not in QUESTIONS:
        return Plan()
    plan = Plan()
    if kind == Kind.WANTS:
        # the answer comes with the question that ends the search: a worker with another
        # rule (an upgrade) may not have ended it, and then the search goes on
        plan.commits = engine.wants()
        if not plan.commits:
            plan.result = engine.result()
    elif kind == Kind.NEXT_FOR:
        pick = engine.next_for(event.host, event.commits)
        plan.commits = [pick] if pick is not None else []
    elif kind == Kind.PAIRS:
        plan.pairs = [list(p) for p in engine.duet_pairs(event.commits)]
    elif kind == Kind.AHEAD:
        plan.commits = engine.ahead(event.n)
    elif kind == Kind.JUDGE:
        plan.verifying = _judge(engine, event)
    if last:
        _view(engine, plan)
    else:
        _ = engine.noisy  # settles whether the metric is a counter, as the view did
    return plan


def _judge(engine: Engine, event: Event) -> Verifying:
    """A verification's boots: each scored (less what the swing gave it, read off a
    boot of its base kernel beside it), then the engine's sequential test."""
    scores = []
    for run in event.runs:
        own = engine.boot_score(list(run.samples))
        if run.beside:
            own = engine.paired(own, engine.boot_score(list(run.beside)), event.new_side)
        scores.append(own)
    position = engine.model().position(statistics.fmean(scores))
    return Verifying(scores, position, engine.judge(engine.level_adjusted(scores)))


def _view(engine: Engine, plan: Plan) -> None:
    search = engine.search
    plan.gate = engine.gate
    plan.decisions = {c: judged(engine, c) for c in engine.decisions}
    plan.same_as = dict(search.same_as)
    plan.candidates = len(strategy.candidates(search))
    plan.steps_left = strategy.steps_left(search)
    plan.noisy, plan.counter = engine.noisy, engine.counter
    plan.pairs_verification = engine.pairs_verification()
    plan.rates = engine.weigh.words()
    plan.set_aside = engine.weigh.set_aside()
    plan.unfit = engine.weigh.unfit()
    if engine.exact is None and engine.noisy:
        plan.likeliest = {c: p for c, p in engine.posterior.ranked()[:LIKELIEST] if p > 0}
    plan.old_passes, plan.new_passes = (
        all(s > 0 for b in engine.boots.get(c, []) for s in b.samples)
        for c in (engine.old_end, engine.new_end)
    )


def judged(engine: Engine, commit: str) -> Judged:
    """A commit's verdict with its certainty and where its boots sit."""
    decision = engine.decisions[commit]
    position = None
    if engine.boots.get(commit) and (weighed := engine.scores(commit)):
        position = engine.model().position(statistics.fmean(weighed))
    # the posterior weighs a firm verdict's boots again to the end; others stay as given
    certainty = engine.certainty(commit) if decision.firm else decision.confidence
    return Judged(decision, certainty, position)
