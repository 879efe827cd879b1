"""Plan a lab history: which commit does what, on which branch, and the truth that follows.

Pure: no git, no files. The materializer (infra.lab) turns a plan into commits.
Positions are 1..N in creation order; position 0 is the old endpoint.
"""

import random
from dataclasses import dataclass, field
from enum import StrEnum

from kbisect.contract import Mode


class Kind(StrEnum):
    FILLER = "filler"
    CULPRIT = "culprit"
    BREAK_BUILD = "break-build"
    FIX_BUILD = "fix-build"
    BREAK_BOOT = "break-boot"
    FIX_BOOT = "fix-boot"
    MERGE = "merge"
    PREREQ = "prerequisite"  # an upstream refactor the fix's context needs (fix mode)


@dataclass(frozen=True)
class Span:
    """A breakage: the commit at `start` breaks, the `length`-th next commit on its branch fixes."""

    start: int
    length: int = 1
    relative: bool = False  # start is an offset from the culprit ("+1", "-2")

    @classmethod
    def parse(cls, text: str) -> "Span":
        """'POS', 'POS:LEN', or '+OFF'/'-OFF' relative to the culprit."""
        head, _, tail = text.partition(":")
        try:
            length = int(tail) if tail else 1
            start = int(head)
        except ValueError as exc:
            raise PlanError(
                f"bad breakage {text!r}: use POS, POS:LEN or +OFF relative to the culprit"
            ) from exc
        if length < 1:
            raise PlanError(f"bad breakage {text!r}: LEN must be 1 or more")
        return cls(start=start, length=length, relative=head[:1] in "+-")


@dataclass
class PlannedCommit:
    pos: int
    kind: Kind
    parents: list[int]  # positions; 0 is the old endpoint
    branch: str
    span: int = -1  # index of the breakage span this commit breaks or fixes
    # state of the tree at this commit
    buggy: bool = False
    build_broken: bool = False
    boot_broken: bool = False


@dataclass
class LabPlan:
    commits: list[PlannedCommit]
    culprit: int
    mode: str
    old_buggy: bool
    notes: list[str] = field(default_factory=list)

    def positions(self, pred: str) -> list[int]:
        return [c.pos for c in self.commits if getattr(c, pred)]


class PlanError(ValueError):
    pass


def _side_branch_slots(n: int, merges: int, rng: random.Random) -> dict[int, tuple[int, int]]:
    """Map position -> (side branch number, fork position) for side-branch commits.

    Each side branch has 2 or 3 commits placed just before its merge commit; it forks
    from a main-line commit a few positions earlier, so main moves on meanwhile.
    """
    slots: dict[int, tuple[int, int]] = {}
    if merges <= 0:
        return slots
    region = max(1, (n - 2) // merges)
    for b in range(merges):
        lo = 1 + b * region
        side_len = rng.choice((2, 3))
        merge_pos = lo + region - 1
        first_side = merge_pos - side_len
        if first_side - 2 < lo:
            raise PlanError(f"--commits {n} is too few for --merges {merges}")
        fork = rng.randint(max(0, lo - 1), first_side - 2)
        for p in range(first_side, merge_pos):
            slots[p] = (b, fork)
        slots[merge_pos] = (b, -1)  # -1 marks the merge commit itself
    return slots


def make_plan(
    n: int,
    mode: str = Mode.REGRESSION.value,
    culprit_at: int | None = None,
    merges: int = 0,
    broken_build: list[Span] | None = None,
    broken_boot: list[Span] | None = None,
    seed: int = 0,
    prereq: bool = False,
) -> LabPlan:
    if mode not in tuple(Mode):
        raise PlanError(f"unknown mode {mode!r}: use regression or fix")
    if n < 2:
        raise PlanError("a lab needs --commits 2 or more")
    rng = random.Random(seed)
    slots = _side_branch_slots(n, merges, rng)
    merge_positions = {p for p, (_, fork) in slots.items() if fork == -1}
    spans = [(Kind.BREAK_BUILD, s) for s in broken_build or []] + [
        (Kind.BREAK_BOOT, s) for s in broken_boot or []
    ]
    culprit_at = _culprit(n, culprit_at, spans, merge_positions, rng)
    spans = [(k, Span(culprit_at + s.start, s.length) if s.relative else s) for k, s in spans]
    parents, branch_of = _topology(n, slots)
    kinds = _kinds(n, culprit_at, spans, branch_of, merge_positions)
    if prereq:  # drawn last: a lab without one keeps its hashes
        kinds[_prereq(culprit_at, kinds, branch_of, rng)] = (Kind.PREREQ, -1)
    commits = _states(n, mode, kinds, parents, branch_of, merge_positions)
    if commits[-1].buggy != (mode == Mode.REGRESSION):
        raise PlanError("the culprit does not reach the last commit: choose another --culprit-at")
    return LabPlan(commits=commits, culprit=culprit_at, mode=mode, old_buggy=mode == Mode.FIX)


def _culprit(
    n: int,
    culprit_at: int | None,
    spans: list[tuple[Kind, Span]],
    merge_positions: set[int],
    rng: random.Random,
) -> int:
    """The culprit's position: given, or random among plain commits no breakage takes."""
    eligible = [p for p in range(1, n + 1) if p not in merge_positions and p != n]
    if culprit_at is None:
        taken = {
            p for _, s in spans if not s.relative for p in range(s.start, s.start + s.length + 1)
        }
        return rng.choice([p for p in eligible if p not in taken] or eligible)
    if culprit_at not in eligible:
        raise PlanError(
            f"--culprit-at {culprit_at} is not a plain commit in 1..{n - 1}"
            + (" (it is a merge)" if culprit_at in merge_positions else "")
        )
    return culprit_at


def _prereq(
    culprit_at: int,
    kinds: dict[int, tuple[Kind, int]],
    branch_of: dict[int, str],
    rng: random.Random,
) -> int:
    """A plain main-line commit before the fix, for the refactor the fix's context needs."""
    free = [p for p in range(1, culprit_at) if p not in kinds and branch_of[p] == "main"]
    if not free:
        raise PlanError(
            f"--fix-needs-prereq needs a plain commit before the fix (at {culprit_at}): "
            "pick a later --culprit-at or another --seed"
        )
    return rng.choice(free)


def _topology(
    n: int, slots: dict[int, tuple[int, int]]
) -> tuple[dict[int, list[int]], dict[int, str]]:
    """Each position's parents and branch: main, or side branches merged back."""
    parents: dict[int, list[int]] = {}
    branch_of: dict[int, str] = {}
    main_tip = 0
    side_tip: dict[int, int] = {}
    for p in range(1, n + 1):
        b, fork = slots.get(p, (-1, 0))
        if b >= 0 and fork != -1:
            parents[p] = [side_tip.get(b, fork)]
            side_tip[b] = p
            branch_of[p] = f"side-{b}"
            continue
        parents[p] = [main_tip, side_tip[b]] if b >= 0 else [main_tip]
        branch_of[p] = "main"
        main_tip = p
    return parents, branch_of


def _kinds(
    n: int,
    culprit_at: int,
    spans: list[tuple[Kind, Span]],
    branch_of: dict[int, str],
    merge_positions: set[int],
) -> dict[int, tuple[Kind, int]]:
    """What each special position does (culprit, breaks, fixes) and its span's index."""
    kinds: dict[int, tuple[Kind, int]] = {culprit_at: (Kind.CULPRIT, -1)}
    for idx, (kind, span) in enumerate(spans):
        fix_kind = Kind.FIX_BUILD if kind is Kind.BREAK_BUILD else Kind.FIX_BOOT
        fix = _nth_on_branch(span.start, span.length, branch_of, merge_positions, n)
        for pos, k in ((span.start, kind), (fix, fix_kind)):
            if pos is None or pos < 1 or pos > n or pos in merge_positions:
                raise PlanError(
                    f"breakage at {span.start} (length {span.length}) does not fit in 1..{n}"
                )
            if pos in kinds:
                raise PlanError(
                    f"position {pos} is asked to be both {kinds[pos][0].value} and {k.value}"
                )
            kinds[pos] = (k, idx)
    return kinds


def _states(
    n: int,
    mode: str,
    kinds: dict[int, tuple[Kind, int]],
    parents: dict[int, list[int]],
    branch_of: dict[int, str],
    merge_positions: set[int],
) -> list[PlannedCommit]:
    """Each commit with the state of its tree: inherited from its parents, changed by it."""
    commits: list[PlannedCommit] = []
    state: dict[int, PlannedCommit] = {
        0: PlannedCommit(0, Kind.FILLER, [], "main", buggy=(mode == Mode.FIX))
    }
    for p in range(1, n + 1):
        kind, span_idx = kinds.get(p, (Kind.MERGE if p in merge_positions else Kind.FILLER, -1))
        ps = [state[q] for q in parents[p]]
        c = PlannedCommit(
            p,
            kind,
            parents[p],
            branch_of[p],
            span=span_idx,
            buggy=any(x.buggy for x in ps) if mode == Mode.REGRESSION else all(x.buggy for x in ps),
            build_broken=any(x.build_broken for x in ps),
            boot_broken=any(x.boot_broken for x in ps),
        )
        if kind is Kind.CULPRIT:
            c.buggy = mode == Mode.REGRESSION
        elif kind in (Kind.BREAK_BUILD, Kind.FIX_BUILD):
            c.build_broken = kind is Kind.BREAK_BUILD
        elif kind in (Kind.BREAK_BOOT, Kind.FIX_BOOT):
            c.boot_broken = kind is Kind.BREAK_BOOT
        state[p] = c
        commits.append(c)
    return commits


def _nth_on_branch(
    start: int, length: int, branch_of: dict[int, str], merges: set[int], n: int
) -> int | None:
    if start not in branch_of:
        return None
    branch = branch_of[start]
    seen = 0
    for p in range(start + 1, n + 1):
        if branch_of[p] == branch and p not in merges:
            seen += 1
            if seen == length:
                return p
    return None
