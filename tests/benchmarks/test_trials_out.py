"""--trials-out: each trial's outcome as a JSON line, and benchmarks.same_decisions, which
compares two such files trial by trial."""

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import accuracy, pass_fail, same_decisions

GRID = ["--sizes", "16", "--cv", "5", "--kinds", "lognormal", "--steps", "20", "aa"]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_accuracy_writes_one_line_per_trial_and_keeps_them_out_of_the_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, rows, resume = tmp_path / "trials.jsonl", tmp_path / "rows.json", tmp_path / "r.jsonl"
    argv = [*GRID, "--policies", "kbisect", "today", "--trials", "3", "--jobs", "1"]
    accuracy.main([*argv, "--trials-out", str(out), "--json", str(rows), "--resume", str(resume)])
    lines = _lines(out)
    assert len(lines) == 2 * 2 * 3  # steps x policies x trials
    first = lines[0]
    assert set(first) == {"cell", "trial", "found", "boots", "builds", "moments", "confidence"}
    assert first["cell"] == {**first["cell"], "size": 16, "step": "20", "policy": "kbisect"}
    assert [line["trial"] for line in lines[:3]] == [0, 1, 2]
    assert all(line["found"] is None for line in lines if line["cell"]["step"] == "aa")
    # the lines are run_cell's outcomes, in order; the rows' JSON stays without them
    row = accuracy.run_cell(accuracy.Cell(**first["cell"]))
    assert [line["boots"] for line in lines[:3]] == [o.boots for o in row.outcomes]
    assert all("outcomes" not in r for r in json.loads(rows.read_text()))
    assert all("outcomes" not in r for r in _lines(resume))
    capsys.readouterr()
    same_decisions.main([str(out), str(out)])
    assert capsys.readouterr().out.splitlines()[-1] == "12 trials, 0 differ"


def test_pass_fail_runs_only_the_policies_asked_and_writes_their_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trials.jsonl"
    argv = ["--sizes", "16", "--cells", "0:100", "aa:1", "--trials", "2", "--jobs", "1"]
    pass_fail.main([*argv, "--policies", "kbisect", "--trials-out", str(out)])
    printed = capsys.readouterr().out
    assert " kbisect " in printed and "syzbot" not in printed and "facf" not in printed
    lines = _lines(out)
    assert [(line["cell"]["cell"], line["trial"]) for line in lines] == [
        ("0:100", 0),
        ("0:100", 1),
        ("aa:1", 0),
        ("aa:1", 1),
    ]
    assert all(line["cell"]["policy"] == "kbisect" for line in lines)


def test_same_decisions_counts_the_trials_that_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = {"size": 16, "cell": "1:30", "policy": "kbisect", "trials": 3, "seed": 1}
    trials = [
        {
            "cell": cell,
            "trial": t,
            "found": f"c{t + 1}",
            "boots": 40 + t,
            "builds": 6,
            "no_difference": False,
            "confidence": 0.998,
        }
        for t in range(3)
    ]
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text("".join(json.dumps(t) + "\n" for t in trials))
    trials[0]["confidence"] = 0.998 + 1e-7  # within the tolerance: the same
    trials[2]["boots"] = 99
    after.write_text("".join(json.dumps(t) + "\n" for t in trials))
    same_decisions.main([str(before), str(after)])
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "16 1:30 kbisect: 3 trials, 1 differ",
        "    trial 2: boots: 42 -> 99",
        "3 trials, 1 differ",
    ]
