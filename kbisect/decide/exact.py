"""A counter's path: a metric whose repetitions and boots all agree (or a deterministic
pass/fail verdict) is weighed on one boot a commit, and the search is git's halving
(kbisect.decide.strategy): with --parallel K, the K quantiles of what is left. Pure.

The endpoints' one boot each goes to the gate (kbisect.decide.endpoints): different,
the same, or the wrong way. A commit between the endpoints (neither's value) gets a
second boot, then is skipped.
"""

from dataclasses import replace
from typing import TYPE_CHECKING

from kbisect.decide import strategy
from kbisect.decide.endpoints import Gate
from kbisect.decide.evidence import log_scale
from kbisect.decide.strategy import State
from kbisect.decide.terms import Answer, EngineResult

if TYPE_CHECKING:
    from kbisect.decide.engine import Engine


class Exact:
    """One boot a commit, git's halving."""

    def __init__(self, engine: "Engine") -> None:
        self.e = engine
        self.active: list[str] = []  # commits being probed
        self.dirty = True  # a verdict since the probes were chosen

    def changed(self, commit: str) -> None:
        """A verdict came in (or the search was rebuilt): choose the probes again."""
        self.dirty = True
        if commit in self.active:
            self.active.remove(commit)

    def wants(self) -> list[str]:
        """The commits to boot once each now; [] when the job is decided."""
        e = self.e
        if e.gate is None:
            e.log = log_scale(e.boots[e.old_end] + e.boots[e.new_end])
            e.gate = e.gate_boots(e.boots[e.old_end], e.boots[e.new_end])
        if e.gate.gate != Gate.DIFFERENT:
            return []
        for commit in list(self.active):
            d = e.judge(e.scores(commit))
            if d is not None:
                e.decide(commit, d)
        if self.dirty:  # a verdict since the probes were chosen: choose again
            self.dirty = False
            live = set(strategy.candidates(e.search))
            twins = e.search.same_as
            self.active = [c for c in self.active if c in live and c not in twins]
            free = e.config.parallel - len(self.active)
            if free > 0:
                picks = strategy.spread_commits(e.search, e.config.parallel)
                self.active += [c for c in picks if c not in self.active][:free]
        return list(self.active)

    def result(self) -> EngineResult:
        e = self.e
        assert e.gate is not None, "result() before the endpoints were decided"
        if e.gate.gate != Gate.DIFFERENT:
            return e.gate_result()
        base = e.no_culprit(e.gate.message, e.gate.effect)
        out = strategy.outcome(e.search)
        assert out is not None, "result() before the bisection ended"
        if not out.culprit:
            message = f"skipped commits leave {len(out.candidates)} candidates"
            return replace(
                base, answer=Answer.AMBIGUOUS, candidates=out.candidates, message=message
            )
        return replace(
            base,
            answer=Answer.FOUND,
            culprit=out.culprit,
            candidates=out.candidates,
            confidence=self._confidence(out.culprit),
            message="",
        )

    def _confidence(self, culprit: str) -> float:
        """P(the culprit's verdict and its parents' are right): they alone make it one."""
        e, p = self.e, 1.0
        for commit in self._evidence(culprit):
            d = e.decisions.get(commit)
            if d is not None and d.state != State.SKIP and d.firm:
                p *= e.certainty(commit)
        return p

    def _evidence(self, culprit: str) -> list[str]:
        """The commits whose boots make `culprit` one: it and its parents, each followed
        to the commit whose kernel it makes (a twin has no boots of its own)."""
        search, out = self.e.search, []
        for commit in (culprit, *search.graph.parents.get(culprit, ())):
            while commit in search.same_as:
                commit = search.same_as[commit]
            if commit not in out:
                out.append(commit)
        return out
