"""Is a score OLD-like or NEW-like? A pure function of the score and the calibration.

The calibration is the two endpoints' samples of the primary metric. A commit's median
is placed on the line from the old endpoint's median (0.0) to the new one's (1.0):
below 0.5 it behaves as the old endpoint, above as the new. Near the middle (within
`ambiguous` of 0.5) it is neither, and is skipped rather than guessed.
"""

import statistics
from dataclasses import dataclass

from kbisect.contract import Mode, Verdict
from kbisect.workflows.strategy import State

# Endpoints must differ by this many times their noise, and by this fraction, to bisect.
MIN_SEPARATION = 4.0
MIN_RELATIVE_CHANGE = 0.10
AMBIGUOUS = 0.2  # position 0.3..0.7 on the old->new line is neither


@dataclass(frozen=True)
class Calibration:
    metric: str
    old: list[float]  # samples at the old endpoint (good in regression mode)
    new: list[float]

    @property
    def old_value(self) -> float:
        return statistics.median(self.old)

    @property
    def new_value(self) -> float:
        return statistics.median(self.new)

    def noise(self) -> float:
        spread = [max(s) - min(s) for s in (self.old, self.new) if s]
        return max(spread, default=0.0)

    def differs(self) -> tuple[bool, str]:
        """Whether the endpoints are far enough apart to bisect, and why (not)."""
        a, b = self.old_value, self.new_value
        gap = abs(b - a)
        scale = max(abs(a), abs(b), 1e-9)
        if gap / scale < MIN_RELATIVE_CHANGE:
            return False, (
                f"{self.metric} is {a:g} at the old endpoint and {b:g} at the new one "
                f"({gap / scale:.0%} apart, under {MIN_RELATIVE_CHANGE:.0%}): nothing to bisect"
            )
        if gap < MIN_SEPARATION * self.noise():
            return False, (
                f"{self.metric} differs by {gap:g} between the endpoints but varies by "
                f"{self.noise():g} between repetitions: raise --repetitions or pick a "
                "steadier metric"
            )
        return True, f"{self.metric}: {a:g} (old) vs {b:g} (new)"


@dataclass(frozen=True)
class Classified:
    state: State
    position: float  # 0.0 = the old endpoint's median, 1.0 = the new one's
    margin: float  # 0..1: how far from the undecided middle


def classify(value: float, calibration: Calibration) -> Classified:
    a, b = calibration.old_value, calibration.new_value
    position = (value - a) / (b - a) if b != a else 0.5
    margin = min(abs(position - 0.5) * 2, 1.0)
    if abs(position - 0.5) < AMBIGUOUS:
        return Classified(State.SKIP, position, margin)
    return Classified(State.OLD if position < 0.5 else State.NEW, position, margin)


def verdict_for(state: State, mode: str) -> Verdict:
    """The user's word for a state: in fix mode the old behaviour is the bad one."""
    if state == State.SKIP:
        return Verdict.SKIP
    return Mode(mode).old_word if state == State.OLD else Mode(mode).new_word


def state_for(verdict: Verdict, mode: str) -> State:
    if verdict == Verdict.SKIP:
        return State.SKIP
    return State.OLD if verdict == Mode(mode).old_word else State.NEW
