"""What a decision gives the workflow: the answer to its question, and the engine's state
as the job shows it (verdicts, the gate, the search's size). Plain data: it is written
into the job's history."""

from dataclasses import dataclass, field

from kbisect.decide.endpoints import EndpointVerdict
from kbisect.decide.terms import Decision, EngineResult


@dataclass(frozen=True)
class Judged:
    """A commit's verdict with what the report shows of it."""

    decision: Decision
    certainty: float  # P(the verdict is right) on all its boots, by today's model
    position: float | None = None  # its boots' mean between the endpoints (0 old, 1 new)


@dataclass(frozen=True)
class Verifying:
    """A verification kernel's boots as the engine's test reads them."""

    scores: list[float]  # each boot's score, less what the swing beside it gave
    position: float  # their mean between the endpoints
    decision: Decision | None  # None: another boot


@dataclass
class Plan:
    commits: list[str] = field(default_factory=list)  # WANTS, AHEAD; NEXT_FOR: 0 or 1
    pairs: list[list[str]] = field(default_factory=list)  # PAIRS
    verifying: Verifying | None = None  # JUDGE
    result: EngineResult | None = None  # WANTS when it wants nothing more: the answer
    gate: EndpointVerdict | None = None
    decisions: dict[str, Judged] = field(default_factory=dict)
    same_as: dict[str, str] = field(default_factory=dict)  # commit -> whose kernel it makes
    candidates: int = 0  # commits that may still be the first new-like one
    steps_left: int = 0
    noisy: bool = False  # both endpoints booted, and the metric is not a counter
    counter: bool = False  # both endpoints booted, and the metric is a counter
    pairs_verification: bool = False  # each verification boot wants one of its base beside
    rates: str = ""  # a flaky job: the endpoints' failures in words
    old_passes: bool = True  # pass/fail: no boot of the old endpoint failed
    # by commit, the places (0 its first boot) of its boots set aside as wild
    set_aside: dict[str, list[int]] = field(default_factory=dict)
    unfit: str = ""  # why the host is unfit for timing (boots keep reading wild), if it is
    # a timing's posterior now: its likeliest answers (commit, or "" for no culprit) and
    # their probability, likeliest first (empty on a counter's or pass/fail's exact path)
    likeliest: dict[str, float] = field(default_factory=dict)
    new_passes: bool = True
