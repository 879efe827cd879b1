"""The sequential engine (the simulators' v2 baseline) driven by simulated boots: the truth
is known here, never to the engine."""

import math
import random
from collections.abc import Callable
from typing import Any

from benchmarks.sequential_engine import Engine
from benchmarks.sequential_engine import SequentialConfig as EngineConfig
from kbisect.decide.evidence import Boot
from kbisect.decide.strategy import State
from kbisect.decide.terms import Answer, EngineResult
from tests.decide import simulated
from tests.decide.simulated import index, linear, step_at


def run(*args: Any, **kw: Any) -> tuple[EngineResult, Engine, list[str]]:
    """simulated.run on the sequential engine."""
    kw.setdefault("kind", Engine)
    return simulated.run(*args, config=EngineConfig, **kw)


def test_a_counter_takes_one_boot_per_commit_and_git_bisect_s_builds() -> None:
    res, _, booted = run(64, lambda c: 8.0 if index(c) >= 37 else 512.0)
    assert (res.answer, res.culprit) == (Answer.FOUND, "c37")
    assert len(booted) == len(set(booted)) == res.boots == res.builds
    assert res.builds <= math.ceil(math.log2(64)) + 2
    assert res.confidence > 0.999


def test_a_noisy_regression_is_found_every_time_over_seeded_trials() -> None:
    named = [run(64, step_at(20 + s, 0.25), cv=0.05, seed=s)[0] for s in range(20)]
    assert [r.culprit for r in named] == [f"c{20 + s}" for s in range(20)]
    assert all(r.confidence > 0.95 for r in named)
    # each commit got as many boots as it needed: more than one somewhere, never 30
    assert max(r.boots for r in named) > max(r.builds for r in named)


def test_no_change_is_never_a_culprit() -> None:
    results = [run(64, lambda c: 100.0, cv=0.15, seed=s)[0] for s in range(20)]
    assert all(r.answer in (Answer.NO_DIFFERENCE, Answer.UNDECIDED) for r in results)
    assert all(r.culprit is None for r in results)


def test_the_endpoints_are_booted_alone_first_and_again_in_long_noisy_jobs() -> None:
    res, engine, booted = run(1024, step_at(300, 0.2), cv=0.15, seed=3)
    assert booted[:2] == ["root", "c1024"]
    assert res.culprit == "c300"
    assert any("re-measured" in note for note in res.notes)
    assert len(engine.boots["root"]) > engine.gate.want if engine.gate else False


def test_parallel_probes_cut_the_range_in_quantiles() -> None:
    engine = Engine(linear(63), new="c63", old=["root"], config=EngineConfig(parallel=3))
    engine.observe("root", Boot([512.0] * 3))
    engine.observe("c63", Boot([8.0] * 3))
    picks = sorted(index(c) for c in engine.wants())
    assert len(picks) == 3 and all(
        abs(p - q) <= 1 for p, q in zip(picks, (16, 32, 48), strict=True)
    )


def test_a_commit_that_does_not_build_is_skipped_and_can_leave_two_candidates() -> None:
    res, engine, _ = run(64, lambda c: 8.0 if index(c) >= 37 else 512.0, failing=frozenset({"c36"}))
    assert engine.decisions["c36"].state == State.SKIP
    assert res.answer == Answer.AMBIGUOUS and set(res.candidates) == {"c36", "c37"}


def test_a_person_s_mark_is_final() -> None:
    engine = Engine(linear(16), new="c16", old=["root"], config=EngineConfig())
    engine.observe("root", Boot([512.0] * 3))
    engine.observe("c16", Boot([8.0] * 3))
    assert engine.wants() == ["c8"]
    engine.mark("c8", State.NEW)
    engine.observe("c8", Boot([512.0] * 3))  # its boot finishes after the mark
    assert engine.decisions["c8"].state == State.NEW
    assert engine.wants() == ["c4"]


def test_a_counter_between_the_endpoints_is_skipped_after_two_boots() -> None:
    mid = math.sqrt(512.0 * 8.0)
    _, engine, booted = run(16, lambda c: mid if c == "c8" else 8.0 if index(c) >= 9 else 512.0)
    assert booted.count("c8") == 2 and engine.decisions["c8"].state == State.SKIP


def run_with_twins(
    n: int, value: Callable[[str], float], twins: dict[str, str], cv: float = 0.0, seed: int = 1
) -> tuple[EngineResult, Engine, list[str]]:
    """As run(), with commits known to make another's kernel from the start."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(cv * cv) / 2)
    engine = Engine(linear(n), new=f"c{n}", old=["root"], config=EngineConfig())
    booted: list[str] = []
    for c, of in twins.items():
        engine.same_kernel(c, of, "touches no file the config compiles")
    while commits := engine.wants():
        for c in commits:
            booted.append(c)
            b = value(c) * math.exp(rng.gauss(0, sigma))
            engine.observe(c, Boot([b * math.exp(rng.gauss(0, sigma)) for _ in range(3)]))
    return engine.result(), engine, booted


def test_commits_that_cannot_change_the_kernel_are_never_booted() -> None:
    # every commit but 7, 20, 37 and 50 touches nothing the config compiles
    changing = {7, 20, 37, 50}
    twins = {f"c{i}": (f"c{i - 1}" if i > 1 else "root") for i in range(1, 64) if i not in changing}
    res, engine, booted = run_with_twins(64, step_at(37, 0.25), twins, cv=0.1)
    assert res.culprit == "c37"
    assert set(booted) <= {"root", "c64", "c7", "c20", "c37", "c50"}
    # the twins took their kernels' verdicts: below c37 old, at or above new
    assert engine.decisions["c36"].state == State.OLD and engine.decisions["c36"].twin == "c35"
    assert engine.decisions["c40"].state == State.NEW and engine.decisions["c40"].boots == 0


def test_a_culprit_whose_parent_is_a_twin_is_rechecked_through_the_twin() -> None:
    twins = {"c36": "c35", "c35": "c34"}
    res, engine, booted = run_with_twins(64, step_at(37, 0.25), twins, cv=0.1, seed=4)
    assert res.culprit == "c37" and "c36" not in booted and "c35" not in booted
    assert engine._evidence("c37") == ["c37", "c34"]
    assert res.confidence > 0.99


def test_an_image_identical_to_the_old_endpoint_is_old_at_once() -> None:
    engine = Engine(linear(8), new="c8", old=["root"], config=EngineConfig())
    engine.same_kernel("c3", "root", "image identical")
    assert engine.decisions["c3"].state == State.OLD
    assert engine.search.marks["c3"] == State.OLD


def test_identical_endpoints_are_no_difference_without_a_boot() -> None:
    engine = Engine(linear(8), new="c8", old=["root"], config=EngineConfig())
    engine.identical_endpoints()
    assert engine.wants() == []
    res = engine.result()
    assert res.answer == Answer.NO_DIFFERENCE and res.boots == 0
    assert "byte-identical" in res.message


def run_loaded(
    seed: int, load: Callable[[int], float], **cfg: object
) -> tuple[EngineResult, list[str]]:
    """A real run's host, simulated: a 25% step at CV 8%, and the host's speed for each
    boot of the job (another load, or a lasting change), endpoints included."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(0.08**2) / 2)
    engine = Engine(linear(64), new="c64", old=["root"], config=EngineConfig(**cfg))  # type: ignore[arg-type]
    booted: list[str] = []
    while commits := engine.wants():
        for c in commits:
            booted.append(c)
            b = step_at(38, 0.25)(c) * load(len(booted)) * math.exp(rng.gauss(0, sigma))
            engine.observe(c, Boot([b * math.exp(rng.gauss(0, sigma)) for _ in range(3)]))
    return engine.result(), booted


def run_disturbed(seed: int, window: range, **cfg: object) -> tuple[EngineResult, list[str]]:
    """The lab-101 run: a window of boots (a package install and a tree grep on the host)
    read 25% low."""
    return run_loaded(seed, lambda n: 0.75 if n in window else 1.0, **cfg)


def run_shifted(seed: int, **cfg: object) -> tuple[EngineResult, list[str]]:
    """The lab-103 run: the host about 15% faster for good from boot 30 (after the
    endpoints' calibration) to the end."""
    return run_loaded(seed, lambda n: 1.15 if n >= 30 else 1.0, **cfg)


def test_controls_set_a_disturbed_host_s_boots_aside() -> None:
    # Half the job (boots 14 to 29) disturbed: controls catch most of it, not a window
    # that opens and closes between two of them.
    checked = [
        run_disturbed(s, range(14, 30), remeasure_every=6, check_host=True) for s in range(40)
    ]
    plain = [run_disturbed(s, range(14, 30)) for s in range(40)]
    wrong = sum(r.culprit != "c38" for r, _ in checked)
    assert wrong <= 3 and sum(r.culprit != "c38" for r, _ in plain) >= 5 * max(wrong, 1)
    assert any("between boots 13 and" in n for r, _ in checked for n in r.notes)
    assert all(r.boots == len(b) for r, b in checked)  # set-aside boots still count


def test_a_clean_host_costs_a_few_control_boots() -> None:
    checked = [run_disturbed(s, range(0), remeasure_every=6, check_host=True) for s in range(40)]
    plain = [run_disturbed(s, range(0)) for s in range(40)]
    assert all(r.culprit == "c38" for r, _ in checked + plain)
    false_alarms = sum(any("host disturbed" in n for n in r.notes) for r, _ in checked)
    assert false_alarms <= 4
    extra = sum(len(b) for _, b in checked) / sum(len(b) for _, b in plain)
    assert extra < 1.25


def test_a_lasting_level_shift_is_followed_not_fought() -> None:
    # Controls alone take a lasting shift for a disturbance until their cap (lab-103: 8
    # dirty controls, about 35 boots); following the level keeps the boots.
    checks = {"remeasure_every": 6, "check_host": True}
    clean = [run_disturbed(s, range(0), follow_shifts=True, **checks) for s in range(40)]
    fought = [run_shifted(s, **checks) for s in range(40)]
    followed = [run_shifted(s, follow_shifts=True, **checks) for s in range(40)]
    assert sum(r.culprit == "c38" for r, _ in followed) >= 39
    boots = [sum(len(b) for _, b in runs) for runs in (clean, fought, followed)]
    assert boots[2] - boots[0] < 0.6 * (boots[1] - boots[0])  # the shift's cost, halved
    shifted = [n for r, _ in followed for n in r.notes if "host level shifted +1" in n]
    assert len(shifted) >= 10  # the jobs still running at boot 30 saw it
    assert not any("stayed disturbed" in n for r, _ in followed for n in r.notes)


def test_following_levels_still_sets_a_passing_disturbance_aside() -> None:
    checks = {"remeasure_every": 6, "check_host": True, "follow_shifts": True}
    runs = [run_disturbed(s, range(14, 30), **checks) for s in range(40)]
    assert sum(r.culprit != "c38" for r, _ in runs) <= 3
    clean = [run_disturbed(s, range(0), **checks) for s in range(40)]
    assert all(r.culprit == "c38" for r, _ in clean)
    assert sum(any("level shifted" in n for n in r.notes) for r, _ in clean) <= 2


def run_aa_with_a_false_start(seed: int, **cfg: object) -> tuple[EngineResult, list[str]]:
    """No commit changes anything, but the new endpoint's first boots read 12% low by
    chance (a 1-in-300 event at CV 15%, seen in the accuracy benchmark), so the gate says
    different and the search starts through commits that all sit between the endpoints."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(0.05**2) / 2)
    engine = Engine(linear(64), new="c64", old=["root"], config=EngineConfig(**cfg))  # type: ignore[arg-type]
    booted: list[str] = []
    while commits := engine.wants():
        for c in commits:
            booted.append(c)
            unlucky = c == "c64" and booted.count(c) <= 6
            b = 100.0 * (0.88 if unlucky else 1.0) * math.exp(rng.gauss(0, sigma))
            engine.observe(c, Boot([b * math.exp(rng.gauss(0, sigma)) for _ in range(3)]))
    return engine.result(), booted


def test_a_difference_that_re_measuring_undoes_ends_as_no_difference() -> None:
    checks = {"remeasure_every": 6, "check_host": True, "follow_shifts": True}
    regated = [run_aa_with_a_false_start(s, regate=True, **checks) for s in range(20)]
    assert all(r.answer == Answer.NO_DIFFERENCE for r, _ in regated), [
        (r.answer, r.culprit) for r, _ in regated
    ]
    again = [r for r, _ in regated if "re-measured during the job: no difference" in r.message]
    assert len(again) >= 10  # the others' gate said "same" at once
    plain = [run_aa_with_a_false_start(s, **checks) for s in range(20)]
    assert sum(r.answer != Answer.NO_DIFFERENCE for r, _ in plain) >= 10
    assert sum(len(b) for _, b in regated) < sum(len(b) for _, b in plain)
