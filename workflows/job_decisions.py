"""A job's decisions as its workflow asks for them: facts go into the job's record, and
each question goes with the whole record to the decide local activity, whose answer is
written into the history. A replay reads the answers back: it never runs decision code,
so a changed rule breaks no running job (it takes the new rule at its next question).

Workflow code only (`workflow.execute_local_activity`).
"""

from datetime import timedelta

from temporalio import workflow

from kbisect.contract import DECIDE
from kbisect.decide.endpoints import Gate
from kbisect.decide.evidence import Boot
from kbisect.decide.plan import Plan, Verifying
from kbisect.decide.record import Event, Kind, Record, Run, Setup
from kbisect.decide.strategy import State
from kbisect.decide.terms import EngineResult

# A decision over a 1,000-boot record from nothing (a restarted worker) takes seconds
# (docs/measurements.md); the cache makes the usual one milliseconds.
DECIDE_TIMEOUT = timedelta(minutes=5)


class JobDecisions:
    def __init__(self, setup: Setup) -> None:
        self.record = Record(setup)
        self.plan = Plan()  # the latest answer's view
        self.old_end, self.new_end = setup.old[0], setup.new
        self._told = 0  # events when the plan was made: later facts make it stale

    # --- facts ------------------------------------------------------------------------
    def boot(self, commit: str, boot: Boot, run: str = "") -> None:
        self._add(
            Event(
                Kind.BOOT,
                commit=commit,
                samples=list(boot.samples),
                host=boot.host,
                exact=boot.exact,
                beside=boot.beside,
                run=run,
            )
        )

    def failed(self, commit: str) -> None:
        self._add(Event(Kind.FAILED, commit=commit))

    def mark(self, commit: str, state: State) -> None:
        self._add(Event(Kind.MARK, commit=commit, state=state))

    def twin(self, commit: str, of: str, why: str) -> None:
        self._add(Event(Kind.TWIN, commit=commit, of=of, why=why))

    def identical(self) -> None:
        self._add(Event(Kind.IDENTICAL))

    def built_ahead(self, commit: str) -> None:
        self._add(Event(Kind.BUILT_AHEAD, commit=commit))

    # --- questions --------------------------------------------------------------------
    async def wants(self) -> list[str]:
        """The next round's boots; none: the search is over and `result` holds the answer."""
        return (await self._ask(Event(Kind.WANTS))).commits

    @property
    def result(self) -> EngineResult:
        assert self.plan.result is not None, "the result before the search ended"
        return self.plan.result

    async def next_for(self, host: str | None, in_flight: list[str]) -> str | None:
        picks = (await self._ask(Event(Kind.NEXT_FOR, host=host, commits=in_flight))).commits
        return picks[0] if picks else None

    async def pairs(self, commits: list[str]) -> list[tuple[str, str]]:
        plan = await self._ask(Event(Kind.PAIRS, commits=commits))
        return [(a, b) for a, b in plan.pairs]

    async def ahead(self, n: int) -> list[str]:
        return (await self._ask(Event(Kind.AHEAD, n=n))).commits

    async def judge(self, runs: list[Run], new_side: bool) -> Verifying:
        plan = await self._ask(Event(Kind.JUDGE, runs=list(runs), new_side=new_side))
        assert plan.verifying is not None
        return plan.verifying

    async def fresh(self) -> Plan:
        """The view with every fact so far (asks only if one came since the last)."""
        if self._told < len(self.record.events):
            await self._ask(Event(Kind.LOOK))
        return self.plan

    # --- the view ---------------------------------------------------------------------
    @property
    def asked(self) -> bool:
        """Whether the plan is an answer yet (before the first, it is empty)."""
        return self._told > 0

    @property
    def gated_same(self) -> bool:
        """The endpoints do not differ: nothing between them is booted."""
        return self.plan.gate is not None and self.plan.gate.gate == Gate.SAME

    @property
    def bisecting(self) -> bool:
        return self.plan.gate is not None and self.plan.gate.gate == Gate.DIFFERENT

    def boots_of(self, commit: str) -> int:
        """How often `commit` has booted so far."""
        return sum(e.kind == Kind.BOOT and e.commit == commit for e in self.record.events)

    def vm_hosts(self) -> set[str]:
        """The VM hosts the job's boots ran on ("": one that did not say)."""
        return {e.host or "" for e in self.record.events if e.kind == Kind.BOOT}

    def _add(self, event: Event) -> None:
        self.record.events.append(event)

    async def _ask(self, question: Event) -> Plan:
        self._add(question)
        # a copy: the workflow goes on adding facts while the question is out
        snapshot = Record(self.record.setup, list(self.record.events))
        told = len(snapshot.events)
        plan: Plan = await workflow.execute_local_activity(
            DECIDE, snapshot, result_type=Plan, start_to_close_timeout=DECIDE_TIMEOUT
        )
        if told >= self._told:  # answers to questions asked together: the latest stays
            self.plan, self._told = plan, told
        return plan
