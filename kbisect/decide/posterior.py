"""One posterior over "which commit is the culprit", plus "no culprit". Pure.

Hypothesis c (a commit of the range) says: a commit behaves like the new endpoint iff c is
among its ancestors (itself included); "none" says every commit behaves like the old one.
Each commit's evidence is one number, the log likelihood ratio new-like : old-like of all
its observations, whatever the likelihood (a metric's values under two levels; pass/fail
boots with a flake rate). Then

    log P(c | data) = log prior(c) + sum of llr(x) over the observed x that descend from c

and "none" gets only its prior. A likelihood that weighs all the observations under each
hypothesis at once (workflows.split_likelihood) gives each hypothesis its own log
likelihood instead (weigh), from the split it makes of the observed commits (splits).
Commits that cannot be the culprit (an ancestor of theirs makes the same kernel) get a
prior of zero; a person's mark rules out the hypotheses it contradicts. The next commit
to test is where P(new-like) crosses one half (the weighted median, as Henderson et al.'s
flake-aware culprit finding tests); K at once are the K quantiles.

Sums over ancestors use the graph's ancestry bitsets: the posterior is held as fixed-point
bit planes, so P(new-like) of a commit is a few popcounts, also for 16,384 commits.
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kbisect.decide.strategy import Graph

NONE = ""  # the "no culprit" hypothesis
PLANES = 40  # fixed-point bits of probability: 1e-12 resolution


@dataclass(frozen=True)
class Top:
    commit: str  # NONE for "no culprit"
    p: float


class Posterior:
    def __init__(self, graph: Graph, none_prior: float, impossible: Iterable[str] = ()) -> None:
        self.graph = graph
        self.none_prior = none_prior
        self._impossible = set(impossible)  # prior zero: cannot be the culprit
        self._forbid_new: set[str] = set()  # marked old: no hypothesis makes it new
        self._forbid_old: set[str] = set()  # marked new
        self._anc_lists: dict[str, list[int]] = {}
        self.p: list[float] = []  # by graph.order index
        self.p_none = none_prior
        self._planes: list[int] = []
        self._p_new: list[float] = []  # by graph.order index, filled on first read
        self.update({})

    # --- evidence ------------------------------------------------------------------------
    def impossible(self, commit: str) -> None:
        """`commit` cannot be the culprit (an ancestor of it makes its kernel)."""
        self._impossible.add(commit)

    def mark(self, commit: str, new: bool) -> None:
        """A verdict from outside, taken as certain."""
        (self._forbid_old if new else self._forbid_new).add(commit)

    def update(self, llr: Mapping[str, float]) -> None:
        """Every commit's log likelihood ratio new:old of all its observations so far."""
        logp = [0.0] * len(self.graph.order)
        for commit, value in llr.items():
            if not value or commit not in self.graph.index:
                continue
            for i in self._ancestors(commit):
                logp[i] += value
        self.weigh(logp)

    def splits(self, commits: Sequence[str]) -> tuple[list[tuple[int, ...]], list[int]]:
        """The distinct ways the hypotheses split `commits` (each split: the positions in
        `commits` of those it makes new-like, its descendants), and each hypothesis's
        split by graph.order index. Hypotheses between the same observed commits split
        them alike: a 1,024-commit range has about as many splits as observed commits."""
        members: list[list[int]] = [[] for _ in self.graph.order]
        for pos, commit in enumerate(commits):
            if commit in self.graph.index:
                for i in self._ancestors(commit):
                    members[i].append(pos)
        distinct: dict[tuple[int, ...], int] = {}
        which = [distinct.setdefault(tuple(m), len(distinct)) for m in members]
        return list(distinct), which

    def weigh(self, loglik: Sequence[float], none_loglik: float = 0.0) -> None:
        """The posterior from each hypothesis's log likelihood of every observation (by
        graph.order index) and that of "no culprit", on one scale; the priors, the
        impossible commits and people's marks applied."""
        self.p, self.p_none = self._normalised(loglik, none_loglik)
        self._planes = []
        self._p_new = []

    def average(self, rivals: Sequence[tuple[float, Sequence[float], float]]) -> None:
        """The posterior weighed last, averaged with the same boots under other models:
        (weight, loglik, none_loglik) each; the first model holds what their weights
        leave (rivals that change different VM hosts' levels are each taken as a change
        from the first, and the whole renormalised)."""
        if not rivals:
            return
        base, base_none = self.p, self.p_none
        p, p_none = list(base), base_none
        for weight, other, other_none in rivals:
            q, q_none = self._normalised(other, other_none)
            p = [a + weight * (b - c) for a, b, c in zip(p, q, base, strict=True)]
            p_none += weight * (q_none - base_none)
        p, p_none = [max(a, 0.0) for a in p], max(p_none, 0.0)
        total = math.fsum(p) + p_none
        self.p, self.p_none = [a / total for a in p], p_none / total
        self._planes = []
        self._p_new = []

    def _normalised(self, loglik: Sequence[float], none_loglik: float) -> tuple[list[float], float]:
        n = len(self.graph.order)
        dead = {self.graph.index[c] for c in self._impossible if c in self.graph.index}
        for commit in self._forbid_new:  # old-like: no ancestor of it is the culprit
            dead.update(self._ancestors(commit))
        allowed_none = not self._forbid_old
        for commit in self._forbid_old:  # new-like: the culprit is one of its ancestors
            keep = set(self._ancestors(commit))
            dead.update(i for i in range(n) if i not in keep)
        prior = (1.0 - self.none_prior) / max(1, n - len(dead))
        log_prior = math.log(prior) if prior > 0 else -math.inf
        terms = [-math.inf if i in dead else log_prior + v for i, v in enumerate(loglik)]
        none = (
            math.log(self.none_prior) + none_loglik
            if allowed_none and self.none_prior > 0
            else -math.inf
        )
        top = max(max(terms, default=-math.inf), none)
        weights = [math.exp(t - top) for t in terms]
        w_none = math.exp(none - top)
        total = sum(weights) + w_none
        return [w / total for w in weights], w_none / total

    def _ancestors(self, commit: str) -> list[int]:
        """The graph indexes of `commit`'s ancestors, itself included (cached)."""
        if commit not in self._anc_lists:
            mask = self.graph.ancestry[commit]
            self._anc_lists[commit] = [i for i in range(mask.bit_length()) if mask >> i & 1]
        return self._anc_lists[commit]

    # --- reading -------------------------------------------------------------------------
    def p_new(self, commit: str) -> float:
        """P(`commit` behaves like the new endpoint): its ancestors' mass."""
        index = self.graph.index.get(commit)
        if index is None:
            return 0.0  # outside the range: an ancestor of the old endpoint
        if not self._p_new:
            self._p_new = self._all_p_new()
        return self._p_new[index]

    def _all_p_new(self) -> list[float]:
        """Every commit's ancestors' mass, oldest first: a commit with one parent adds its
        own mass to its parent's; only a merge (whose sides share ancestors) needs the sum
        over its ancestry bitset, taken on fixed-point bit planes."""
        graph, out = self.graph, [0.0] * len(self.p)
        for commit in reversed(graph.order):
            i = graph.index[commit]
            parents = [graph.index[p] for p in graph.parents.get(commit, ()) if p in graph.index]
            if len(parents) <= 1:
                out[i] = self.p[i] + (out[parents[0]] if parents else 0.0)
                continue
            if not self._planes:
                self._planes = _planes(self.p)
            mask = graph.ancestry[commit]
            fixed = sum((mask & plane).bit_count() << k for k, plane in enumerate(self._planes))
            out[i] = fixed / (1 << PLANES)
        return [min(1.0, q) for q in out]

    def top(self) -> Top:
        best = max(range(len(self.p)), key=lambda i: (self.p[i], -i), default=None)
        if best is None or self.p_none >= self.p[best]:
            return Top(NONE, self.p_none)
        return Top(self.graph.order[best], self.p[best])

    def ranked(self) -> list[tuple[str, float]]:
        """Every hypothesis with its mass, likeliest first (ties: the older commit)."""
        ranked = sorted(
            [(p, -i, c) for i, (c, p) in enumerate(zip(self.graph.order, self.p, strict=True))]
            + [(self.p_none, 1, NONE)],
            reverse=True,
        )
        return [(c, p) for p, _, c in ranked]

    def credible(self, level: float) -> list[str]:
        """The fewest hypotheses that hold `level` of the mass, likeliest first."""
        out, mass = [], 0.0
        for c, p in self.ranked():
            if mass >= level or p == 0:
                break
            out.append(c)
            mass += p
        return out

    def quantiles(
        self,
        k: int,
        allowed: Iterable[str],
        built: Iterable[str] = (),
        worth: Callable[[float], float] = lambda q: q * (1 - q),
        build_cost: float = 1.0,
    ) -> list[str]:
        """Up to k commits whose P(new-like) are nearest 1/(k+1), ..., k/(k+1). A commit
        already built is taken instead while its boot tells at least 1/(1 + build_cost)
        of what a boot of the best one would: `worth(P)` is the likelihood's information
        at that P (by default q(1-q), a weak observation's)."""
        rows = [(self.p_new(c), c) for c in allowed]
        have = set(built)
        chosen: list[str] = []
        for j in range(1, k + 1):
            target = j / (k + 1)
            left = [(abs(q - target), i, c) for i, (q, c) in enumerate(rows) if c not in chosen]
            if not left:
                break
            best = min(left)
            near_built = [row for row in left if row[2] in have]
            if near_built:
                alt = min(near_built)
                if worth(rows[alt[1]][0]) * (1 + build_cost) >= worth(rows[best[1]][0]):
                    best = alt
            chosen.append(best[2])
        return chosen


def _planes(p: list[float]) -> list[int]:
    """The probabilities as PLANES bitsets: plane k holds bit k of each one's fixed point."""
    planes = [0] * PLANES
    scale = 1 << PLANES
    for i, value in enumerate(p):
        fixed = int(value * scale)
        k = 0
        while fixed:
            if fixed & 1:
                planes[k] |= 1 << i
            fixed >>= 1
            k += 1
    return planes
