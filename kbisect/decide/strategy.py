"""Which commit to test next, and when the search is over. Pure: plain data in and out.

The search is stated in neutral terms, as `git bisect --term-old/--term-new` does: every
commit is OLD-like (behaves as the old endpoint) or NEW-like, and we look for the first
NEW-like commit. In regression mode OLD is "good" and NEW is "bad"; in fix mode OLD is
"bad" (still broken) and NEW is "good" (fixed).

The history is a DAG: candidates are the ancestors of the new endpoint that are not
ancestors of any OLD-like commit; the next commit is the one whose ancestors among the
candidates come closest to half of them, as `git rev-list --bisect` picks.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property


class State(StrEnum):
    OLD = "old"
    NEW = "new"
    SKIP = "skip"


@dataclass(frozen=True)
class Graph:
    """Commits between the endpoints: hash -> parents (only parents inside the range)."""

    parents: dict[str, tuple[str, ...]]
    order: tuple[str, ...]  # topological, newest first (as git rev-list prints)

    @cached_property
    def ancestry(self) -> dict[str, int]:
        """commit -> bitset (bit i: order[i]) of itself and its ancestors in the graph.

        One pass oldest-first; a kernel release's ~15k commits take well under a second.
        """
        bit = {c: 1 << i for i, c in enumerate(self.order)}
        anc: dict[str, int] = {}
        for c in reversed(self.order):
            mask = bit[c]
            for p in self.parents.get(c, ()):
                mask |= anc.get(p, 0)
            anc[c] = mask
        return anc

    @cached_property
    def index(self) -> dict[str, int]:
        """commit -> its bit in the ancestry bitsets."""
        return {c: i for i, c in enumerate(self.order)}

    def members(self, mask: int) -> list[str]:
        """The commits of a bitset, newest first."""
        return [c for i, c in enumerate(self.order) if mask >> i & 1]


@dataclass
class Search:
    graph: Graph
    new: str  # the newest commit known NEW-like
    old: set[str] = field(default_factory=set)  # commits known OLD-like
    skipped: set[str] = field(default_factory=set)
    marks: dict[str, State] = field(default_factory=dict)  # every verdict, by commit
    # commit -> a commit that makes the same kernel (an inert commit's first parent, a
    # byte-identical image): never tested itself, it takes that commit's verdict.
    same_as: dict[str, str] = field(default_factory=dict)

    def twin(self, commit: str, of: str) -> None:
        """`commit` makes the same kernel as `of` (which may lie outside the range)."""
        if commit != of and commit not in self.marks:
            self.same_as[commit] = of
            self.settle()

    def kernel_of(self, commit: str) -> str:
        """The commit that makes `commit`'s kernel: its chain of twins followed to the end."""
        seen = {commit}
        while commit in self.same_as and self.same_as[commit] not in seen:
            commit = self.same_as[commit]
            seen.add(commit)
        return commit

    def remade(self, commit: str) -> list[str]:
        """After twin(commit, of): the commits of their kernel that cannot be the culprit,
        each having another of them among its ancestors (that one made the kernel
        first); all of them when the kernel is made below the range. A byte-identical
        image first built at a later commit so leaves the earliest of them in."""
        anc, index = self.graph.ancestry, self.graph.index
        of = self.same_as.get(commit)
        if of is None or commit not in anc:
            return []
        if of not in anc or anc[commit] >> index[of] & 1:
            return [commit]  # the usual case: the kernel was made at or below its ancestor
        roots: dict[str, str] = {}

        def root(c: str) -> str:
            path = []
            while c in self.same_as and c not in roots:
                path.append(c)
                c = self.same_as[c]
            top = roots.get(c, c)
            roots.update(dict.fromkeys(path, top))
            return top

        kernel = root(commit)
        makers = [c for c in (kernel, *self.same_as) if c in anc and root(c) == kernel]
        if kernel not in anc:
            return makers
        mask = 0
        for c in makers:
            mask |= 1 << index[c]
        return [c for c in makers if anc[c] & mask & ~(1 << index[c])]

    def settle(self) -> None:
        """Give every twin whose kernel's verdict is known that verdict."""
        changed = True
        while changed:
            changed = False
            excluded = _excluded(self)
            for commit, of in self.same_as.items():
                state = None if commit in self.marks else self._known(of, excluded)
                if state is not None:
                    self._mark(commit, state)
                    changed = True

    def _known(self, commit: str, excluded: int) -> State | None:
        """A commit's verdict if it is given or follows from the others'."""
        anc, index = self.graph.ancestry, self.graph.index
        if commit in self.marks:
            return self.marks[commit]
        if commit not in anc or excluded >> index[commit] & 1:
            return State.OLD  # outside the range (an old commit's ancestor) or below one
        if anc[commit] >> index[self.new] & 1:
            return State.NEW  # at or above a NEW-like commit
        return None

    def mark(self, commit: str, state: State) -> None:
        self._mark(commit, state)
        if self.same_as:
            self.settle()

    def _mark(self, commit: str, state: State) -> None:
        self.marks[commit] = state
        if state == State.OLD:
            self.old.add(commit)
        elif state == State.NEW:
            # A NEW-like ancestor of the current new end narrows the range to its ancestors.
            anc = self.graph.ancestry
            if commit in anc and anc[self.new] >> self.graph.order.index(commit) & 1:
                self.new = commit
        else:
            self.skipped.add(commit)


def _excluded(search: Search) -> int:
    """The OLD-like commits' ancestors (themselves included), as a bitset."""
    anc = search.graph.ancestry
    excluded = 0
    for o in search.old:
        excluded |= anc.get(o, 0)
    return excluded


def _twin_mask(search: Search) -> int:
    index = search.graph.index
    mask = 0
    for c in search.same_as:
        if c in index:
            mask |= 1 << index[c]
    return mask


def _live(search: Search) -> int:
    return search.graph.ancestry[search.new] & ~_excluded(search)


def candidates(search: Search) -> list[str]:
    """Commits that may still be the first NEW-like one, newest first."""
    return search.graph.members(_live(search))


def _weights(search: Search) -> tuple[int, list[tuple[int, int, str]]]:
    """The live candidates' count, and (weight, index, commit) of each testable commit:
    weight is how many candidates it has among its ancestors (itself included)."""
    # Twins are never tested (their kernel's verdict is theirs): the halving counts the
    # others only.
    live = _live(search) & ~_twin_mask(search)
    anc = search.graph.ancestry
    rows = [
        ((anc[c] & live).bit_count(), i, c)
        for i, c in enumerate(search.graph.order)
        if live >> i & 1 and c != search.new and c not in search.skipped and c not in search.same_as
    ]
    return live.bit_count(), rows


def next_commits(search: Search, slots: int = 1) -> list[str]:
    """Up to `slots` commits to test next, best halving first; [] when the search is over."""
    total, rows = _weights(search)
    # git's measure: how close this commit's side comes to half of the candidates; ties
    # go to the newest in topological order, so the choice is deterministic.
    scored = sorted((-min(w, total - w), i, c) for w, i, c in rows)
    return [c for _, _, c in scored[:slots]]


def spread_commits(search: Search, slots: int) -> list[str]:
    """`slots` commits to test at once that cut the candidates into slots+1 near-equal
    parts (the commit nearest to each j/(slots+1) of the way), so that one round of
    parallel builds narrows the range by a factor of about slots+1; [] when over."""
    if slots <= 1:
        return next_commits(search)
    total, rows = _weights(search)
    chosen: list[str] = []
    for j in range(1, slots + 1):
        target = total * j / (slots + 1)
        left = [(abs(w - target), i, c) for w, i, c in rows if c not in chosen]
        if left:
            chosen.append(min(left)[2])
    return chosen


@dataclass(frozen=True)
class Outcome:
    culprit: str | None  # the first NEW-like commit, when it is certain
    candidates: list[str]  # when skips leave it ambiguous: the smallest set that holds it


def outcome(search: Search) -> Outcome | None:
    """The answer once nothing is left to test, else None."""
    if next_commits(search):
        return None
    cands = candidates(search)
    if cands == [search.new]:
        return Outcome(culprit=search.new, candidates=[search.new])
    return Outcome(culprit=None, candidates=cands)


def steps_left(search: Search) -> int:
    """Rough number of tests to go: log2 of the candidates still in play."""
    n = len(set(candidates(search)) - search.skipped)
    steps = 0
    while n > 1:
        n = (n + 1) // 2
        steps += 1
    return steps
