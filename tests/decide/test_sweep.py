"""A sweep's decisions (workflows.sweep) on simulated boots: which pair changed, and that
equal kernels, a drifting host and a small change raise no alert."""

import random
from collections.abc import Callable
from typing import Any

from benchmarks.sweep_adaptive import simulate
from kbisect.decide.sweep import Sweep
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepTestcase

SECTORS = SweepTestcase("t", "avg_read_sectors", "sectors", "higher", "fast", 3, 60.0)
Level = Callable[[int, int], float]  # (kernel, boot number of the whole sweep) -> level


def run(kernels: list[float], seed: int, **kw: Any) -> tuple[list[SweepPair], int]:
    return simulate(kernels, seed, **kw)


def words(pairs: list[SweepPair]) -> list[str]:
    return [p.verdict for p in pairs]


def test_a_25_percent_step_is_changed_at_its_pair_and_nowhere_else() -> None:
    """At CV 15% and 12 boots a kernel: found in 97% of sweeps (300 simulated); a false
    alert on about 1 pair in 75."""
    found, false = 0, 0
    for seed in range(100):
        pairs, _ = run([100, 100, 75, 75, 75], seed)
        if pairs[1].verdict == PairWord.CHANGED:
            found += 1
            assert pairs[1].direction == "worse"
            assert pairs[1].low is not None and pairs[1].high is not None
            assert pairs[1].low < (pairs[1].effect or 0) < pairs[1].high < -0.05
        false += sum(p.verdict == PairWord.CHANGED for i, p in enumerate(pairs) if i != 1)
    assert found >= 92, found
    assert false <= 6, false  # of 300 pairs


def test_a_faster_kernel_is_changed_for_the_better() -> None:
    pairs, _ = run([100, 130, 130], 1)
    assert (pairs[0].verdict, pairs[0].direction) == (PairWord.CHANGED, "better")


def test_five_equal_kernels_raise_about_one_false_alert_in_75_sweeps() -> None:
    """ALPHA (1%) is spent over the pairs and their looks: 20 false pairs in 1,500
    simulated sweeps of 4 pairs each when this was written."""
    alerts = sum(
        p.verdict == PairWord.CHANGED for seed in range(200) for p in run([100] * 5, seed)[0]
    )
    assert alerts <= 6, alerts


def test_a_drifting_host_does_not_read_as_a_change() -> None:
    """0.5% a boot: over a 60-boot sweep the host's level moves 30%, far more than the
    5% minimum; random interleaved rounds spread it over every kernel alike."""
    alerts = sum(
        p.verdict == PairWord.CHANGED
        for seed in range(200)
        for p in run([100] * 5, seed, drift=0.005)[0]
    )
    assert alerts <= 6, alerts


def test_a_change_under_the_noise_floor_cannot_be_told_and_says_its_bound() -> None:
    pairs, n = run([100, 98], 3, budget=12)
    assert pairs[0].verdict in (PairWord.CANNOT_TELL, PairWord.SAME)
    assert n <= 24
    if pairs[0].verdict == PairWord.CANNOT_TELL:
        assert pairs[0].bound is not None and 0.02 < pairs[0].bound < 0.5


def test_a_counter_is_decided_by_one_boot_of_each_kernel() -> None:
    pairs, n = run([512, 512, 8, 8], 0, cv=0, testcase=SECTORS)
    assert words(pairs) == [PairWord.SAME, PairWord.CHANGED, PairWord.SAME]
    assert n == 4


def test_a_kernel_that_does_not_build_leaves_its_pairs_undecided_not_the_rest() -> None:
    pairs, _ = run([512, 512, 8, 8, 8], 0, cv=0, testcase=SECTORS, broken=2)
    assert words(pairs) == [
        PairWord.SAME,
        PairWord.CANNOT_TELL,
        PairWord.CANNOT_TELL,
        PairWord.SAME,
    ]
    assert "kernel 3 does not build" in pairs[1].message


def test_a_kernel_that_never_boots_is_given_up_after_three_failures() -> None:
    sweep = Sweep(2, [SECTORS], 12, 0.05)
    rng = random.Random(0)
    boots = 0
    while order := sweep.round(rng):
        for t, k in order:
            boots += 1
            if k == 1:
                sweep.failed(t, k, "the kernel did not boot")
            else:
                sweep.boot(t, k, [512.0] * 3)
    (pair,) = sweep.pairs()
    assert pair.verdict == PairWord.CANNOT_TELL
    assert "3 boots failed: the kernel did not boot" in pair.message
    assert boots <= 6


def test_a_sweep_decided_within_its_budget_boots_as_before_and_an_undecided_one_goes_on() -> None:
    """--max-boots changes nothing for a sweep whose pairs all decide within --boots (the
    same looks at the same false-alert rate); a pair left undecided goes on, in rounds."""
    decided = undecided = settled = 0
    for seed in range(30):
        before, n_before = run([100, 100, 75], seed, cv=0.07)
        after, n_after = run([100, 100, 75], seed, cv=0.07, cap=48)
        if PairWord.CANNOT_TELL not in words(before):
            decided += 1
            assert (words(after), n_after) == (words(before), n_before), seed
        else:
            undecided += 1
            assert n_after >= n_before, seed
            settled += PairWord.CANNOT_TELL not in words(after)
    assert decided and undecided and settled >= undecided / 2, (decided, undecided, settled)


def test_a_loaded_host_finds_the_step_once_an_undecided_pair_goes_on() -> None:
    """CV 30% (a host busy with other work): at 12 boots a kernel the 25% step is mostly
    "cannot tell"; going on to 48 finds it (200 simulated sweeps: 22% -> 94.5%)."""
    found = {12: 0, 48: 0}
    for seed in range(40):
        for cap in found:
            pairs, n = run([100, 100, 75, 75, 75], seed, cv=0.30, cap=cap)
            found[cap] += pairs[1].verdict == PairWord.CHANGED
            assert n <= 5 * cap
    assert found[12] <= 16 and found[48] >= 36, found


def test_past_the_budget_a_pair_the_cap_could_hardly_decide_stops() -> None:
    """Five equal kernels on a loaded host (CV 30%): 5% cannot be ruled out within 48
    boots (it takes about 195), so most pairs stop at the budget, not at the cap."""
    stopped = boots = 0
    for seed in range(20):
        pairs, n = run([100.0] * 5, seed, cv=0.30, cap=48)
        boots += n
        stopped += sum("48 boots a kernel would hardly decide it" in p.message for p in pairs)
        assert all(p.verdict != PairWord.SAME for p in pairs)
    assert stopped >= 60 and boots < 20 * 5 * 30, (stopped, boots)


def test_the_looks_past_the_budget_share_half_the_false_alert_rate_again() -> None:
    from kbisect.decide.endpoints import ALPHA
    from kbisect.decide.sweep import EXTENSION_ALPHA

    sweep = Sweep(5, [SECTORS], 12, 0.05, 48)
    assert sweep.alpha == ALPHA / (4 * 3)  # 3, 6 and 12: as before --max-boots
    assert sweep.alpha_beyond == EXTENSION_ALPHA / (4 * 2)  # 24 and 48
    assert Sweep(5, [SECTORS], 12, 0.05).alpha_beyond == EXTENSION_ALPHA / 4  # no look past


def test_a_budget_off_the_looks_is_a_look_of_its_own() -> None:
    """--boots 10 with a cap: the pairs are read at 3, 6 and 10, then 12, 24 and 48."""
    counts = set()
    for seed in range(10):
        pairs, _ = run([100, 100, 75], seed, cv=0.15, budget=10, cap=48)
        counts |= {c for p in pairs for c in (p.boots_old, p.boots_new)}
    assert counts <= {3, 6, 10, 12, 24, 48} and 10 in counts, counts
