"""The user's words for the search's states, both ways, in both modes."""

import pytest

from kbisect.contract import Verdict
from kbisect.decide.strategy import State
from kbisect.decide.verdict import state_for, verdict_for


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
