import pytest

from kbisect.contract import Verdict
from kbisect.workflows.strategy import State
from kbisect.workflows.verdict import Calibration, classify, state_for, verdict_for

SEED = Calibration("avg_read_sectors", old=[512.0, 512.0, 512.0], new=[8.0, 8.0, 8.0])


@pytest.mark.parametrize(
    ("value", "state"),
    [
        (512, State.OLD),
        (480, State.OLD),
        (8, State.NEW),
        (40, State.NEW),
        (260, State.SKIP),
        (600, State.OLD),
        (2, State.NEW),
    ],
)
def test_classify_against_the_seed_calibration(value: float, state: State) -> None:
    assert classify(value, SEED).state == state


def test_margin_is_largest_at_the_endpoints() -> None:
    assert classify(512, SEED).margin == 1.0 and classify(8, SEED).margin == 1.0
    assert classify(300, SEED).margin < 0.2


@pytest.mark.parametrize(
    ("old", "new", "ok", "why"),
    [
        ([512.0], [8.0], True, "512 (old) vs 8 (new)"),
        ([100.0, 101.0], [102.0, 100.0], False, "under 10%"),
        ([100.0, 60.0, 140.0], [50.0, 10.0, 90.0], False, "raise --repetitions"),
        ([12.3, 12.4], [123.0, 124.1], True, ""),
    ],
)
def test_endpoints_must_differ_beyond_noise(
    old: list[float], new: list[float], ok: bool, why: str
) -> None:
    differs, message = Calibration("m", old, new).differs()
    assert differs is ok and why in message


@pytest.mark.parametrize(
    ("state", "mode", "verdict"),
    [
        (State.OLD, "regression", Verdict.GOOD),
        (State.NEW, "regression", Verdict.BAD),
        (State.OLD, "fix", Verdict.BAD),
        (State.NEW, "fix", Verdict.GOOD),
        (State.SKIP, "fix", Verdict.SKIP),
    ],
)
def test_words_per_mode_round_trip(state: State, mode: str, verdict: Verdict) -> None:
    assert verdict_for(state, mode) == verdict
    assert state_for(verdict, mode) == state
