"""The accuracy simulator on a tiny grid: its figures come from real bisections."""

from benchmarks.accuracy import Cell, run_cell


def test_a_noise_free_step_is_found_exactly_by_every_policy() -> None:
    for policy in ("kbisect", "today", "lkp", "syzbot"):
        row = run_cell(Cell(64, 0.0, "lognormal", "50", policy, trials=5, seed=1))
        assert (row.exact, row.false) == (1.0, 0.0), policy
        assert row.builds[0] <= 8  # ceil(log2 64) + 2


def test_no_change_is_never_a_culprit_and_one_boot_per_commit_for_a_counter() -> None:
    row = run_cell(Cell(64, 0.0, "lognormal", "aa", "kbisect", trials=5, seed=1))
    assert (row.exact, row.false) == (1.0, 0.0)
    step = run_cell(Cell(64, 0.0, "lognormal", "20", "kbisect", trials=5, seed=2))
    assert step.boots == step.builds  # counters: one boot per commit


def test_noise_costs_boots_not_answers() -> None:
    row = run_cell(Cell(64, 5.0, "lognormal", "20", "kbisect", trials=10, seed=3))
    assert row.exact == 1.0 and row.boots[0] > row.builds[0]


def test_commits_that_cannot_change_the_kernel_save_builds_not_answers() -> None:
    plain = run_cell(Cell(1024, 0.0, "lognormal", "50", "kbisect", trials=20, seed=4))
    inert = run_cell(Cell(1024, 0.0, "lognormal", "50", "kbisect", trials=20, seed=4, inert=50))
    assert plain.exact == inert.exact == 1.0
    assert inert.builds[0] < plain.builds[0]
