"""The engine driven by simulated boots: the truth stays in the test."""

import math
import random

import pytest

from kbisect.contract import Mode
from kbisect.decide.decider import judged
from kbisect.decide.engine import REFERENCE_EVERY, Engine
from kbisect.decide.engine_report import Measured, decision_step
from kbisect.decide.evidence import Boot
from kbisect.decide.levels import Fit, information, pair_sigma
from kbisect.decide.strategy import State
from kbisect.decide.terms import Answer, Decision, EngineConfig
from tests.decide.simulated import index, linear, run, step_at
from tests.workflows.fakes import swinging_speeds


def fit_of(engine: Engine) -> Fit:
    """The engine's latest models (a timing's)."""
    fit = getattr(engine.weigh, "fit", None)
    assert isinstance(fit, Fit)
    return fit


def test_a_counter_still_takes_one_boot_per_commit_and_git_bisect_s_builds() -> None:
    res, _, booted = run(64, lambda c: 8.0 if index(c) >= 37 else 512.0)
    assert (res.answer, res.culprit) == (Answer.FOUND, "c37")
    assert len(booted) == len(set(booted)) == res.boots == res.builds
    assert res.builds <= math.ceil(math.log2(64)) + 2


def test_a_noisy_regression_is_named_with_its_probability() -> None:
    results = [run(64, step_at(10 + 4 * s, 0.2), cv=0.15, seed=s)[0] for s in range(8)]
    assert [r.culprit for r in results] == [f"c{10 + 4 * s}" for s in range(8)]
    assert all(r.confidence >= 0.995 for r in results)
    assert all("references" in " ".join(r.notes) for r in results)


def test_no_change_is_never_a_culprit_and_says_how_sure() -> None:
    # At CV 15%, 0 and the 5% minimum effect are hard to tell apart: some jobs reach the
    # endpoints' cap and "cannot decide", as the gate did.
    results = [run(64, lambda c: 100.0, cv=0.15, seed=s)[0] for s in range(6)]
    assert all(r.answer in (Answer.NO_DIFFERENCE, Answer.UNDECIDED) for r in results)
    assert all(r.culprit is None and "P(no culprit)" in r.message for r in results)
    assert any(r.answer == Answer.NO_DIFFERENCE for r in results)
    # ... and one that cannot decide names the floor it could not rule out
    undecided = [r for r in results if r.answer == Answer.UNDECIDED]
    assert undecided and all("under the 5.0% minimum effect" in r.message for r in undecided)


def test_the_better_way_is_no_difference_that_says_which_mode_finds_it() -> None:
    res, engine, _ = run(32, lambda c: 130.0 if index(c) >= 9 else 100.0, cv=0.1)
    assert res.answer == Answer.NO_DIFFERENCE
    assert engine.gate is not None and engine.gate.gate == "wrong-way"


def test_endpoints_are_booted_in_balanced_pairs_and_interleaved_all_job_long() -> None:
    res, _, booted = run(64, step_at(40, 0.1), cv=0.15, seed=2)
    assert res.culprit == "c40"
    first = booted[:6]
    assert sorted(first) == ["c64"] * 3 + ["root"] * 3  # three old-new blocks
    assert all({first[i], first[i + 1]} == {"root", "c64"} for i in (0, 2, 4))
    assert first[0::2] != ["root"] * 3 or first[1::2] != ["c64"] * 3  # not always old first
    half = len(booted) // 2
    assert booted[half:].count("root") >= 5 and booted[half:].count("c64") >= 5


def test_slow_drift_bigger_than_the_step_does_not_fool_it() -> None:
    # +0.1% a boot: the host moves 20-40% over the job, two to four times the step.
    results = [
        run(64, step_at(20 + 7 * s, 0.1), cv=0.15, seed=s, load=lambda n: 1 + 0.001 * n)[0]
        for s in range(6)
    ]
    assert [r.culprit for r in results] == [f"c{20 + 7 * s}" for s in range(6)]


def test_a_lasting_shift_and_a_disturbed_stretch_are_the_trend_s_motion() -> None:
    def shifted(n: int) -> float:
        return 1.15 if n >= 12 else 1.0

    def disturbed(n: int) -> float:
        return 0.75 if 8 <= n < 20 else 1.0

    jobs = [
        run(64, step_at(38, 0.25), cv=0.08, seed=s, load=load)
        for s in (1, 2, 3)
        for load in (shifted, disturbed)
    ]
    assert [res.culprit for res, _, _ in jobs] == ["c38"] * 6
    assert any("jumped" in note for res, _, _ in jobs for note in res.notes)


def test_parallel_picks_are_the_posterior_s_quantiles() -> None:
    engine = Engine(linear(63), new="c63", old=["root"], config=EngineConfig(parallel=3))
    for i in range(6):  # three blocks of noisy endpoints that plainly differ
        engine.observe("root", Boot([500.0 + i, 510.0, 505.0]))
        engine.observe("c63", Boot([250.0 + i, 255.0, 260.0]))
    engine.wants()
    engine.posterior.update({"c63": 50.0})  # "no culprit" ruled out: the range is uniform
    picks = sorted(index(c) for c in engine.posterior.quantiles(3, engine._testable()))
    assert all(abs(p - q) <= 1 for p, q in zip(picks, (16, 32, 48), strict=True))


def _round_sizes(seed: int) -> tuple[list[int], list[list[str]], str | None]:
    """A 10% step at CV 15% under --parallel 8: each round's size, the rounds, the culprit."""
    engine = Engine(linear(64), new="c64", old=["root"], config=EngineConfig(parallel=8))
    rng, value = random.Random(seed), step_at(30, 0.1)
    sigma = math.sqrt(math.log1p(0.15**2) / 2)
    rounds = []
    while commits := engine.wants():
        rounds.append(commits)
        for c in commits:
            b = value(c) * math.exp(rng.gauss(0, sigma))
            engine.observe(c, Boot([b * math.exp(rng.gauss(0, sigma)) for _ in range(3)]))
    return [len(r) for r in rounds], rounds, engine.result().culprit


def test_a_round_of_parallel_k_is_k_boots_references_included() -> None:
    # Every round is 8 (or 9 when a commit's verdict waits on the level): references on
    # top of 8 probes left a second wave mostly idle on 8 hosts. Late rounds boot the last
    # commits again.
    for seed in (1, 2):
        sizes, rounds, culprit = _round_sizes(seed)
        assert culprit == "c30"
        assert sizes[0] == 2 and set(rounds[1]) == {"root", "c64"} and sizes[1] == 8
        assert all(8 <= n <= 9 for n in sizes[1:]), sizes
        assert any(
            len(set(r) - {"root", "c64"}) < len(r) - r.count("root") - r.count("c64")
            for r in rounds
        ), "no round booted a commit twice"


def test_a_commit_that_does_not_build_leaves_two_candidates() -> None:
    res, engine, _ = run(32, step_at(17, 0.25), cv=0.05, failing=frozenset({"c16"}), seed=3)
    assert engine.decisions["c16"].state == State.SKIP
    assert res.answer == Answer.AMBIGUOUS and set(res.candidates) == {"c16", "c17"}


def test_a_person_s_mark_rules_out_what_it_contradicts() -> None:
    engine = Engine(linear(16), new="c16", old=["root"], config=EngineConfig())
    engine.mark("c8", State.NEW)
    engine.posterior.update({})
    assert engine.posterior.p_none == 0.0
    assert engine.posterior.p_new("c8") == 1.0


def test_commits_that_cannot_change_the_kernel_are_never_booted_nor_named() -> None:
    engine = Engine(linear(32), new="c32", old=["root"], config=EngineConfig())
    for i in range(1, 32):
        if i % 4:
            engine.same_kernel(f"c{i}", f"c{i - 1}" if i > 1 else "root", "touches nothing")
    rng = random.Random(5)
    booted = []
    while commits := engine.wants():
        for c in commits:
            booted.append(c)
            level = 80.0 if index(c) >= 20 else 100.0
            engine.observe(c, Boot([level * math.exp(rng.gauss(0, 0.07)) for _ in range(3)]))
    res = engine.result()
    assert res.culprit == "c20"
    assert {c for c in booted if c not in ("root", "c32")} <= {f"c{i}" for i in range(4, 32, 4)}


def test_a_twin_names_the_judged_commit_it_took_its_verdict_from_or_says_none_was_booted() -> None:
    """The README job's report named, for most of its twins, a commit absent from its
    table: their kernel's commit, never booted, placed by the verdicts around it."""
    engine = Engine(linear(16), new="c16", old=["root"], config=EngineConfig())
    engine.same_kernel("c5", "c4", "touches nothing")
    engine.same_kernel("c9", "c8", "touches nothing")
    engine.same_kernel("c13", "c12", "touches nothing")
    engine.same_kernel("c14", "c13", "touches nothing")  # a twin of a twin
    engine.same_kernel("c2", "root", "touches nothing")
    engine.mark("c8", State.OLD)
    engine.mark("c10", State.NEW)
    d = engine.decisions
    assert (d["c9"].verdict_of, d["c9"].note) == ("c8", "touches nothing: the verdict of c8")
    assert (d["c2"].verdict_of, d["c2"].note) == ("root", "touches nothing: the verdict of root")
    assert d["c5"].verdict_of == "" and d["c5"].state == State.OLD
    assert d["c5"].note == "touches nothing: the kernel of c4, never booted, an ancestor of c8"
    for twin in ("c13", "c14"):
        assert d[twin].verdict_of == "" and d[twin].state == State.NEW
        assert d[twin].note.endswith("the kernel of c12, never booted, a descendant of c10")
    order = list(d)  # the steps' order: a twin after the verdict it names
    assert order.index("c8") < order.index("c9")
    step = decision_step(judged(engine, "c5"), "c5", "", Mode.REGRESSION, Measured(), 1)
    assert (step.same_as, step.source) == ("", "same-kernel")


def test_an_image_first_built_at_a_later_commit_leaves_the_earliest_twin_the_culprit() -> None:
    # Fix lab seed 566661072: c9 and c11 touch nothing the config compiles, and the fix
    # (c10), built after the new end, came out byte-identical to it. The later commits of
    # one kernel cannot be the culprit (their kernel was made before them); the earliest can.
    engine = Engine(linear(12), new="c12", old=["root"], config=EngineConfig())
    engine.same_kernel("c9", "c8", "touches no file the config compiles")
    engine.same_kernel("c11", "c10", "touches no file the config compiles")
    rng, booted = random.Random(3), []
    while commits := engine.wants():
        if "c12" in booted and "c10" not in engine.search.same_as:  # built in round one
            engine.same_kernel("c10", "c12", "its image is byte-identical")
        for c in commits:
            if c in engine.search.same_as:
                continue
            booted.append(c)
            level = 80.0 if index(c) >= 10 else 100.0
            engine.observe(c, Boot([level * math.exp(rng.gauss(0, 0.05)) for _ in range(3)]))
    res = engine.result()
    assert (res.answer, res.culprit) == (Answer.FOUND, "c10"), res.message
    assert not {"c9", "c10", "c11"} & set(booted), booted


def test_the_same_boots_give_the_same_job() -> None:
    a = run(64, step_at(30, 0.1), cv=0.15, seed=9)
    b = run(64, step_at(30, 0.1), cv=0.15, seed=9)
    assert a[2] == b[2] and a[0] == b[0]


def test_a_boot_tells_most_at_even_odds_and_more_the_further_apart_the_sides() -> None:
    for separation in (0.8, 1.75, 3.0):
        values = [information(q, separation) for q in (0.5, 0.75, 0.9, 0.99)]
        assert values == sorted(values, reverse=True) and values[-1] > 0
    assert information(0.5, 0.8) < information(0.5, 1.75) < information(0.5, 3.0) < math.log(2)
    assert information(0.5, 8.0) == pytest.approx(math.log(2), abs=0.01)  # a counter: one bit
    assert information(0.0, 2.0) == information(1.0, 2.0) == 0.0


def _two_hosts(seed: int) -> Engine:
    """A job whose boots land on VM host a or b at random; b reads 20% faster (twice the
    step), as a bigger machine in the same pool would."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(0.1**2) / 2)
    engine = Engine(linear(32), "c32", ["root"], EngineConfig())
    while commits := engine.wants():
        for c in commits:
            host = rng.choice("ab")
            level = (
                step_at(13, 0.1)(c) * (1.2 if host == "b" else 1.0) * math.exp(rng.gauss(0, sigma))
            )
            engine.observe(c, Boot([level * math.exp(rng.gauss(0, sigma)) for _ in range(3)], host))
    return engine


def test_each_host_is_judged_against_its_own_references() -> None:
    for seed in range(3):
        engine = _two_hosts(seed)
        assert engine.result().culprit == "c13", seed
        fit = fit_of(engine)
        assert set(fit.trends) == {"a", "b"}
        # the hosts' gap as fitted, within 3 of its own standard errors of the truth
        (level_a, var_a), (level_b, var_b) = (fit.trends[h].at(engine.clock) for h in "ab")
        assert abs(level_b - level_a - math.log(1.2)) < 3 * math.sqrt(var_a + var_b), seed


def test_a_boot_on_a_host_without_references_tells_nothing() -> None:
    engine = _two_hosts(0)
    far = engine.boots["c12"][0].samples[0] / 2  # half its level: "new" on any known host
    for _ in range(10):
        engine.observe("c12", Boot([far] * 3, "c"))
    engine.weigh.refresh()
    assert engine.posterior.p_new("c12") < 0.01  # still old: host c's level is unknown
    assert not engine.weigh.level_bound(
        "c12"
    )  # its boots on host c weigh nothing (a KeyError once)


def test_each_split_of_every_boot_is_weighed_not_each_commit_alone() -> None:
    # The hypotheses are weighed on their splits (split_likelihood), not each commit on
    # its own boots: the same boots give another posterior, and the seeded noisy jobs
    # name their culprits.
    for s in range(4):
        res, engine, _ = run(64, step_at(12 + 7 * s, 0.1), cv=0.15, seed=s)
        assert res.culprit == f"c{12 + 7 * s}", s
        assert res.confidence >= 0.995
        fit = fit_of(engine)
        weighed = list(engine.posterior.p)
        engine.posterior.update(
            {c: engine.weigh._commit_llr(c, fit) for c in engine.boots if c != "root"}
        )
        pairs = zip(weighed, engine.posterior.p, strict=True)
        assert max(abs(math.log(a / b)) for a, b in pairs if a > 1e-9 and b > 1e-9) > 0.1


def test_a_steep_drop_is_named_in_a_few_boots() -> None:
    # A 98% drop with little noise: the step prior's wide scales keep it from being
    # 28 of the narrow one's away, where "no culprit" won (split_likelihood.STEP_SCALES).
    res = run(64, step_at(19, 0.985), cv=0.02)[0]
    assert res.culprit == "c19", res.message
    assert res.boots < 40


def _rolling(seed: int, hosts: dict[str, float]) -> tuple[Engine, list[tuple[str, str]]]:
    """A noisy 25% step at c21 of 32, booted by next_for on hosts of these levels: each
    host is handed a boot as it frees up, and boots end in a seeded random order."""
    rng = random.Random(seed)
    engine = Engine(linear(32), "c32", ["root"], EngineConfig())
    running: list[tuple[str, str]] = []  # (host, commit)
    handed: list[tuple[str, str]] = []
    free = list(hosts)
    while True:
        for host in free:
            commit = engine.next_for(host, [c for _, c in running])
            if commit is not None:
                running.append((host, commit))
                handed.append((host, commit))
        if not running:
            return engine, handed
        host, commit = running.pop(rng.randrange(len(running)))
        level = hosts[host] * (75.0 if commit != "root" and index(commit) >= 21 else 100.0)
        boot = level * math.exp(rng.gauss(0, 0.1))
        engine.observe(commit, Boot([boot * math.exp(rng.gauss(0, 0.02)) for _ in "123"], host))
        free = [host]


def test_rolling_picks_give_each_host_its_references_and_name_the_culprit() -> None:
    hosts = {"a": 1.0, "b": 1.06, "c": 0.95}  # levels a quarter of the step apart and more
    for seed in range(3):
        engine, handed = _rolling(seed, hosts)
        assert engine.result().culprit == "c21", seed
        for host in hosts:  # each host's first two boots: both endpoints
            first = [c for h, c in handed if h == host][:2]
            assert sorted(first) == ["c32", "root"], (seed, host, first)
        probes = [c for _, c in handed if c not in ("root", "c32")]
        assert len(set(probes)) >= 4  # hosts freed together got different commits


def test_a_rolling_pick_is_not_a_commit_already_booting_while_others_split() -> None:
    engine = Engine(linear(63), new="c63", old=["root"], config=EngineConfig())
    for i in range(6):  # the endpoints plainly differ, on host a
        engine.observe("root", Boot([500.0 + i, 510.0, 505.0], "a"))
        engine.observe("c63", Boot([250.0 + i, 255.0, 260.0], "a"))
    first = engine.next_for("a", [])  # host a booted both endpoints: it probes at once
    second = engine.next_for("a", [first] if first else [])
    assert first is not None and second is not None
    assert first not in ("root", "c63") and second not in ("root", "c63", first)


def test_each_host_boots_its_own_references_a_block_every_few_probes() -> None:
    engine = Engine(linear(63), new="c63", old=["root"], config=EngineConfig())
    for i in range(6):  # the endpoints plainly differ, on host a
        engine.observe("root", Boot([500.0 + i, 510.0, 505.0], "a"))
        engine.observe("c63", Boot([250.0 + i, 255.0, 260.0], "a"))
    # a slot whose host is not known yet takes the endpoint booted least, boots in flight
    # counted
    assert engine.next_for(None, ["root"]) == "c63"
    engine.observe("c63", Boot([250.0, 255.0, 260.0], "b"))
    # host b booted the new endpoint only: it owes the old one before any probe
    assert engine.next_for("b", []) == "root"
    handed = [engine.next_for("b", []) for _ in range(REFERENCE_EVERY + 2)]
    ends = ("c63", "root")
    assert not set(ends) & set(handed[:REFERENCE_EVERY]), handed  # its probes, then
    assert sorted(handed[REFERENCE_EVERY:]) == sorted(ends), handed  # an old-new block


def test_a_commit_booted_only_where_no_reference_ran_is_reported_unplaced() -> None:
    # A round over three VM hosts sent a probe to one that had booted no endpoint: its boots
    # are not weighed, and its report step has a value but no position between the ends.
    engine = Engine(linear(63), new="c63", old=["root"], config=EngineConfig())
    for i in range(6):
        engine.observe("root", Boot([500.0 + i, 510.0, 505.0], "a"))
        engine.observe("c63", Boot([250.0 + i, 255.0, 260.0], "a"))
    engine.observe("c20", Boot([300.0, 301.0, 299.0], "c"))
    engine.wants()
    assert engine.scores("c20") == []
    m = Measured(raw=[300.0], hosts=["c"])
    engine.decisions["c20"] = Decision(State.OLD, 1, -1.0, firm=True)
    step = decision_step(judged(engine, "c20"), "c20", "", Mode.REGRESSION, m, 1)
    assert step.value == 300.0 and step.position is None


def test_a_slope_is_fitted_only_where_the_references_show_one() -> None:
    # A steady host gets a flat level, known alike all job long, so a probe's boots carry
    # no slope's error (an always-on slope took 10% more boots); a host that drifts 0.1%
    # a boot still gets its slope.
    for s in range(2):
        res, engine, _ = run(64, step_at(12 + 7 * s, 0.1), cv=0.15, seed=s)
        assert res.culprit == f"c{12 + 7 * s}", s
        assert not fit_of(engine).trend.model.slope
    res, engine, _ = run(64, step_at(27, 0.1), cv=0.15, seed=1, load=lambda n: 1 + 0.001 * n)
    assert res.culprit == "c27"
    assert fit_of(engine).trend.model.slope


def test_a_host_that_swings_has_boots_in_a_row_count_partly_as_one() -> None:
    # The host's speed swings 10% for a few boots at a time (an AR(1), 0.8 a boot: the
    # lab-103 run). The swing is found in the boots' residuals, two boots in a row then
    # carry more shared error than two boots far apart, and each probe has what the
    # references around it read beyond their side taken off.
    speeds = swinging_speeds(3, 0.8, 0.1, 1000)
    for s in range(3):
        res, engine, _ = run(32, step_at(21, 0.15), cv=0.03, seed=s, load=speeds.__getitem__)
        assert res.culprit == "c21", (s, res.message)
        fit = fit_of(engine)
        found = fit.trend.swing
        assert found is not None and found.phi >= 0.5, (s, found)
        assert fit.trend.swing_mean, s
        near = fit.level_var([("", 100), ("", 101)])
        apart = fit.level_var([("", 100), ("", 130)])
        assert near > apart + found.var / 4, (near, apart)
        assert any("swings" in n for n in res.notes), res.notes
        # a verification boot that read high beside a base boot that read as high (the
        # swing) is taken most of the way back
        base = fit.trend.at(engine.clock)[0] + fit.old_mean + fit.step + 0.1
        assert engine.pairs_verification()
        assert engine.paired(base, base, new_side=True) == pytest.approx(
            base - found.next_boot * 0.1
        )
    # On a steady host it finds none
    for s in range(2):
        _, engine, _ = run(64, step_at(12 + 7 * s, 0.1), cv=0.15, seed=s)
        assert fit_of(engine).trend.swing is None, s
        assert not engine.pairs_verification(), s


def test_a_drift_the_references_cannot_yet_tell_from_a_still_level_fools_no_verdict() -> None:
    # A host 0.1% faster each boot (30% over a long job). Early on the references cannot
    # tell that from a still level; taking the still level as known named a wrong commit
    # in these seeded jobs. The moving levels the references leave likely are weighed
    # beside it, and the culprit is named.
    for s in (51, 52):
        culprit = 12 + 7 * (s % 7)
        named = run(64, step_at(culprit, 0.1), cv=0.15, seed=s, load=lambda n: 1 + 0.001 * n)[0]
        assert named.culprit == f"c{culprit}", (s, named.message)


def test_a_boot_beside_another_shares_its_moment() -> None:
    # A duet: two guests at one moment on one host; the second boot keeps the clock.
    engine = Engine(linear(8), new="c8", old=["root"], config=EngineConfig())
    engine.observe("root", Boot([100.0, 101.0, 99.0]))
    engine.observe("c8", Boot([90.0, 91.0, 89.0], beside=True))
    engine.observe("c8", Boot([90.0, 91.0, 89.0]))
    assert (engine.times["root"], engine.times["c8"]) == ([1], [1, 2])


def test_a_round_in_duets_pairs_each_probe_with_a_reference_and_no_reference_alone() -> None:
    engine = Engine(linear(8), "c8", ["root"], EngineConfig())
    # the round's own reference goes beside the probe; the other one takes its twin
    assert engine.duet_pairs(["c3", "root", "c8"]) == [("root", "c3"), ("c8", "root")]
    # a probe alone in its round is given the next reference of the balanced blocks
    (partner, probe), *more = engine.duet_pairs(["c5"])
    assert partner in ("root", "c8") and probe == "c5" and not more
    engine.same_kernel("c6", "c5", "touches no file the config compiles")
    assert engine.duet_pairs(["c6", "root", "c8"]) == [("root", "c8")]


def test_hosts_whose_first_boots_are_of_one_endpoint_each_say_nothing_yet() -> None:
    # Host b reads 11% faster than host a; the new endpoint is 10% slower. Its first boots
    # all ran on b and the old one's on a, so they read alike: a level fitted to each
    # host's own boots took them to their side's mean exactly and made them look
    # noiseless, and the job said "no difference" (a farm of 8, 1 job in 6).
    engine = Engine(linear(16), "c16", ["root"], EngineConfig())
    for i in range(4):
        engine.observe("root", Boot([100.0 + i, 101.0 + i, 99.5 + i], "a"))
        engine.observe("c16", Boot([100.0 - i, 100.5 - i, 99.0 - i], "b"))
    assert not engine.first_blocks_in()  # no host has booted both
    assert sorted(engine.wants()) == ["c16", "root"]  # references, not an answer
    assert engine.next_for("a", []) == "c16"  # host a owes the new endpoint
    # once each host has booted both, the hosts' gap is theirs and the step shows
    for i in range(4):
        engine.observe("c16", Boot([90.0 + i, 90.5 + i, 89.5 + i], "a"))
        engine.observe("root", Boot([111.0 - i, 111.5 - i, 110.5 - i], "b"))
    assert engine.first_blocks_in()
    engine.weigh.refresh()
    assert engine.posterior.p_none < 0.5


def _two_hosts_alike(counts: tuple[tuple[int, int], tuple[int, int]]) -> Engine:
    """Endpoints that read alike on hosts a and b, b 10% faster: (old, new) boots each."""
    spread = [0.02, -0.02, 0.012, -0.012]
    engine = Engine(linear(16), "c16", ["root"], EngineConfig())
    for host, level, (n_old, n_new) in zip(("a", "b"), (100.0, 110.0), counts, strict=True):
        for commit, n, sign in (("root", n_old, 1), ("c16", n_new, -1)):
            for i in range(n):
                v = level * (1 + sign * spread[i % len(spread)])
                engine.observe(commit, Boot([v, v, v], host))
    engine.weigh.refresh()
    return engine


def test_a_no_difference_on_two_hosts_rules_out_the_floor_with_their_levels_in_it() -> None:
    # The same 9+9 endpoint boots: spread evenly over the hosts, each host's level cancels
    # in its own old-new difference and the 5% floor is ruled out; 8 old boots on a and 8
    # new ones on b tell mostly the hosts' gap, and the job boots on (the plain interval of
    # the level-adjusted boots would have ruled the floor out).
    even = _two_hosts_alike(((5, 4), (4, 5)))
    said = even.weigh.no_difference(1.0)
    assert even.weigh.ruled_out() and said.gate == "same"
    assert "at most the expected way (each host's level taken out)" in said.message
    lopsided = _two_hosts_alike(((8, 1), (1, 8)))
    said = lopsided.weigh.no_difference(1.0)
    assert not lopsided.weigh.ruled_out() and said.gate == "undecided"
    assert said.effect.low > -0.05  # the plain interval stops short of the floor


def test_a_rolling_job_on_hosts_a_level_apart_names_its_culprit() -> None:
    for seed in range(3):
        engine, _ = _rolling(seed, {"a": 1.0, "b": 1.1, "c": 0.93, "d": 1.04})
        res = engine.result()
        assert res.culprit == "c21", (seed, res.message)


def test_the_wild_boots_noise_figure_reads_three_boots_noise_at_its_size() -> None:
    # Commits of 3 boots each, as early in a job: the figure must read the true noise
    # (a median distance from each commit's median read about half of it, and 6 of its
    # "sigmas" were 3 true ones: clean boots went wild and a job named a wrong commit).
    rng = random.Random(5)
    groups = [[rng.gauss(0, 1.0) for _ in range(3)] for _ in range(400)]
    assert pair_sigma(groups) == pytest.approx(1.0, rel=0.08)
    # ... and a few wild boots do not widen it
    groups[:20] = [[0.0, 0.1, 40.0] for _ in range(20)]
    assert pair_sigma(groups) == pytest.approx(1.0, rel=0.12)
    assert pair_sigma([[1.0, 2.0, 3.0]]) == 0.0  # 3 pairs: too few to judge by


# The real sched-pipe job of issue "One wild boot stalls a job" (usecs_per_op, lower is
# better): its old endpoint's boots in order, the third while the host was swamped.
SWAMPED_OLD = [129, 97, 2604, 98, 97, 94, 123, 96, 104, 93, 108, 116, 97, 95, 99]


def test_one_wild_boot_is_set_aside_and_the_job_moves_on_to_the_range() -> None:
    rng = random.Random(7)
    engine = Engine(linear(32), "c32", ["root"], EngineConfig(better="lower"))
    for i, old in enumerate(SWAMPED_OLD):
        new = rng.gauss(118.6, 4.8)
        for commit, value in (("root", float(old)), ("c32", new)):
            reps = [value * (1 + rng.gauss(0, 0.01)) for _ in range(3)]
            engine.observe(commit, Boot(reps))
        if i >= 2:  # each round asked, as a job does: it still wants boots
            assert engine.wants()
    picks = engine.wants()
    assert any(c not in ("root", "c32") for c in picks), picks  # on to the range
    assert engine.gate is not None and engine.gate.gate == "different"
    effect = engine.weigh.effect()  # all 30 boots'
    assert 0.1 < effect.low < effect.value < effect.high < 0.4, effect  # excludes no change
    # the swamped boot, and the first (129: a third slower, 7 sigmas off, while the host
    # was still busy)
    assert engine.weigh.wild == {"root": {0, 2}}
    assert any("set aside" in n for n in engine.weigh.notes())


def test_a_burst_that_reads_a_good_commit_as_the_step_does_not_name_it() -> None:
    # Lab 103's real burst: two boots in a row 1.35 times slow, the step's own size. Here
    # the first, c40's only boot, read as the new side: named at 99.9% before STRETCH
    def burst(n: int) -> float:
        return 1 / 1.35 if n in (9, 10) else 1.0

    result, _, booted = run(64, step_at(44, 0.25), cv=0.05, seed=11, load=burst)
    assert booted[8] == "c40"
    assert result.culprit == "c44"
    for commit in ("c43", "c44"):  # the answer's two sides: booted apart, not back to back
        at = [i for i, c in enumerate(booted) if c == commit]
        assert at[-1] - at[0] >= len(at), (commit, at)


def test_a_commit_asked_apart_that_no_longer_boots_ends_the_job() -> None:
    # The boot apart may fail (a hang): the commit is not asked again, and the job ends
    def burst(n: int) -> float:
        return 1 / 1.35 if n in (9, 10) else 1.0

    # a probe's third boot hangs; the commit asked apart had two
    result, _, booted = run(
        64, step_at(44, 0.25), cv=0.05, seed=11, load=burst, hangs_after=2, within=500
    )
    assert result.answer in (Answer.FOUND, Answer.AMBIGUOUS), len(booted)


def test_a_revert_to_the_old_image_rules_out_the_commits_it_reverts() -> None:
    # Lab of CI run 76: c2 does not build, c3 reverts it and its image is byte-identical
    # to the old end's, c4 is the culprit. c3 is never booted (a twin), so only its
    # kernel's sameness says c2 cannot be the culprit; before, two candidates were left.
    engine = Engine(linear(16), new="c16", old=["root"], config=EngineConfig())
    engine.same_kernel("c1", "root", "touches no file the config compiles")
    rng, booted = random.Random(4), []
    while commits := engine.wants():
        for c in commits:
            if c in ("c2", "c3"):  # both built in one round: c3's image matches root's
                engine.same_kernel("c3", "root", "its image is byte-identical")
            if c in engine.search.same_as:
                continue
            booted.append(c)
            if c == "c2":
                engine.observe(c, None)
                continue
            level = 8.0 if index(c) >= 4 else 512.0
            engine.observe(c, Boot([level * math.exp(rng.gauss(0, 0.01)) for _ in range(1)]))
    res = engine.result()
    assert (res.answer, res.culprit) == (Answer.FOUND, "c4"), res.message
    assert "c3" not in booted


def test_a_step_s_figure_says_what_it_is_where_the_change_lies() -> None:
    # "good, 1 boot, 100.0% sure" read as sure of the boot; the figure is the posterior that
    # the change lies after an old-like commit, at or before a new-like one
    engine = Engine(linear(8), new="c8", old=["root"], config=EngineConfig())
    for i in range(4):
        engine.observe("root", Boot([57.0 + i, 60.0, 64.0], "a"))
        engine.observe("c8", Boot([80.0 + i, 85.0, 90.0], "a"))
    engine.decisions["c3"] = Decision(State.OLD, 1, -1.0, firm=True)
    engine.decisions["c6"] = Decision(State.NEW, 1, 1.0, firm=True)
    m = Measured(raw=[58.0], hosts=["a"])
    old = decision_step(judged(engine, "c3"), "c3", "", Mode.REGRESSION, m, 1)
    new = decision_step(judged(engine, "c6"), "c6", "", Mode.FIX, m, 1)
    assert old.confidence is not None and new.confidence is not None
    assert old.note == f"1 boot; the first bad commit is after it: {old.confidence:.1%}"
    assert new.note == f"1 boot; the fix is at it or before it: {new.confidence:.1%}"
