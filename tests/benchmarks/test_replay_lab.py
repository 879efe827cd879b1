"""benchmarks.replay_lab: a job's boots fed back in their order reach the job's answer."""

import json
import random
import statistics
from pathlib import Path

import pytest

from benchmarks import replay_lab
from benchmarks.dags import linear
from kbisect.decide.engine import Engine
from kbisect.decide.evidence import Boot
from kbisect.decide.terms import EngineConfig


def _job(culprit: int, seed: int) -> tuple[list[list[object]], str, float]:
    """A simulated 32-commit job (three repetitions a boot, 5% noise, a 20% step at `culprit`,
    whose parent is its own parent's kernel): its boots as noisy_labs keeps them, and the
    engine's answer and confidence."""
    rng, graph = random.Random(seed), linear(32)
    engine = Engine(graph, graph.order[0], ["c0"], EngineConfig())
    engine.same_kernel(f"c{culprit}", f"c{culprit - 1}", "touches no file the config compiles")
    boots: list[list[object]] = []
    while commits := engine.wants():
        for commit in commits:
            place = int(commit[1:]) - 1  # c0, the old endpoint, is place -1
            value = 100 * (0.8 if place >= culprit else 1.0) * rng.lognormvariate(0, 0.05)
            reps = [value * rng.lognormvariate(0, 0.03) for _ in range(3)]
            engine.observe(commit, Boot(reps, "vm"))
            boots.append([len(boots) + 1, place, statistics.median(reps), "vm", reps])
    result = engine.result()
    assert result.culprit is not None
    return boots, result.culprit, result.confidence


@pytest.mark.parametrize("culprit, seed", [(9, 1), (20, 2)])
def test_a_replay_reaches_the_job_s_answer(
    culprit: int, seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boots, named, confidence = _job(culprit, seed)
    assert named == f"c{culprit + 1}"
    rows = tmp_path / "runs.jsonl"
    row = {
        "lab": "lab-1-slowdown20",
        "kind": "culprit",
        "boots_in_order": boots,
        "same_kernel": [culprit - 1],  # places: c{culprit} is place culprit - 1
    }
    rows.write_text(json.dumps(row) + "\n")
    replay_lab.main([str(rows), "lab-1-slowdown20", "--every", "4", "--json"])
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed[-1]["boot"] == len(boots)
    assert (printed[-1]["top"], printed[-1]["p"]) == (named, round(confidence, 4))
    assert [p["boot"] for p in printed[:-1]] == list(range(4, len(boots), 4))[-len(printed) + 1 :]
    # a row kept before reports had repetitions: each boot's score is its one sample, and
    # the replay no longer decides exactly as the job did
    row["boots_in_order"] = [b[:4] for b in boots]
    rows.write_text(json.dumps(row) + "\n")
    replay_lab.main([str(rows), "lab-1-slowdown20", "--every", "1000", "--json"])
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["boot"] == len(boots)
    assert (last["sigma"], last["p"]) != (printed[-1]["sigma"], printed[-1]["p"])


def test_a_row_without_its_boots_says_so(tmp_path: Path) -> None:
    rows = tmp_path / "runs.jsonl"
    rows.write_text(json.dumps({"lab": "lab-1-slowdown20", "kind": "culprit"}) + "\n")
    with pytest.raises(SystemExit, match="no culprit job of lab-1-slowdown20 with its boots"):
        replay_lab.main([str(rows), "lab-1-slowdown20"])
