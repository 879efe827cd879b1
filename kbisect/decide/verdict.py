"""The user's words for the search's states: in fix mode the old behaviour is the bad one."""

from kbisect.contract import Mode, Verdict
from kbisect.decide.strategy import State


def verdict_for(state: State, mode: str) -> Verdict:
    """The user's word for a state: in fix mode the old behaviour is the bad one."""
    if state == State.SKIP:
        return Verdict.SKIP
    return Mode(mode).old_word if state == State.OLD else Mode(mode).new_word


def state_for(verdict: Verdict, mode: str) -> State:
    if verdict == Verdict.SKIP:
        return State.SKIP
    return State.OLD if verdict == Mode(mode).old_word else State.NEW
