"""Flaky pass/fail jobs driven by simulated boots: the truth stays in the test."""

import itertools
import math
import random

import pytest

from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.rates import RateFit, information, information_of
from kbisect.decide.terms import Answer, EngineConfig, EngineResult
from tests.decide.simulated import index, linear


def run(
    n: int, culprit: int, r_old: float, r_new: float, seed: int, **cfg: object
) -> tuple[EngineResult, Engine, list[str]]:
    """Boot what the engine wants: a commit from `culprit` on fails at r_new, one before
    at r_old (in fix mode the culprit brings r_new's passing)."""
    rng = random.Random(seed)
    engine = Engine(linear(n), f"c{n}", ["root"], EngineConfig(**cfg), flaky=True)  # type: ignore[arg-type]
    booted: list[str] = []
    while commits := engine.wants():
        for c in commits:
            booted.append(c)
            changed = index(c) >= culprit
            rate = r_new if changed else r_old
            engine.observe(c, Boot([0.0 if rng.random() < rate else 1.0], "h"))
    return engine.result(), engine, booted


def test_a_bernoulli_boot_weighs_by_the_two_rates() -> None:
    r = RateFit(old=0.01, new=0.3, n_old=100, n_new=100, fails_old=1, fails_new=30)
    assert r.llr(1, 1) > 3.0  # a bad boot: 30 times likelier new-like
    assert -0.4 < r.llr(0, 1) < -0.3  # a good one leans old a little
    assert information(0.5, 0.0, 1.0) > information(0.5, 0.01, 0.3) > information(0.5, 0.1, 0.12)
    assert information(0.0, 0.01, 0.3) == 0.0


def test_a_failure_in_three_boots_is_named_and_never_a_wrong_commit() -> None:
    jobs = [run(64, 10 + 9 * s, 0.01, 0.3, seed=s) for s in range(6)]
    named = [res.culprit for res, _, _ in jobs]
    assert named == [f"c{10 + 9 * s}" for s in range(6)], named
    assert all(res.confidence >= 0.99 for res, _, _ in jobs)
    rates = [eng.weigh.rates for _, eng, _ in jobs]
    assert all(r is not None and r.old < 0.08 and 0.15 < r.new < 0.5 for r in rates), rates


def test_a_fix_that_makes_it_pass_again_is_named() -> None:
    res, _, _ = run(32, 20, 0.3, 0.0, seed=3, mode="fix")
    assert (res.answer, res.culprit) == (Answer.FOUND, "c20"), res.message


def test_the_same_flake_rate_at_both_ends_is_never_a_culprit() -> None:
    # 0 of 96 bad boots at both ends still leaves P(no culprit) at 95%: a rate 3 points
    # higher would show none 3% of the time. The default cap says "cannot decide".
    results = [run(64, 999, 0.01, 0.01, seed=s)[0] for s in range(4)]
    assert all(r.culprit is None and r.answer == Answer.UNDECIDED for r in results)
    assert all("the new endpoint failed" in r.message for r in results)
    # ... and about 280 boots an endpoint say "no difference"
    res = run(64, 999, 0.0, 0.0, seed=1, max_endpoint_boots=400)[0]
    assert res.answer == Answer.NO_DIFFERENCE and res.boots < 650, (res.answer, res.boots)


def test_fewer_failures_at_the_new_end_say_which_mode_finds_it() -> None:
    res, engine, _ = run(32, 9, 0.4, 0.02, seed=2)
    assert res.culprit is None and res.answer == Answer.NO_DIFFERENCE, res.message
    assert engine.gate is not None and engine.gate.gate == "wrong-way"
    assert "use --mode fix" in res.message


def test_min_effect_sets_the_least_change_in_failure_rate_that_counts() -> None:
    # --min-effect 30 on a flaky job: an A/A range is "no difference" in far fewer boots,
    # and a 0% -> 10% change, under the minimum, is no culprit.
    default = run(64, 999, 0.0, 0.0, seed=1, max_endpoint_boots=400)[0]
    coarse = run(64, 999, 0.0, 0.0, seed=1, max_endpoint_boots=400, min_rate_step=0.3)[0]
    assert default.answer == coarse.answer == Answer.NO_DIFFERENCE
    assert coarse.boots * 4 < default.boots, (coarse.boots, default.boots)
    assert run(64, 30, 0.0, 0.1, seed=2, max_endpoint_boots=400)[0].culprit == "c30"
    small = run(64, 30, 0.0, 0.1, seed=2, max_endpoint_boots=400, min_rate_step=0.3)[0]
    assert (small.answer, small.culprit) == (Answer.NO_DIFFERENCE, None)


def test_boots_in_flight_tell_less_each_and_one_tells_what_information_says() -> None:
    assert information_of(0.5, 0.01, 0.3, 1) == pytest.approx(information(0.5, 0.01, 0.3))
    told = [information_of(0.5, 0.01, 0.3, n) for n in range(5)]
    gains = [b - a for a, b in itertools.pairwise(told)]
    assert told[0] == 0.0 and all(g > 0 for g in gains)
    assert gains == sorted(gains, reverse=True)  # each more boot tells less
    assert told[-1] < math.log(2)  # never more than the side's one bit


def test_a_flaky_job_on_a_farm_picks_a_boot_for_each_freed_host() -> None:
    # Rolling picks (next_for) weigh what one more pass/fail boot tells: a flaky job on
    # several VM hosts once stopped on "choosing before the models".
    rng = random.Random(4)
    engine = Engine(linear(32), "c32", ["root"], EngineConfig(), flaky=True)
    running: list[str] = []
    for _ in range(2000):
        for host in "ab":
            if (pick := engine.next_for(host, running)) is not None:
                running.append(pick)
        if not running:
            break
        commit = running.pop(rng.randrange(len(running)))
        rate = 0.3 if index(commit) >= 11 else 0.0
        engine.observe(commit, Boot([0.0 if rng.random() < rate else 1.0], "a"))
    res = engine.result()
    assert (res.answer, res.culprit) == (Answer.FOUND, "c11"), res.message
