"""The engine before the posterior (its "v2"), kept as a baseline for the simulators
(benchmarks.sim_policies: v2): a sequential probability ratio test per commit, with
controls. Not the product's: kbisect.decide.engine is. Pure.

    engine = Engine(graph, new, old, SequentialConfig(...))
    while commits := engine.wants():
        for c in commits:
            engine.observe(c, Boot(samples) or None)
    engine.result()

1. Endpoints: both are booted until the gate (kbisect.decide.endpoints) says different,
   same, or cannot decide at the cap. A noise-free metric decides on one boot each.
2. Bisection: each probed commit gets boots until Wald's test between "behaves like old"
   and "behaves like new" passes its threshold; the threshold spends the job's error
   budget over the ~log2(n) verdicts. A commit that stays in between up to its cap is
   skipped. With K probes, the K quantiles of what is left.
3. Long noisy jobs boot both endpoints again every few boots. With `check_host`, those
   boots are a control: an endpoint boot far outside its own spread means the host was
   disturbed since the last clean control, and that window's probe boots are dropped.
   With `follow_shifts`, two dirty controls in a row that lean the same way are a lasting
   change of the host's level. With `regate`, every clean control puts the endpoints'
   boots to the gate again.
"""

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kbisect.contract import Mode
from kbisect.decide import strategy
from kbisect.decide.endpoints import (
    Effect,
    EndpointVerdict,
    Gate,
    compare_scores,
    noise_free,
)
from kbisect.decide.evidence import Boot, Model, log_scale, relative, score
from kbisect.decide.stats import robust_mean
from kbisect.decide.strategy import Graph, Search, State
from kbisect.decide.terms import Answer, Decision, EngineConfig, EngineResult

MIN_NOISY_ENDPOINT_BOOTS = 6  # fewer say little about a noisy metric's spread
DISTURBED_Z = 2.5  # the controls' joint deviation, in sigmas, that says "disturbed"
CLEAN_AGAIN_Z = 1.5  # and within which a control says the disturbance is over
MAX_DISTURBED_IN_A_ROW = 8  # then the load is the host's new normal: stop discarding
RECHECK_BOOTS = 150  # a boundary verdict's boots, at most
STEP_PRECISION = 0.25  # the endpoints' step must be known to this fraction to bisect


@dataclass(frozen=True)
class SequentialConfig(EngineConfig):
    remeasure_every: int = 10  # probe boots between re-measurements of the endpoints
    check_host: bool = False  # re-measurements are controls (see 3. above)
    follow_shifts: bool = False  # and two dirty ones leaning the same way are a new level
    regate: bool = False  # and each clean one asks the gate again: do they still differ?

    @classmethod
    def checked(cls, **kw: object) -> "SequentialConfig":
        """With controls every 6 probe boots. Simulated (tests/benchmarks/
        test_sequential_engine.py): with boots 14-29 of 64-commit jobs 25% low, 1 wrong
        culprit in 60 (about 30 without controls); on a clean host about 15% more boots."""
        return cls(check_host=True, remeasure_every=6, **kw)  # type: ignore[arg-type]


class Engine:
    def __init__(
        self, graph: Graph, new: str, old: Sequence[str], config: SequentialConfig
    ) -> None:
        self.config = config
        self.search = Search(graph=graph, new=new, old=set(old))
        self.old_end, self.new_end = old[0], new
        self.boots: dict[str, list[Boot]] = {}
        self.failed: set[str] = set()
        self.decisions: dict[str, Decision] = {}
        self.gate: EndpointVerdict | None = None
        self.active: list[str] = []
        self.log = True
        self._endpoint_target = 1
        self._since_remeasure = 0
        self._remeasures = 0
        self._clock = 0  # boots so far, each boot's time
        self.times: dict[str, list[int]] = {}
        self._clean_until = 0  # the clock at the last clean control
        self._control: tuple[int, int] | None = None  # endpoint boots before a control
        self._disturbed: list[tuple[int, int, int]] = []  # (from, to, boots dropped)
        self._disturbed_in_a_row = 0
        self._lean = 0.0  # the last dirty control's signed deviation
        self._levels: list[tuple[int, float]] = []  # (first boot, offset): a shifted host
        self._marked: set[str] = set()
        self._dirty = True  # a verdict since the probes were chosen
        decisions = max(1, math.ceil(math.log2(len(graph.order) + 1)))
        self.threshold = math.log(decisions / config.error)
        self.strong = self.threshold + math.log(10)  # for the verdicts that name the culprit
        self._olds = tuple(old)
        self._twin_notes: dict[str, str] = {}

    # --- driving ----------------------------------------------------------------------
    def wants(self) -> list[str]:
        """The commits to boot once each now; [] when the job is decided."""
        if self.gate is None or self.gate.gate == Gate.MORE:
            return self._endpoint_wants()
        if self.gate.gate != Gate.DIFFERENT:
            return []
        if self._noisy and self._since_remeasure >= self.config.remeasure_every:
            return self._remeasure()
        self._decide_active()
        if self._dirty:  # a verdict since the probes were chosen: choose again
            self._dirty = False
            live = set(strategy.candidates(self.search))
            twins = self.search.same_as
            self.active = [c for c in self.active if c in live and c not in twins]
            free = self.config.parallel - len(self.active)
            if free > 0:
                picks = strategy.spread_commits(self.search, self.config.parallel)
                self.active += [c for c in picks if c not in self.active][:free]
        picks = list(self.active) or self._recheck()
        if not picks and self._checking and self._since_remeasure > 0:
            return self._remeasure()  # the last probe boots get a control before an answer
        if not picks and self.config.regate and self._noisy:
            return self._confirm_endpoints()
        return picks

    @property
    def _checking(self) -> bool:
        return (
            self.config.check_host
            and self._noisy
            and self._disturbed_in_a_row < MAX_DISTURBED_IN_A_ROW
        )

    def _remeasure(self) -> list[str]:
        self._since_remeasure = 0
        self._remeasures += 1
        if self._checking:
            ends = (self.old_end, self.new_end)
            self._control = (len(self.boots[ends[0]]), len(self.boots[ends[1]]))
        return [self.old_end, self.new_end]

    def observe(self, commit: str, boot: Boot | None) -> None:
        """One boot of `commit`, or None when it did not build or boot."""
        if boot is None:
            if commit in (self.old_end, self.new_end):
                raise ValueError(f"endpoint {commit[:12]} must build and boot")
            self.failed.add(commit)
            self._decide(commit, Decision(State.SKIP, 0, 0.0, "does not build or boot"))
            return
        if not boot.samples:
            raise ValueError(f"a boot of {commit[:12]} with no samples")
        self.boots.setdefault(commit, []).append(boot)
        if not boot.beside or not self._clock:
            self._clock += 1
        self.times.setdefault(commit, []).append(self._clock)
        if commit not in (self.old_end, self.new_end):
            self._since_remeasure += 1
        elif self._control is not None:
            n_old, n_new = self._control
            if len(self.boots[self.old_end]) > n_old and len(self.boots[self.new_end]) > n_new:
                self._control = None
                self._check_control(n_old, n_new)

    def _check_control(self, n_old: int, n_new: int) -> None:
        """Both endpoints' control boots are in: clean, a new level of the host, or drop
        the window since the last clean control (probe boots, the verdicts they made, the
        control itself)."""
        # A load on the host moves both endpoints the same way: their deviations (in
        # sigmas, from each one's earlier boots) are summed, so one wild boot counts less.
        m = self.model()
        devs = []
        for commit, n in ((self.old_end, n_old), (self.new_end, n_new)):
            s = self.scores(commit)
            spread = m.sigma * math.sqrt(1 + 1 / n)  # and the earlier boots' mean's error
            devs += [(x - robust_mean(s[:n])) / spread for x in s[n:]]
        z = sum(devs) / math.sqrt(len(devs))
        # Hysteresis: after a disturbed control, the next must look plainly clean.
        limit = CLEAN_AGAIN_Z if self._disturbed_in_a_row else DISTURBED_Z
        if abs(z) <= limit:
            self._clean_until, self._disturbed_in_a_row = self._clock, 0
            if self._levels:
                self._refit_level()
            if self.config.regate:
                self._regate()
            return
        if self.config.follow_shifts and self._disturbed_in_a_row and z * self._lean > 0:
            self._new_level()
            return
        self._lean = z
        start, dropped = self._clean_until, 0
        for commit in list(self.boots):
            keep = [i for i, t in enumerate(self.times[commit]) if t <= start]
            if commit in (self.old_end, self.new_end):
                keep = list(range(n_old if commit == self.old_end else n_new))
            dropped += len(self.boots[commit]) - len(keep)
            if len(keep) < len(self.boots[commit]):
                self.boots[commit] = [self.boots[commit][i] for i in keep]
                self.times[commit] = [self.times[commit][i] for i in keep]
                self._undecide(commit)
        self._disturbed.append((start + 1, self._clock, dropped))
        self._disturbed_in_a_row += 1
        self._clean_until = self._clock
        self._rebuild_search()
        self._since_remeasure = self.config.remeasure_every  # a control again, at once

    def _gate_boots(
        self, old: Sequence[Boot], new: Sequence[Boot], *, max_boots: int
    ) -> EndpointVerdict:
        """The gate on the endpoints' boots as read."""
        return self._gate_scores(
            [score(b, self.log) for b in old],
            [score(b, self.log) for b in new],
            exact=noise_free(old) and noise_free(new),
            max_boots=max_boots,
        )

    def _gate_scores(
        self, old: Sequence[float], new: Sequence[float], *, exact: bool, max_boots: int
    ) -> EndpointVerdict:
        """The gate (endpoints.compare_scores) under this job's direction and minimum."""
        cfg = self.config
        return compare_scores(
            old,
            new,
            exact=exact,
            log=self.log,
            worse_is_lower=cfg.better == "higher",
            regression=cfg.mode == Mode.REGRESSION,
            min_effect=cfg.min_effect,
            max_boots=max_boots,
        )

    def _regate(self) -> EndpointVerdict:
        """The gate again on all the endpoints' boots; a firm "same" ends the job."""
        ends = (self.boots[self.old_end], self.boots[self.new_end])
        again = self._gate_boots(*ends, max_boots=len(ends[0]) + len(ends[1]))
        if again.gate == Gate.SAME:
            message = f"endpoints re-measured during the job: {again.message}"
            self.gate = EndpointVerdict(Gate.SAME, again.effect, message)
        return again

    def _confirm_endpoints(self) -> list[str]:
        """Before an answer, all the endpoints' boots must still say they differ (an
        unlucky first few can make a difference of nothing, and the search then ends at
        an endpoint): else they are booted again until they do, are the same, or the cap."""
        again = self._regate()
        if again.gate in (Gate.DIFFERENT, Gate.SAME):
            return []
        if len(self.boots[self.old_end]) >= 2 * self.config.max_endpoint_boots:
            message = f"the endpoints no longer differ after re-measuring: {again.message}"
            self.gate = EndpointVerdict(Gate.UNDECIDED, again.effect, message)
            return []
        return self._remeasure()

    def _undecide(self, commit: str) -> None:
        if commit in self.decisions and commit not in self._marked:
            del self.decisions[commit]  # its boots changed: it is judged again

    def _new_level(self) -> None:
        """Two dirty controls in a row lean the same way: the host changed for good. The
        boots since the last one (this control's included) are kept, on the new level."""
        first = self._clean_until + 1
        self._levels.append((first, self._offset(first)))
        self._refit_level()
        for commit, times in self.times.items():
            if times and times[-1] >= first:
                self._undecide(commit)
        self._clean_until, self._disturbed_in_a_row, self._lean = self._clock, 0, 0.0
        self._rebuild_search()
        self._since_remeasure = self.config.remeasure_every  # confirm the level at once

    def _refit_level(self) -> None:
        """The latest level's offset: the endpoints' boots on it against their boots
        before it, weighed by how many are on it."""
        first, _ = self._levels[-1]
        gaps: list[tuple[float, int]] = []
        for commit in (self.old_end, self.new_end):
            pairs = list(zip(self.boots[commit], self.times[commit], strict=True))
            before = [score(b, self.log) - self._offset(t) for b, t in pairs if t < first]
            on = [score(b, self.log) for b, t in pairs if t >= first]
            if before and on:
                gaps.append((statistics.fmean(on) - robust_mean(before), len(on)))
        if gaps:
            offset = sum(g * n for g, n in gaps) / sum(n for _, n in gaps)
            self._levels[-1] = (first, offset)

    def mark(self, commit: str, state: State, note: str = "marked by a person") -> None:
        """A verdict from outside (a person): final, whatever the boots say."""
        self._marked.add(commit)
        self._decide(commit, Decision(state, len(self.boots.get(commit, [])), 0.0, note))

    def same_kernel(self, commit: str, of: str, why: str) -> None:
        """`commit` makes the same kernel as `of` (it touches nothing the config compiles,
        or its image is byte-identical): it takes that kernel's verdict, with no boot."""
        if commit in (self.old_end, self.new_end) or commit in self.decisions:
            return
        self._twin_notes[commit] = why
        self.search.twin(commit, of)
        self._dirty = True
        self._sync_twins()

    def identical_endpoints(self) -> None:
        """The endpoints' images are byte-identical: nothing between them can differ."""
        none = Effect(0.0, 0.0, 0.0, 1.0, 0, 0)
        message = "their kernels are byte-identical, so nothing between them can differ"
        self.gate = EndpointVerdict(Gate.SAME, none, message)

    # --- reading ----------------------------------------------------------------------
    @property
    def bisecting(self) -> bool:
        """The endpoints differ: past the gate."""
        return self.gate is not None and self.gate.gate == Gate.DIFFERENT

    def model(self) -> Model:
        """The endpoints' boots, joined by those of commits the test decided firmly (not
        at the cap, not by a person): every verdict sharpens the next."""
        old, new = [self.scores(self.old_end)], [self.scores(self.new_end)]
        for commit, d in self.decisions.items():
            if d.firm and self._noisy:  # a counter's endpoints are exact already
                (new if d.state == State.NEW else old).append(self.scores(commit))
        return Model.fit(old, new)

    def boot_score(self, samples: list[float]) -> float:
        """One boot's score on the job's scale, as the engine scores its own boots."""
        return score(Boot(samples), self.log)

    def scores(self, commit: str) -> list[float]:
        """Each boot's score, taken back to the job's first level when the host shifted."""
        boots, times = self.boots.get(commit, []), self.times.get(commit, [])
        return [score(b, self.log) - self._offset(t) for b, t in zip(boots, times, strict=True)]

    def pairs_verification(self) -> bool:
        """Whether each verification boot wants a boot of the kernel it was made from
        beside it (see paired)."""
        return False

    def paired(self, score: float, beside: float, new_side: bool) -> float:
        """A verification boot's score, given the score of the boot beside it of the
        kernel it was made from (an endpoint: the new one when `new_side`)."""
        return score

    def level_adjusted(self, scores: Sequence[float]) -> list[float]:
        """Scores of boots run now (after the job: a verification) on the job's scale."""
        return [s - self._offset(self._clock + 1) for s in scores]

    def _offset(self, clock: int) -> float:
        offset = 0.0
        for first, value in self._levels:
            if clock >= first:
                offset = value
        return offset

    def llr(self, commit: str) -> float:
        m = self.model()
        return sum(m.llr(s) for s in self.scores(commit))

    def result(self) -> EngineResult:
        assert self.gate is not None, "result() before the endpoints were decided"
        base = self._no_culprit(self.gate.message, self.gate.effect)
        if self.gate.gate != Gate.DIFFERENT:
            undecided = self.gate.gate == Gate.UNDECIDED
            return replace(base, answer=Answer.UNDECIDED) if undecided else base
        out = strategy.outcome(self.search)
        assert out is not None, "result() before the bisection ended"
        if not out.culprit:
            message = f"skipped commits leave {len(out.candidates)} candidates"
            return replace(
                base, answer=Answer.AMBIGUOUS, candidates=out.candidates, message=message
            )
        confidence = self._confidence(out.culprit)
        return replace(
            base,
            answer=Answer.FOUND,
            culprit=out.culprit,
            candidates=out.candidates,
            confidence=confidence,
            message="",
        )

    def _no_culprit(self, message: str, effect: Effect) -> EngineResult:
        """The job's figures with no culprit named (yet): what every answer starts from."""
        return EngineResult(
            answer=Answer.NO_DIFFERENCE,
            culprit=None,
            candidates=[],
            confidence=0.0,
            builds=len(set(self.boots) | self.failed),
            boots=self._clock,  # every boot run, those a dirty control set aside too
            message=message,
            effect=effect.describe(),
            notes=self._notes(),
        )

    # --- inside -----------------------------------------------------------------------
    @property
    def _noisy(self) -> bool:
        ends = (self.boots.get(self.old_end, []), self.boots.get(self.new_end, []))
        return not all(noise_free(b) for b in ends)

    def _endpoint_wants(self) -> list[str]:
        ends = (self.old_end, self.new_end)
        short = [c for c in ends if len(self.boots.get(c, [])) < self._endpoint_target]
        if short:
            return short
        self.log = log_scale(self.boots[self.old_end] + self.boots[self.new_end])
        cfg = self.config
        self.gate = self._gate_boots(
            self.boots[self.old_end], self.boots[self.new_end], max_boots=cfg.max_endpoint_boots
        )
        if self.gate.gate == Gate.MORE:
            self._endpoint_target = self.gate.want
            return self._endpoint_wants()
        if self.gate.gate == Gate.DIFFERENT and not self._precise():
            # Verdicts weigh a commit against both means: a step known to +-25% or
            # better, or the midpoint (and every verdict near it) is off.
            self._endpoint_target = min(self._endpoint_target * 2, cfg.max_endpoint_boots)
            self.gate = None
            return self._endpoint_wants()
        self._clean_until = self._clock  # the controls watch the boots from here on
        return self.wants() if self.gate.gate == Gate.DIFFERENT else []

    def _precise(self) -> bool:
        m = self.model()
        n = len(self.boots[self.old_end])
        if not self._noisy or n >= self.config.max_endpoint_boots:
            return True
        if n < MIN_NOISY_ENDPOINT_BOOTS:
            return False
        se = m.sigma * math.sqrt(1 / m.n_old + 1 / m.n_new)
        return se <= STEP_PRECISION * abs(m.new_mean - m.old_mean)

    def _recheck(self) -> list[str]:
        """Once a culprit stands, the verdicts that make it one (it new-like, its parents
        old-like) get boots until they are strong; they need no new build. A verdict that
        turns resumes the search from there."""
        out = strategy.outcome(self.search)
        if not self._noisy or out is None or out.culprit is None:
            return []
        for commit in self._evidence(out.culprit):
            d = self.decisions.get(commit)
            if d is None or not d.firm:
                continue
            llr, n = self.llr(commit), len(self.boots[commit])
            turned = (llr > 0) != (d.state == State.NEW)
            if turned and (abs(llr) >= self.threshold or n >= RECHECK_BOOTS):
                state = State.SKIP if abs(llr) < self.threshold else State.OLD
                if state != State.SKIP and llr > 0:
                    state = State.NEW
                self.decisions[commit] = Decision(state, n, llr, "turned on a recheck", firm=True)
                self._rebuild_search()
                return self.wants()
            if abs(llr) < self.strong and n < RECHECK_BOOTS:
                return [commit]
        return []

    def _rebuild_search(self) -> None:
        """The search again from every verdict (in place: callers hold it)."""
        s = self.search
        s.new, s.old, s.skipped, s.marks = self.new_end, set(self._olds), set(), {}
        self.decisions = {c: d for c, d in self.decisions.items() if not d.twin}  # re-settled
        for commit, d in self.decisions.items():
            s.mark(commit, d.state)
        s.settle()
        self._sync_twins()
        self.active, self._dirty = [], True

    def certainty(self, commit: str) -> float:
        """P(the commit's verdict is right) on all its boots, weighed by today's model."""
        return 1.0 / (1.0 + math.exp(-abs(self.llr(commit))))

    def _confidence(self, culprit: str) -> float:
        """P(the culprit's verdict and its parents' are right): they alone make it one."""
        p = 1.0
        for commit in self._evidence(culprit):
            d = self.decisions.get(commit)
            if d is not None and d.state != State.SKIP and d.firm:
                p *= self.certainty(commit)
        return p

    def _evidence(self, culprit: str) -> list[str]:
        """The commits whose boots make `culprit` one: it and its parents, each followed
        to the commit whose kernel it makes (a twin has no boots of its own)."""
        out = []
        for commit in (culprit, *self.search.graph.parents.get(culprit, ())):
            while commit in self.search.same_as:
                commit = self.search.same_as[commit]
            if commit not in out:
                out.append(commit)
        return out

    def _decide_active(self) -> None:
        for commit in list(self.active):
            d = self._sequential(commit)
            if d is not None:
                self._decide(commit, d)

    def _sequential(self, commit: str) -> Decision | None:
        return self.judge(self.scores(commit))

    def judge(self, scores: Sequence[float]) -> Decision | None:
        """Wald's test on a commit's boot scores so far: a verdict, or None for another
        boot. Also used on kernels outside the range (the culprit reverted)."""
        if not scores:
            return None
        m = self.model()
        llr = sum(m.llr(s) for s in scores)
        n = len(scores)
        if abs(llr) >= self.threshold:
            return Decision(State.NEW if llr > 0 else State.OLD, n, llr, firm=True)
        position = m.position(robust_mean(scores))
        note = f"between the endpoints ({position:.2f}) after {n} boots"
        if not self._noisy and n >= 2:  # a counter: more boots say nothing new
            return Decision(State.SKIP, n, llr, note)
        if n < self.config.max_commit_boots:
            return None
        if abs(llr) >= math.log(19):  # at the cap, a lean of 95:5 still counts
            note = f"after {n} boots, at {1 / (1 + math.exp(-abs(llr))):.0%}"
            return Decision(State.NEW if llr > 0 else State.OLD, n, llr, note)
        return Decision(State.SKIP, n, llr, note)

    def _decide(self, commit: str, d: Decision) -> None:
        self.decisions[commit] = d
        self.search.mark(commit, d.state)
        self._dirty = True
        if commit in self.active:
            self.active.remove(commit)
        self._sync_twins()

    def _sync_twins(self) -> None:
        """Twins the search settled become decisions (never firm: no boots of their own)."""
        for commit, state in self.search.marks.items():
            if commit not in self.decisions and commit in self.search.same_as:
                of = self.search.same_as[commit]
                note = f"{self._twin_notes.get(commit, 'same kernel')}: the verdict of {of[:12]}"
                self.decisions[commit] = Decision(state, 0, 0.0, note, twin=of)
                self._dirty = True
                if commit in self.active:
                    self.active.remove(commit)

    def _notes(self) -> list[str]:
        notes = []
        whys = Counter(self._twin_notes[c] for c, d in self.decisions.items() if d.twin)
        for why, count in sorted(whys.items()):
            notes.append(f"{count} commit(s) judged with no boot of their own: {why}")
        if self._remeasures:
            notes.append(f"endpoints re-measured {self._remeasures} times during the job")
        if self._disturbed:
            start, end = self._disturbed[0][0], self._disturbed[-1][1]
            notes.append(
                f"host disturbed {len(self._disturbed)} time(s) between boots {start} and "
                f"{end} (control boots of the endpoints fell outside their spread): "
                f"{sum(d[2] for d in self._disturbed)} boots set aside, their verdicts "
                "judged again"
            )
        if self._disturbed_in_a_row >= MAX_DISTURBED_IN_A_ROW:
            notes.append("the host stayed disturbed: later boots were kept regardless")
        base = robust_mean(self.scores(self.old_end)) if self.boots.get(self.old_end) else 0.0
        for first, offset in self._levels:
            shift = relative(offset, base, self.log)
            notes.append(
                f"host level shifted {shift:+.1%} from boot {first} on "
                "(two controls in a row leaned the same way): later boots were judged "
                "against the endpoints at that level"
            )
        for name, commit in (("old", self.old_end), ("new", self.new_end)):
            s = self.scores(commit)
            first = self._endpoint_target
            if len(s) > first and first >= 2:
                base = robust_mean(s[:first])
                change = relative(robust_mean(s[first:]) - base, base, self.log)
                notes.append(f"{name} endpoint drift: {change:+.1%} (later boots vs the first)")
        return notes
