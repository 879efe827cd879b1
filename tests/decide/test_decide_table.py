"""decide(record) -> Plan as a table (syzkaller's style): a record of a job on eight
commits (root old, c8 new) in a few words, and what the plan must say: a counter, a
timing, a flaky pass/fail job, duets, rolling picks and builds ahead."""

from dataclasses import dataclass

import pytest

from kbisect.decide.decider import decide
from kbisect.decide.endpoints import Gate
from kbisect.decide.record import Event, Kind, Record, Run, Setup
from kbisect.decide.strategy import State
from kbisect.decide.terms import Answer, EngineConfig
from tests.decide.simulated import linear

OLD, NEW = 512.0, 8.0  # a counter's two values (the seed's avg_read_sectors)


def boot(commit: str, value: float) -> Event:
    return Event(Kind.BOOT, commit=commit, samples=[value] * 3)


ENDS = [Event(Kind.WANTS), boot("root", OLD), boot("c8", NEW)]


def timed(commit: str, value: float, i: int) -> Event:
    """A timing's boot: repetitions that differ, and each boot a little off the last."""
    level = value * (1 + 0.004 * i)
    return Event(Kind.BOOT, commit=commit, samples=[level * 1.01, level, level * 0.993], host="h")


def passed(commit: str, ok: bool) -> Event:
    return Event(Kind.BOOT, commit=commit, samples=[1.0 if ok else 0.0], host="h")


# a timing's first three old-new blocks, the new end 20% slower; a flaky job's, the new
# end failing one boot in three
BLOCKS = [
    Event(Kind.WANTS),
    *(e for i in range(3) for e in (Event(Kind.WANTS), timed("root", 100, i), timed("c8", 80, i))),
]
FLAKY = [
    Event(Kind.WANTS),
    *(
        e
        for i in range(12)
        for e in (Event(Kind.WANTS), passed("root", True), passed("c8", i % 3 != 1))
    ),
]


@dataclass(frozen=True)
class Row:
    name: str
    events: list[Event]
    commits: list[str] | None = None  # the plan's commits, in order (None: not checked)
    verdicts: dict[str, State] | None = None
    answer: Answer | None = None
    culprit: str | None = None
    gate: Gate | None = None
    counter: bool | None = None
    pairs: list[list[str]] | None = None
    rates: str | None = None
    flaky: bool = False
    parallel: int = 1


ROWS = [
    Row("a new job boots both endpoints first", [Event(Kind.WANTS)], commits=["root", "c8"]),
    Row("a counter halves the range", [*ENDS, Event(Kind.WANTS)], ["c4"], counter=True),
    Row(
        "a new-like probe halves what is below it",
        [*ENDS, Event(Kind.WANTS), boot("c4", NEW), Event(Kind.WANTS)],
        ["c2"],
        verdicts={"c4": State.NEW},
    ),
    Row(
        "an old-like probe halves what is above it",
        [*ENDS, Event(Kind.WANTS), boot("c4", OLD), Event(Kind.WANTS)],
        ["c6"],
        verdicts={"c4": State.OLD},
    ),
    Row(
        "a person's mark is final and asks for no boot",
        [*ENDS, Event(Kind.MARK, commit="c4", state=State.NEW), Event(Kind.WANTS)],
        ["c2"],
        verdicts={"c4": State.NEW},
    ),
    Row(
        "a commit that makes its parent's kernel is never booted, and the halving skips it",
        [*ENDS, Event(Kind.TWIN, commit="c4", of="c3", why="touches nothing"), Event(Kind.WANTS)],
        ["c5"],
    ),
    Row(
        "and it takes its kernel's verdict once that follows from the others",
        [
            *ENDS,
            Event(Kind.TWIN, commit="c4", of="c3", why="touches nothing compiled"),
            *(e for c in ("c5", "c2") for e in (Event(Kind.WANTS), boot(c, NEW))),
            Event(Kind.WANTS),
        ],
        ["c1"],
        verdicts={"c2": State.NEW, "c4": State.NEW},
    ),
    Row(
        "a commit that does not build is skipped and its neighbour tried",
        [*ENDS, Event(Kind.WANTS), Event(Kind.FAILED, commit="c4"), Event(Kind.WANTS)],
        ["c5"],
        verdicts={"c4": State.SKIP},
    ),
    Row(
        "byte-identical endpoints: no difference, with no boot",
        [Event(Kind.IDENTICAL), Event(Kind.WANTS)],
        commits=[],
        answer=Answer.NO_DIFFERENCE,
        gate=Gate.SAME,
    ),
    Row(
        "endpoints that agree: no difference",
        [Event(Kind.WANTS), boot("root", OLD), boot("c8", OLD), Event(Kind.WANTS)],
        commits=[],
        answer=Answer.NO_DIFFERENCE,
    ),
    Row(
        "the answer comes with the last wants",
        [
            *ENDS,
            *(
                e
                for c, v in (("c4", NEW), ("c2", OLD), ("c3", NEW))
                for e in (Event(Kind.WANTS), boot(c, v))
            ),
            Event(Kind.WANTS),
        ],
        commits=[],
        answer=Answer.FOUND,
        culprit="c3",
    ),
    Row(
        "a timing boots the endpoints in old-new blocks for a first noise figure",
        [Event(Kind.WANTS), timed("root", 100, 1), timed("c8", 80, 1), Event(Kind.WANTS)],
        ["root", "c8"],
        counter=False,
    ),
    Row(
        "a timing past its first blocks probes the posterior's median",
        [*BLOCKS, Event(Kind.WANTS)],
        ["c4"],
        gate=Gate.DIFFERENT,
    ),
    Row(
        "with --parallel 4: the posterior's quantiles and a reference, four boots",
        [*BLOCKS, Event(Kind.WANTS)],
        ["c2", "c4", "c6", "root"],
        parallel=4,
    ),
    Row(
        "on a farm, builds ahead where the next picks will likely fall",
        [*BLOCKS, Event(Kind.WANTS), Event(Kind.AHEAD, n=2)],
        ["c1", "c2"],
        parallel=2,
    ),
    Row(
        "duets: a probe beside the round's reference, the other reference beside its twin",
        [*BLOCKS, Event(Kind.PAIRS, commits=["c4", "root", "c8"])],
        pairs=[["root", "c4"], ["c8", "root"]],
    ),
    Row(
        "duets: a probe alone in its round beside the next reference",
        [*BLOCKS, Event(Kind.PAIRS, commits=["c4"])],
        pairs=[["c8", "c4"]],
    ),
    Row(
        "rolling: a slot whose host is unknown takes the endpoint booted least",
        [*BLOCKS, Event(Kind.NEXT_FOR, host=None, commits=["root"])],
        ["c8"],
    ),
    Row(
        "rolling: a freed host that booted references gets the probe that tells most",
        [*BLOCKS, Event(Kind.NEXT_FOR, host="h", commits=[])],
        ["c4"],
    ),
    Row(
        "rolling: a host new to the job boots its own references first",
        [*BLOCKS, Event(Kind.NEXT_FOR, host="g", commits=[])],
        ["c8"],
    ),
    Row(
        "flaky: the endpoints in pairs while no culprit holds half the mass",
        [*FLAKY[:10], Event(Kind.WANTS)],
        ["c8", "root"],
        rates="the new endpoint failed 1 of 3 boots, the old one 0 of 3",
        flaky=True,
    ),
    Row(
        "flaky: a new end failing one boot in three, and the middle is probed",
        [*FLAKY, Event(Kind.WANTS)],
        ["c4"],
        gate=Gate.DIFFERENT,
        rates="the new endpoint failed 4 of 12 boots, the old one 0 of 12",
        flaky=True,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_record_gives_its_plan(row: Row) -> None:
    config = EngineConfig(parallel=row.parallel)
    setup = Setup.of("table", linear(8), "c8", ["root"], config, flaky=row.flaky)
    plan = decide(Record(setup, list(row.events)))
    if row.commits is not None:
        assert plan.commits == row.commits
    for commit, state in (row.verdicts or {}).items():
        assert plan.decisions[commit].decision.state == state, commit
    if row.answer is not None:
        assert plan.result is not None and plan.result.answer == row.answer
        assert plan.result.culprit == row.culprit
    if row.gate is not None:
        assert plan.gate is not None and plan.gate.gate == row.gate
    if row.counter is not None:
        assert plan.counter == row.counter
    if row.pairs is not None:
        assert plan.pairs == row.pairs
    if row.rates is not None:
        assert plan.rates == row.rates


def test_a_verification_boot_is_read_by_the_job_s_model() -> None:
    setup = Setup.of("table", linear(8), "c8", ["root"], EngineConfig(), flaky=False)
    record = Record(setup, [*ENDS, Event(Kind.JUDGE, runs=[Run([OLD] * 3)])])
    verifying = decide(record).verifying
    assert verifying is not None and verifying.decision is not None
    assert verifying.decision.state == State.OLD and verifying.position == pytest.approx(0.0)
