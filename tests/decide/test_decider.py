"""decide(record): the same decisions as the engine driven directly, cache or no cache."""

import math
import random
from collections.abc import Callable

import pytest

from kbisect.contract import LIKELIEST
from kbisect.decide.decider import Decider, decide
from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.plan import Plan
from kbisect.decide.record import Event, Kind, Record, Setup
from kbisect.decide.terms import EngineConfig, EngineResult
from tests.decide.simulated import index, linear


def setup(n: int, job: str = "job") -> Setup:
    return Setup.of(job, linear(n), f"c{n}", ["root"], EngineConfig(), flaky=False)


def boot_of(rng: random.Random, commit: str, culprit: int, cv: float) -> list[float]:
    sigma = math.sqrt(math.log1p(cv * cv) / 2)
    level = 100.0 * (0.9 if index(commit) >= culprit else 1.0) * math.exp(rng.gauss(0, sigma))
    return [level * math.exp(rng.gauss(0, sigma)) for _ in range(3)]


def direct(n: int, culprit: int, cv: float, seed: int) -> tuple[list[str], EngineResult]:
    """The engine driven as the workflow drove it before decisions were recorded."""
    s, rng, booted = setup(n), random.Random(seed), []
    engine = Engine(s.graph(), s.new, s.old, s.config)
    while commits := engine.wants():
        for c in commits:
            booted.append(c)
            engine.observe(c, Boot(boot_of(rng, c, culprit, cv), "vm1"))
    return booted, engine.result()


def recorded(
    ask: Callable[[Record], Plan], n: int, culprit: int, cv: float, seed: int
) -> tuple[list[str], EngineResult]:
    record, rng, booted = Record(setup(n)), random.Random(seed), []
    while True:
        record.events.append(Event(Kind.WANTS))
        commits = ask(record).commits
        if not commits:
            break
        for c in commits:
            booted.append(c)
            samples = boot_of(rng, c, culprit, cv)
            record.events.append(Event(Kind.BOOT, commit=c, samples=samples, host="vm1"))
    result = ask(record).result  # the question that wanted nothing more
    assert result is not None
    return booted, result


@pytest.mark.parametrize(("cv", "seed"), [(0.0, 1), (0.1, 2), (0.15, 3)])
def test_a_job_decided_from_its_record_boots_what_the_engine_booted(cv: float, seed: int) -> None:
    want_boots, want = direct(32, 20, cv, seed)
    decider = Decider()
    boots, got = recorded(decider.decide, 32, 20, cv, seed)
    assert boots == want_boots and (got.answer, got.culprit) == (want.answer, want.culprit)
    assert got.culprit == "c20" and decider.rebuilt == 1


def test_a_worker_restarted_mid_job_rebuilds_the_same_engine_from_the_record() -> None:
    want_boots, want = direct(32, 11, 0.1, 7)
    asked = 0

    def forgetful(record: Record) -> Plan:  # every 7th question finds an empty cache
        nonlocal decider, asked
        asked += 1
        if asked % 7 == 0:
            decider = Decider()
        return decider.decide(record)

    decider = Decider()
    boots, got = recorded(forgetful, 32, 11, 0.1, 7)
    assert boots == want_boots and got.culprit == want.culprit == "c11"
    assert asked > 14


def test_a_record_that_is_not_the_cached_one_is_replayed_whole() -> None:
    decider = Decider()
    record = Record(setup(8), [Event(Kind.WANTS)])
    assert sorted(decider.decide(record).commits) == ["c8", "root"]
    record.events += [Event(Kind.BOOT, commit="root", samples=[8.0]), Event(Kind.WANTS)]
    decider.decide(record)
    assert decider.rebuilt == 1
    reset = Record(setup(8), [Event(Kind.WANTS), Event(Kind.BOOT, commit="c8", samples=[8.0])])
    reset.events.append(Event(Kind.LOOK))
    decider.decide(reset)
    assert decider.rebuilt == 2


def test_a_record_must_end_with_a_question() -> None:
    with pytest.raises(ValueError, match="ends with a question"):
        decide(Record(setup(8), [Event(Kind.BOOT, commit="root", samples=[1.0])]))


def test_the_view_names_the_twins_and_the_verdicts() -> None:
    record = Record(setup(8))
    for c, v in (("root", 512.0), ("c8", 8.0)):
        record.events += [Event(Kind.WANTS), Event(Kind.BOOT, commit=c, samples=[v] * 3)]
    record.events += [Event(Kind.TWIN, commit="c3", of="c2", why="touches nothing")]
    record.events.append(Event(Kind.WANTS))
    plan = decide(record)
    assert plan.counter and not plan.noisy and plan.same_as == {"c3": "c2"}
    assert plan.gate is not None and plan.commits and "c3" not in plan.commits
    assert plan.result is None and plan.candidates == 8


def test_a_timing_s_plan_shows_its_posterior_narrowing_onto_the_culprit() -> None:
    """Plan.likeliest: the likeliest answers with their mass, likeliest first, for the
    job's page; it narrows as boots come, and ends on the culprit; a counter has none."""
    decider, rng = Decider(), random.Random(5)
    record, seen = Record(setup(32)), []
    while True:
        record.events.append(Event(Kind.WANTS))
        plan = decider.decide(record)
        if plan.likeliest:
            seen.append(plan.likeliest)
        if not plan.commits:
            break
        for c in plan.commits:
            record.events.append(
                Event(Kind.BOOT, commit=c, samples=boot_of(rng, c, 20, 0.1), host="vm1")
            )
    assert seen, "no posterior shown"
    for shown in seen:
        probs = list(shown.values())
        assert probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-9
        assert len(shown) <= LIKELIEST
    top, p = next(iter(seen[-1].items()))
    assert top == "c20" and p > 0.99 > max(seen[0].values())
    exact = Record(setup(8))
    for c in ("root", "c8"):
        exact.events.append(Event(Kind.BOOT, commit=c, samples=[1.0, 1.0, 1.0], host="vm1"))
    exact.events.append(Event(Kind.WANTS))
    assert decider.decide(exact).likeliest == {}  # a counter halves its range: no posterior
