"""The engine's terms: a job's settings, a commit's verdict, the job's answer. Plain data:
they cross the data converter into the job's history."""

import math
from dataclasses import dataclass, field
from enum import StrEnum

from kbisect.contract import (
    DEFAULT_MAX_BOOTS,
    DEFAULT_MIN_EFFECT,
    DEFAULT_MIN_RATE_STEP,
    MAX_COMMIT_BOOTS,
    Mode,
)
from kbisect.decide.endpoints import Effect
from kbisect.decide.strategy import State


class Answer(StrEnum):
    FOUND = "found"
    NO_DIFFERENCE = "no-difference"
    UNDECIDED = "undecided"  # the endpoints' cap was reached without an answer
    AMBIGUOUS = "ambiguous"  # skipped commits leave more than one candidate


@dataclass(frozen=True)
class EngineConfig:
    mode: str = Mode.REGRESSION.value  # "fix": the new endpoint is the better one
    better: str = "higher"
    parallel: int = 1
    min_effect: float = DEFAULT_MIN_EFFECT  # smaller changes are "no difference"
    min_rate_step: float = DEFAULT_MIN_RATE_STEP  # a flaky pass/fail job's least change
    max_endpoint_boots: int = DEFAULT_MAX_BOOTS  # per endpoint
    max_commit_boots: int = MAX_COMMIT_BOOTS
    error: float = 0.01  # the chance of a wrong verdict anywhere in the job


@dataclass(frozen=True)
class Decision:
    state: State
    boots: int
    llr: float  # log likelihood ratio new-like : old-like over its boots
    note: str = ""
    firm: bool = False  # the test crossed its threshold
    twin: str = ""  # the commit whose kernel this one makes: its verdict, no boot
    # a twin's: the booted (or marked) commit whose verdict it took; "" when its kernel was
    # never booted and the verdict follows from where that kernel's commit lies
    verdict_of: str = ""

    @property
    def confidence(self) -> float:
        """P(the verdict is right) with even odds before the boots."""
        return 1.0 / (1.0 + math.exp(-abs(self.llr))) if self.state != State.SKIP else 0.0


@dataclass
class EngineResult:
    answer: Answer
    culprit: str | None
    candidates: list[str]
    confidence: float  # P(the culprit is the one)
    builds: int  # distinct commits booted (or failed), the endpoints included
    boots: int
    message: str
    effect: str = ""  # the endpoints' difference with its interval
    notes: list[str] = field(default_factory=list)
    change: Effect | None = None  # ... in numbers

    @property
    def status(self) -> str:
        return str(self.answer)
