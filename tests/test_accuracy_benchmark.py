"""The accuracy benchmark's additions: the Pinpoint and FACF baselines, the calibration
table and --resume."""

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import accuracy, sim_policies
from benchmarks.accuracy import Cell, load_finished, run_cell
from benchmarks.calibration import BINS, DECILES, calibration, wilson
from benchmarks.sim_policies import ks_p, mann_whitney_p
from kbisect.contract import DEFAULT_MAX_BOOTS, DEFAULT_MIN_EFFECT, MAX_COMMIT_BOOTS
from kbisect.decide.terms import EngineConfig


@pytest.mark.parametrize("policy", ["pinpoint", "facf"])
def test_a_baseline_names_a_clear_culprit(policy: str) -> None:
    for seed in (1, 2, 3):
        row = run_cell(Cell(64, 2.0, "lognormal", "30", policy, trials=4, seed=seed))
        assert (row.exact, row.false) == (1.0, 0.0), seed
        assert row.builds[0] <= 10  # a bisection, not a scan


def test_pinpoint_names_nothing_without_a_change() -> None:
    row = run_cell(Cell(64, 2.0, "lognormal", "aa", "pinpoint", trials=20, seed=1))
    assert (row.exact, row.false) == (1.0, 0.0)


def test_duets_boot_each_probe_beside_a_reference_in_half_the_boot_times() -> None:
    # Two guests at one moment whose between-boot noise the host shares (0.8): each
    # probe has a reference beside it, so a job's boot times are half its guest boots,
    # and it names the culprit in fewer boot times than one guest at a time.
    alone = run_cell(Cell(64, 15, "swing:0.7", "20", "kbisect", trials=6, seed=3))
    duets = run_cell(Cell(64, 15, "swing:0.7", "20", "kbisect", trials=6, seed=3, duet=0.8))
    assert (duets.exact, alone.exact) == (1.0, 1.0)
    assert alone.moments == alone.boots  # one guest at a time: a boot is a boot time
    assert duets.moments[0] == pytest.approx(duets.boots[0] / 2, abs=1)
    assert duets.moments[0] < 0.75 * alone.boots[0], (duets.moments, alone.boots)


def test_the_tests_p_values_match_pinpoints_implementation() -> None:
    # Pinpoint's own examples (compare.py): KS catches the spread, MWU the discrete shift.
    spread = (list(range(10, 30)), [*range(10), *range(30, 40)])
    assert ks_p(*spread) == pytest.approx(0.0082, abs=1e-4)
    assert mann_whitney_p(*spread) == pytest.approx(1.0)
    discrete: tuple[list[float], list[float]] = ([0.0] * 20, [0.0] * 15 + [1.0] * 5)
    assert ks_p(*discrete) == pytest.approx(0.4973, abs=1e-4)
    assert mann_whitney_p(*discrete) == pytest.approx(0.0195, abs=1e-4)  # two-sided
    assert ks_p([1.0] * 5, [1.0] * 5) == mann_whitney_p([1.0] * 5, [1.0] * 5) == 1.0


def test_calibration_bins_claims_and_brackets_each_rate() -> None:
    claims = [(0.3, False), (0.6, True), (0.95, False), (0.992, True)]
    claims += [(0.995, True)] * 199 + [(0.997, False)]  # 0.995 opens its bin
    claims += [(0.9995, True), (1.0, True)]  # the last bin holds 1
    bins = {(b.low, b.high): b for b in calibration(claims)}
    assert {k: b.jobs for k, b in bins.items()} == {
        (0.0, 0.5): 1,
        (0.5, 0.9): 1,
        (0.9, 0.99): 1,
        (0.99, 0.995): 1,
        (0.995, 0.999): 200,
        (0.999, 1.0): 2,
    }
    assert set(bins) == set(BINS)
    big = bins[(0.995, 0.999)]
    assert big.right == pytest.approx(0.995) and big.claimed == pytest.approx(0.99501)
    assert big.interval[0] < big.right < big.interval[1] and big.inside
    assert not bins[(0.9, 0.99)].inside  # claimed 0.95, right 0 of 1: interval 0-0.79
    for b in bins.values():
        assert b.interval[0] <= b.right <= b.interval[1]
    # the deciles lump the top four bins together, 1.0 included
    deciles = {(b.low, b.high): b.jobs for b in calibration(claims, DECILES)}
    assert deciles == {(0.3, 0.4): 1, (0.6, 0.7): 1, (0.9, 1.0): 204}


def test_wilson_interval_known_value() -> None:
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)


def _argv(path: Path, *steps: str) -> list[str]:
    grid = ["--sizes", "64", "--cv", "0", "--kinds", "lognormal", "--steps", *steps]
    return [*grid, "--policies", "today", "--trials", "2", "--jobs", "1", "--resume", str(path)]


def test_resume_runs_only_the_cells_missing_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, ran = tmp_path / "grid.jsonl", []
    real = accuracy.run_cell

    def counting(cell: Cell) -> accuracy.Row:
        ran.append(cell.step)
        return real(cell)

    monkeypatch.setattr(accuracy, "run_cell", counting)
    accuracy.main(_argv(path, "50"))
    assert ran == ["50"] and len(path.read_text().splitlines()) == 1
    capsys.readouterr()
    accuracy.main(_argv(path, "50", "aa"))
    assert ran == ["50", "aa"]  # the 50% cell came from the file
    out = capsys.readouterr().out
    assert "1 cells from" in out and " 50 " in out and " aa " in out and "0/2" in out
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["cell"]["step"] for r in lines] == ["50", "aa"]
    assert [r["claims"] for r in lines] == [[[0.0, True]] * 2, []]  # today claims no confidence
    accuracy.main(_argv(path, "50", "aa"))
    assert ran == ["50", "aa"]


def test_a_line_cut_short_is_skipped_and_the_next_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "grid.jsonl"
    accuracy.main(_argv(path, "50"))
    whole = path.read_text()
    path.write_text(whole + whole[:40])  # a run killed mid-line
    assert len(load_finished(path)) == 1
    accuracy.main(_argv(path, "50", "aa"))
    assert {c.step for c in load_finished(path)} == {"50", "aa"}


def test_a_cell_s_min_effect_and_caps_are_kbisect_s(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 5% step is the default floor of "no difference": its cells run kbisect with a
    # lower --min-effect, as a user hunting one would, and older rows load at the default.
    # Its caps rise with --max-boots, a commit's in proportion (or the culprit's parent
    # stops at 120 boots, short of what a 5% step needs).
    seen: list[tuple[float, int, int]] = []
    engine = sim_policies.Engine

    def spy(*args: Any, config: EngineConfig, **kwargs: Any) -> Any:
        seen.append((config.min_effect, config.max_endpoint_boots, config.max_commit_boots))
        return engine(*args, config=config, **kwargs)

    monkeypatch.setattr(sim_policies, "Engine", spy)
    cell = Cell(64, 2.0, "lognormal", "30", "kbisect", trials=2, seed=1, min_effect=2.5)
    run_cell(cell)
    run_cell(replace(cell, max_boots=384))
    default = (0.025, DEFAULT_MAX_BOOTS, MAX_COMMIT_BOOTS)
    assert seen == [default, default, (0.025, 384, 480), (0.025, 384, 480)]
    row = {k: v for k, v in asdict(Cell(64, 15, "lognormal", "10", "kbisect", 3, 1)).items()}
    del row["min_effect"], row["max_boots"]
    assert Cell(**row).min_effect == DEFAULT_MIN_EFFECT * 100
    assert Cell(**row).max_boots == DEFAULT_MAX_BOOTS


def test_a_long_cell_says_how_far_it_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(accuracy, "PROGRESS_EVERY", 0.0)
    run_cell(Cell(64, 2.0, "lognormal", "30", "kbisect", trials=3, seed=1))
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"64 2% lognormal 30 kbisect: {t} of 3 trials" for t in range(3)]
