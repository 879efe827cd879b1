"""The decision engine: which commits to boot next, and what their boots mean. Pure.

A state machine driven by whoever owns the boots (decide(), the simulators):

    engine = Engine(graph, new, old, EngineConfig(...), flaky=False)
    while commits := engine.wants():        # boot each of these once
        for c in commits:
            engine.observe(c, Boot(samples) or None)   # None: did not build or boot
    engine.result()

1. Both endpoints boot once. A counter (every repetition and boot the same) or a
   deterministic pass/fail verdict takes the exact path (kbisect.decide.exact): one
   boot a commit, git's halving.
2. Otherwise every boot updates one posterior (kbisect.decide.posterior) over "which
   commit is the culprit", plus "no culprit". How a boot is weighed is the job's
   likelihood: a metric's levels (kbisect.decide.levels) or a flaky job's failure rates
   (kbisect.decide.rates).
3. The endpoints keep booting as references, interleaved with the probes in a balanced
   random order (old-new or new-old blocks, one reference every REFERENCE_EVERY probe
   boots), so the likelihood can follow the host's level.
4. The next commits are where P(new-like) crosses the K quantiles (--parallel K; K boots
   a round, its references among them; on a farm the build hosts build ahead where the
   next picks will likely fall, and each freed host gets the boot that tells most).
   While "no culprit" still holds half the mass, that point is the new endpoint itself:
   the endpoints are booted in pairs, which is the old gate.
5. The job ends when one hypothesis holds 1 - error/MARGIN of the mass: a culprit with its
   P(culprit), or "no difference"; or at the caps, "cannot decide".
"""

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from kbisect.contract import Mode
from kbisect.decide.endpoints import Effect, EndpointVerdict, Gate, compare_scores, noise_free
from kbisect.decide.evidence import Boot, Model, mean_score, score
from kbisect.decide.exact import Exact
from kbisect.decide.levels import Levels
from kbisect.decide.posterior import NONE, Posterior
from kbisect.decide.rates import Rates
from kbisect.decide.strategy import Graph, Search, State
from kbisect.decide.terms import Answer, Decision, EngineConfig, EngineResult

NONE_PRIOR = 0.5  # "no culprit" before any boot: the user's word that they differ is half
REFERENCE_EVERY = 3  # probe boots per reference boot
BOUND_EVERY = 1  # and for a commit whose verdict waits on the level (Levels.level_bound)
FIRST_PAIRS = 3  # old-new blocks before any probe: a first noise figure
FIRM = 0.005  # a commit's side is settled beyond this (it then joins the models)
BUILD_COST = 4.0  # a build, in boots: a distro config's warm build takes minutes
# The answer waits for 1 - error/MARGIN: the models are fitted, not known. At 1 - error/2
# an A/A range whose new endpoint's first 6 boots read 12% low named a culprit
# (tests/workflows/test_bisect_workflow.py), and simulated claims at 0.995 were wrong
# more often than they said.
MARGIN = 4
# A disturbance of the host lasts a few boots (a 30 s load burst: two of them): the named
# culprit or its parent, if it has no more boots than this and they ran back to back on
# one host, boots once more apart from them before the answer (a real burst read two
# boots of a good commit 1.4 times slow, the step's own size, and named it)
STRETCH = 3
UNSPLIT = 1e-6  # a commit this sure of its side has nothing left to tell


class Engine:
    def __init__(
        self,
        graph: Graph,
        new: str,
        old: Sequence[str],
        config: EngineConfig,
        flaky: bool = False,
    ) -> None:
        self.config = config
        self.search = Search(graph=graph, new=new, old=set(old))
        self.old_end, self.new_end = old[0], new
        self._olds = tuple(old)
        self.boots: dict[str, list[Boot]] = {}
        self.times: dict[str, list[int]] = {}  # each boot's moment (self.clock then)
        self.clock = 0  # boots so far (a duet's second shares the first's moment)
        self.failed: set[str] = set()
        self.decisions: dict[str, Decision] = {}
        self.gate: EndpointVerdict | None = None
        self.log = True  # scores on a log scale (a positive metric: ratios)
        self._marked: set[str] = set()
        self._twin_notes: dict[str, str] = {}
        decisions = max(1, math.ceil(math.log2(len(graph.order) + 1)))
        self.threshold = math.log(decisions / config.error)  # Wald's, for a counter's verdicts
        self.strong = self.threshold + math.log(10)  # for a kernel outside the range
        self.posterior = Posterior(graph, NONE_PRIOR)
        self.weigh: Levels | Rates = Rates(self) if flaky else Levels(self)
        self.exact: Exact | None = None  # a counter's path, once the first boots show one
        self._counter: bool | None = None  # None until both endpoints booted
        seed = int.from_bytes((new + self.old_end).encode()[:16].ljust(16, b"0"), "big")
        self._rng = random.Random(seed)  # deterministic: a workflow replays it
        self._queue: list[str] = []  # reference boots due, in order
        self._since_reference = 0.0  # probe boots since the last reference, weighed
        self._picked: set[str] = set()  # built already: a boot of one costs no build
        self._capped: set[str] = set()
        self._answer: EngineResult | None = None
        # next_for, by VM host: its next references (balanced blocks), how many are due now,
        # and its probe boots since its last one (weighed as wants() weighs them)
        self._host_refs: dict[str, list[str]] = {}
        self._host_due: dict[str, int] = {}
        self._host_since: dict[str, float] = {}
        self._again: str | None = None  # a commit the answer rests on, to boot apart (STRETCH)
        self._apart_done: set[str] = set()  # ... booted apart once: never asked again

    # --- facts ------------------------------------------------------------------------
    def observe(self, commit: str, boot: Boot | None) -> None:
        """One boot of `commit`, or None when it did not build or boot."""
        if boot is None:
            if commit in (self.old_end, self.new_end):
                raise ValueError(f"endpoint {commit[:12]} must build and boot")
            self.failed.add(commit)
            self.decide(commit, Decision(State.SKIP, 0, 0.0, "does not build or boot"))
            return
        if not boot.samples:
            raise ValueError(f"a boot of {commit[:12]} with no samples")
        self.boots.setdefault(commit, []).append(boot)
        if not boot.beside or not self.clock:
            self.clock += 1
        self.times.setdefault(commit, []).append(self.clock)
        if self._counter:
            return
        n = len(self.boots[commit])
        if commit not in (self.old_end, self.new_end) and n >= self.config.max_commit_boots:
            self._capped.add(commit)

    def mark(self, commit: str, state: State, note: str = "marked by a person") -> None:
        """A verdict from outside (a person): final, whatever the boots say."""
        self._marked.add(commit)
        self.decide(commit, Decision(state, len(self.boots.get(commit, [])), 0.0, note))
        if state != State.SKIP:
            self.posterior.mark(commit, state == State.NEW)

    def same_kernel(self, commit: str, of: str, why: str) -> None:
        """`commit` makes the same kernel as `of` (it touches nothing the config compiles,
        or its image is byte-identical): it takes that kernel's verdict, with no boot; of
        commits making one kernel, only the earliest can be the culprit."""
        if commit not in (self.old_end, self.new_end) and commit not in self.decisions:
            self._twin_notes[commit] = why
            self.search.twin(commit, of)
            self._changed(commit)
            self._sync_twins()
        if commit in self.search.same_as:
            for later in self.search.remade(commit):
                self.posterior.impossible(later)
            for between in self._split_by(commit, self.search.same_as[commit]):
                self.posterior.impossible(between)

    def _split_by(self, a: str, b: str) -> list[str]:
        """The commits that, as the culprit, would put one of `a` and `b` on each side:
        impossible when both make one kernel. A revert back to the old end's image rules
        out the commits it reverts, which no boot of its own would (it is never booted)."""
        anc = self.search.graph.ancestry
        return self.search.graph.members(anc.get(a, 0) ^ anc.get(b, 0))

    def identical_endpoints(self) -> None:
        """The endpoints' images are byte-identical: nothing between them can differ."""
        none = Effect(0.0, 0.0, 0.0, 1.0, 0, 0)
        message = "their kernels are byte-identical, so nothing between them can differ"
        self.gate = EndpointVerdict(Gate.SAME, none, message)

    def built_ahead(self, commit: str) -> None:
        """The commit's kernel is built: a boot of it costs no build from now on."""
        self._picked.add(commit)

    def decide(self, commit: str, d: Decision) -> None:
        self.decisions[commit] = d
        self.search.mark(commit, d.state)
        self._changed(commit)
        self._sync_twins()

    def _changed(self, commit: str) -> None:
        if self.exact is not None:
            self.exact.changed(commit)

    def _sync_twins(self) -> None:
        """Twins the search settled become decisions (never firm: no boots of their own)."""
        for commit, state in self.search.marks.items():
            if commit not in self.decisions and commit in self.search.same_as:
                of = self.search.same_as[commit]
                note, verdict_of = self._twin_note(commit, state)
                self.decisions[commit] = Decision(
                    state, 0, 0.0, note, twin=of, verdict_of=verdict_of
                )
                self._changed(commit)

    def _twin_note(self, commit: str, state: State) -> tuple[str, str]:
        """Where a twin's verdict came from, as it is settled: the judged commit whose
        kernel it makes (its verdict now, not a later one), or, when that kernel was never
        booted, where its commit lies. Returns the note and the judged commit ("": none)."""
        why = self._twin_notes.get(commit, "same kernel")
        kernel = self.search.kernel_of(commit)
        judged = self.decisions.get(kernel)
        if kernel in (*self._olds, self.new_end) or (judged is not None and not judged.twin):
            return f"{why}: the verdict of {kernel[:12]}", kernel
        return f"{why}: the kernel of {kernel[:12]}, never booted, {self._lies(kernel, state)}", ""

    def _lies(self, kernel: str, state: State) -> str:
        """Why an unbooted kernel's commit has the verdict `state`: a judged commit it
        lies below (OLD) or above (NEW)."""
        anc, index = self.search.graph.ancestry, self.search.graph.index
        if kernel not in anc:
            return "below the range"
        judged = [*self._olds, self.new_end, *(c for c, d in self.decisions.items() if not d.twin)]
        for c in judged:
            if c not in anc or self.search.marks.get(c, self._end_state(c)) != state:
                continue
            if state == State.OLD and anc[c] >> index[kernel] & 1:
                return f"an ancestor of {c[:12]}"
            if state == State.NEW and anc[kernel] >> index[c] & 1:
                return f"a descendant of {c[:12]}"
        return "placed by the verdicts around it"

    def _end_state(self, commit: str) -> State | None:
        if commit in self._olds:
            return State.OLD
        return State.NEW if commit == self.new_end else None

    def _rebuild_search(self) -> None:
        """The search again from every verdict (in place: callers hold it)."""
        s = self.search
        s.new, s.old, s.skipped, s.marks = self.new_end, set(self._olds), set(), {}
        self.decisions = {c: d for c, d in self.decisions.items() if not d.twin}  # re-settled
        for commit, d in self.decisions.items():
            s.mark(commit, d.state)
        s.settle()
        self._sync_twins()
        if self.exact is not None:
            self.exact.active, self.exact.dirty = [], True

    # --- driving ----------------------------------------------------------------------
    def wants(self) -> list[str]:
        """The commits to boot once each now; [] when the job is decided."""
        if self.gate is not None and self.gate.gate == Gate.SAME and self._counter is None:
            return []  # byte-identical endpoints: nothing to boot
        if short := self._first_boots():
            return short
        if self.exact is not None:
            return self.exact.wants()
        if self._answer is not None:
            return []
        k = self.config.parallel
        if not self.first_blocks_in():
            return [c for _ in range(max(1, k // 2)) for c in self._reference_block()]
        self.weigh.refresh()
        probes = k - k // (REFERENCE_EVERY + 1) if k > 1 else k
        picks = self._choose(probes)
        if self._settled(picks):
            return []
        if self._again is not None:
            return self._apart(self._again, None, k)
        if k > 1:  # fewer commits split what is left: they boot again, in the same round
            picks = [picks[i % len(picks)] for i in range(probes)]
        out: list[str] = []
        for pick in picks:
            if pick == self.new_end:  # the gate's question: boot the endpoints in pairs
                out += self._reference_block()
            else:
                out.append(pick)
                self._picked.add(pick)
                self._since_reference += self._reference_share(pick)
        while self._since_reference >= REFERENCE_EVERY or len(out) < k:
            self._since_reference -= REFERENCE_EVERY  # below 0: references ahead of time
            out.append(self._next_reference())
        return out

    def next_for(self, host: str | None, in_flight: Sequence[str]) -> str | None:
        """One boot for a VM host that just freed up, while `in_flight` boots run on the
        others: picks as hosts free up, not rounds that wait for their slowest boot (the
        workflow's rolling picks; benchmarks.farm --rolling). Each host boots its own
        references, an old-new block first (less what it booted already) and then another
        every REFERENCE_EVERY of its probe boots (weighed as wants() weighs them), so its
        probes are judged against its own level. A probe is the commit one more boot tells
        most about, the boots in flight counted (_most_told). host None: a slot whose
        host is not known yet (the boot goes to whichever has room) takes the endpoint
        booted least, as any host needs both. None: nothing to add now (the answer is
        in, or a counter's picks are all running); boots still in flight may be
        observed."""
        ends = (self.old_end, self.new_end)
        running = Counter(in_flight)
        if host is not None and host not in self._host_refs:  # new to the job: references
            booted = {c for c in ends if any(b.host == host for b in self.boots.get(c, []))}
            self._host_refs[host] = [c for c in self._reference_block() if c not in booted]
            self._host_due[host] = len(self._host_refs[host])
        due = host is not None and self._host_due[host] > 0
        least_booted = min(ends, key=lambda c: len(self.boots.get(c, [])) + running[c])
        if self._first_boots():
            return self._host_reference(host) if host is not None and due else least_booted
        if self.exact is not None:
            return next((c for c in self.exact.wants() if not running[c]), None)
        if self._answer is not None:
            return None
        if host is None:
            return least_booted
        if due:
            return self._host_reference(host)
        if self._host_since.get(host, 0.0) >= REFERENCE_EVERY:
            self._host_since[host] -= REFERENCE_EVERY
            self._host_due[host] += 2
            return self._host_reference(host)
        if not self.first_blocks_in():  # no noise figure yet: another block of references
            self._host_due[host] += 2
            return self._host_reference(host)
        self.weigh.refresh()
        pick = self._most_told(running)
        if self._settled([pick] if pick else []):
            return None
        if self._again is not None:  # one host boots it; the others wait for its answer
            return None if running[self._again] else self._apart(self._again, host, 1)[0]
        assert pick is not None
        if pick == self.new_end:  # the gate's question: a pair of this host's references
            self._host_due[host] += 2
            return self._host_reference(host)
        self._picked.add(pick)
        self._host_since[host] = self._host_since.get(host, 0.0) + self._reference_share(pick)
        return pick

    def _most_told(self, running: Counter[str]) -> str | None:
        """The commit one more boot tells most about, given the boots of it running (a
        commit not built yet tells its part over 1 + BUILD_COST boots). None: no commit
        splits what is left. So a freed host doubles a boot in flight only where another
        still tells the most (a small step), and spreads out where one boot nearly
        settles a commit."""
        built = self._built()
        best, most = None, 0.0
        for commit in self._splitting():
            told = self.weigh.told(self.posterior.p_new(commit), running[commit])
            told /= 1 if commit in built else 1 + BUILD_COST
            if best is None or told > most:
                best, most = commit, told
        return best

    def _host_reference(self, host: str) -> str:
        """The host's next reference (balanced blocks of its own), one fewer due."""
        refs = self._host_refs.setdefault(host, [])
        if not refs:
            refs += self._reference_block()
        self._host_due[host] = max(0, self._host_due.get(host, 0) - 1)
        return refs.pop(0)

    def ahead(self, n: int) -> list[str]:
        """Up to n commits worth building before any round picks them: where the next
        rounds' picks are likely to fall (twice as fine quantiles of today's posterior),
        not built yet. On a farm a build host would be idle meanwhile; a build a round
        waits for is most of a farm's lost time (benchmarks.farm)."""
        if self._counter is not False or self._answer is not None or n <= 0:
            return []  # a counter's path, or the job is over
        splitting = [c for c in self._splitting() if c not in self._picked]
        likely = self.posterior.quantiles(2 * self.config.parallel + 1, splitting)
        return likely[:n]

    def duet_pairs(self, commits: Sequence[str]) -> list[tuple[str, str]]:
        """A round's boots (wants()) as duets, the second of each booted beside the
        first: each probe beside a reference (the round's own, else duet_partner's), the
        round's other references two at a time, a lone one with its twin (alone it would
        be timed at another level than every other boot). A commit judged the same kernel
        as another boots nothing."""
        ends = (self.old_end, self.new_end)
        boots = [c for c in commits if c not in self.search.same_as]
        refs = [c for c in boots if c in ends]
        pairs = [(refs.pop(0) if refs else self.duet_partner(), c) for c in boots if c not in ends]
        if len(refs) % 2:
            refs.append(ends[1] if refs[-1] == ends[0] else ends[0])
        return pairs + list(zip(refs[::2], refs[1::2], strict=True))

    def duet_partner(self) -> str:
        """The reference to boot beside a probe that has none (a duet): the next of the
        balanced blocks, counted as a reference ahead of time."""
        self._since_reference -= REFERENCE_EVERY
        return self._next_reference()

    def _first_boots(self) -> list[str]:
        """The endpoints still to boot a first time; once both have, whether the metric
        is a counter is settled."""
        if self._counter is None:
            ends = (self.old_end, self.new_end)
            if short := [c for c in ends if not self.boots.get(c)]:
                return short
            self._counter = noise_free(self.boots[ends[0]]) and noise_free(self.boots[ends[1]])
            if self._counter:
                self.exact = Exact(self)
        return []

    def first_blocks_in(self) -> bool:
        """Whether both endpoints have their first FIRST_PAIRS boots: the first noise
        figure (on a farm, from hosts that booted both: Levels.ready)."""
        ends = (self.old_end, self.new_end)
        booted = min(len(self.boots.get(c, [])) for c in ends) >= FIRST_PAIRS
        return booted and self.weigh.ready(FIRST_PAIRS)

    def _reference_share(self, pick: str) -> float:
        """The references a probe boot of `pick` calls for, in probe boots: a commit known
        better than the level it is weighed against learns more from references near it
        in time than from its own boots."""
        return REFERENCE_EVERY / (BOUND_EVERY if self.weigh.level_bound(pick) else REFERENCE_EVERY)

    def _reference_block(self) -> list[str]:
        """Both endpoints, in a random order (old-new or new-old: balanced over blocks)."""
        block = [self.old_end, self.new_end]
        self._rng.shuffle(block)
        return block

    def _next_reference(self) -> str:
        if not self._queue:
            self._queue = self._reference_block()
        return self._queue.pop(0)

    # --- choosing ---------------------------------------------------------------------
    def sides(self) -> dict[str, bool]:
        """Commits whose side is settled (True: new-like), the endpoints included."""
        sides = {self.old_end: False, self.new_end: True}
        for commit in self.boots:
            if commit in sides or commit in self.failed:
                continue
            if commit in self._marked:
                state = self.decisions[commit].state
                if state != State.SKIP:
                    sides[commit] = state == State.NEW
                continue
            q = self.posterior.p_new(commit)
            if q >= 1 - FIRM or q <= FIRM:
                sides[commit] = q >= 1 - FIRM
        return sides

    def _testable(self) -> list[str]:
        out = []
        for commit in self.search.graph.order:
            if commit in self.failed or commit in self._capped or commit in self._marked:
                continue
            if commit in self.search.same_as:
                continue
            if commit == self.new_end and len(self.boots[commit]) >= self.config.max_endpoint_boots:
                continue
            out.append(commit)
        return out

    def _choose(self, count: int) -> list[str]:
        """Up to `count` commits to probe this round."""
        splitting = self._splitting()
        worth = self.weigh.worth() if splitting else None
        if worth is None:
            return []
        return self.posterior.quantiles(
            count, splitting, self._built(), worth=worth, build_cost=BUILD_COST
        )

    def _splitting(self) -> list[str]:
        """The testable commits whose side is still open."""
        p_new = self.posterior.p_new
        return [c for c in self._testable() if UNSPLIT < p_new(c) < 1 - UNSPLIT]

    def _built(self) -> set[str]:
        """Commits a boot of which costs no build (the new endpoint's is booted in pairs)."""
        return self._picked | {self.new_end}

    @property
    def level(self) -> float:
        """The mass one hypothesis must hold to be the answer."""
        return 1 - self.config.error / MARGIN

    # --- answering --------------------------------------------------------------------
    def _settled(self, picks: list[str]) -> bool:
        """Whether the job has its answer (set in self._answer); `picks`: this round's."""
        top = self.posterior.top()
        ends = (self.old_end, self.new_end)
        self._again = None  # asked afresh: the answer may have moved since
        if self.gate is None or self.gate.gate != Gate.DIFFERENT:
            if self.posterior.p_none < 0.5:
                self.gate = self._different()
        # "no culprit" is the answer once its interval rules the minimum effect out
        if top.p >= self.level and (top.commit != NONE or self.weigh.ruled_out()):
            self._again = self._in_one_stretch(top.commit)
            if self._again is not None:
                return False
            self._finish(top.commit)
            return True
        if min(len(self.boots[c]) for c in ends) >= self.config.max_endpoint_boots:
            if self.posterior.p_none >= 0.5:
                self._finish(None)
                return True
        if not picks:  # nothing testable splits what is left
            self._finish(top.commit if top.p >= 0.5 else None, ambiguous=True)
            return True
        return False

    def _in_one_stretch(self, culprit: str) -> str | None:
        """Of the culprit and its parents, one whose boots (STRETCH at most) all ran back
        to back on one host, where one disturbance could have read them all; None if
        none. A noisy metric's only: a pass/fail verdict is not read slow. Once a commit:
        a commit that failed, is capped or takes a twin's verdict boots no more."""
        if culprit == NONE or not isinstance(self.weigh, Levels):
            return None
        done = {self.old_end, self.new_end, *self._apart_done, *self._marked, *self.failed}
        done |= self._capped | self.search.same_as.keys()
        for commit in (culprit, *self.search.graph.parents.get(culprit, ())):
            boots = self.boots.get(commit, [])
            if commit in done or not 0 < len(boots) <= STRETCH:
                continue
            if any(b.host != boots[0].host for b in boots):
                continue
            order = self._host_order(boots[0].host)
            at = [i for i, (_, c) in enumerate(order) if c == commit]
            # a duet's boot shares its moment with the reference beside it: not alone
            mine = set(self.times[commit])
            shared = any(t in mine and c != commit for t, c in order)
            if at[-1] - at[0] == len(at) - 1 and not shared:
                return commit
        return None

    def _host_order(self, host: str | None) -> list[tuple[int, str]]:
        """(moment, commit) of each boot on the host (None: every host), in order."""
        return sorted(
            (t, c)
            for c, bs in self.boots.items()
            for b, t in zip(bs, self.times[c], strict=True)
            if host is None or b.host == host
        )

    def _apart(self, commit: str, host: str | None, k: int) -> list[str]:
        """The boot _in_one_stretch asked for: `commit`, after a reference when the host's
        last boot was of it (rolling: the reference now, and `commit` stays asked for);
        references fill a round of k."""
        order = self._host_order(host)
        if order and order[-1][1] == commit:
            if host is not None:
                return [self._host_reference(host)]
            out = [self._next_reference(), commit]
        else:
            out = [commit]
        self._apart_done.add(commit)
        self._again = None
        while len(out) < k:
            out.append(self._next_reference())
        return out

    def _different(self) -> EndpointVerdict:
        effect = self.weigh.effect()
        return EndpointVerdict(Gate.DIFFERENT, effect, effect.describe())

    def _finish(self, culprit: str | None, ambiguous: bool = False) -> None:
        self._settle_decisions()
        p_none = self.posterior.p_none
        different = self._different()
        base = self.no_culprit("", different.effect)
        if culprit == NONE or (culprit is None and p_none >= 0.5):
            self.gate = self.weigh.no_difference(p_none)
            answer = Answer.NO_DIFFERENCE if self.gate.gate != Gate.UNDECIDED else Answer.UNDECIDED
            self._answer = replace(base, answer=answer, message=self.gate.message)
            return
        self.gate = different
        if culprit is not None and not ambiguous:
            p = self.posterior.top().p
            self._answer = replace(
                base, answer=Answer.FOUND, culprit=culprit, candidates=[culprit], confidence=p
            )
            return
        held = [c for c in self.posterior.credible(self.level) if c != NONE]
        message = f"the boots leave {len(held)} candidates"
        if held and self.posterior.top().commit != NONE and len(held) == 1:
            p = self.posterior.top().p
            self._answer = replace(
                base, answer=Answer.FOUND, culprit=held[0], candidates=held, confidence=p
            )
            return
        self._answer = replace(base, answer=Answer.AMBIGUOUS, candidates=held, message=message)

    def _settle_decisions(self) -> None:
        """Every booted commit's verdict as the posterior has it now."""
        for commit in self.boots:
            if commit in (self.old_end, self.new_end) or commit in self._marked:
                continue
            n = len(self.boots[commit])
            q = self.posterior.p_new(commit)
            sure = max(q, 1 - q)
            logit = math.log(sure / (1 - sure)) if sure < 1 else 50.0
            if commit in self._capped and 0.05 < q < 0.95:
                d = Decision(State.SKIP, n, 0.0, f"between the endpoints after {n} boots")
            else:
                state = State.NEW if q >= 0.5 else State.OLD
                d = Decision(state, n, logit if state == State.NEW else -logit, firm=True)
            self.decisions[commit] = d
        self._rebuild_search()

    def result(self) -> EngineResult:
        if self.exact is not None:
            return self.exact.result()
        if self._answer is not None:
            return self._answer
        return self.gate_result()

    def gate_result(self) -> EngineResult:
        """The answer the endpoints' gate gives alone (no difference, cannot decide)."""
        assert self.gate is not None, "result() before the endpoints were decided"
        base = self.no_culprit(self.gate.message, self.gate.effect)
        return replace(base, answer=Answer.UNDECIDED) if self.gate.gate == Gate.UNDECIDED else base

    def no_culprit(self, message: str, effect: Effect) -> EngineResult:
        """The job's figures with no culprit named (yet): what every answer starts from."""
        return EngineResult(
            answer=Answer.NO_DIFFERENCE,
            culprit=None,
            candidates=[],
            confidence=0.0,
            builds=len(set(self.boots) | self.failed),
            boots=self.clock,
            message=message,
            effect=effect.describe(),
            change=effect,
            notes=self._notes(),
        )

    def _notes(self) -> list[str]:
        notes = []
        if self.exact is not None:
            whys = Counter(self._twin_notes[c] for c, d in self.decisions.items() if d.twin)
            for why, count in sorted(whys.items()):
                notes.append(f"{count} commit(s) judged with no boot of their own: {why}")
        return notes + self.weigh.notes()

    # --- the endpoints' gate ----------------------------------------------------------
    def gate_boots(self, old: Sequence[Boot], new: Sequence[Boot]) -> EndpointVerdict:
        """The gate on the endpoints' boots as read."""
        return self.gate_scores(
            [score(b, self.log) for b in old],
            [score(b, self.log) for b in new],
            exact=noise_free(old) and noise_free(new),
            max_boots=self.config.max_endpoint_boots,
        )

    def gate_scores(
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

    # --- reading ----------------------------------------------------------------------
    @property
    def noisy(self) -> bool:
        """Both endpoints booted, and the metric is not a counter."""
        return not self._first_boots() and self._counter is False

    @property
    def counter(self) -> bool:
        """Both endpoints booted, and the metric is a counter (one boot a commit)."""
        return self._counter is True

    @property
    def noisy_ends(self) -> bool:
        """The endpoints' boots so far disagree: a timing, not a counter."""
        ends = (self.boots.get(self.old_end, []), self.boots.get(self.new_end, []))
        return not all(noise_free(b) for b in ends)

    @property
    def bisecting(self) -> bool:
        """The endpoints differ: past the gate."""
        return self.gate is not None and self.gate.gate == Gate.DIFFERENT

    def raw_scores(self, commit: str) -> list[float]:
        """Each boot's median repetition on the job's scale, as read."""
        return [score(b, self.log) for b in self.boots.get(commit, [])]

    def endpoint_model(self) -> Model:
        """The endpoints' boots as read, joined by those of commits decided firmly."""
        old, new = [self.raw_scores(self.old_end)], [self.raw_scores(self.new_end)]
        for commit, d in self.decisions.items():
            if d.firm and self.noisy_ends:  # a counter's endpoints are exact already
                (new if d.state == State.NEW else old).append(self.raw_scores(commit))
        return Model.fit(old, new)

    def model(self) -> Model:
        """What old-like and new-like boots look like now."""
        return self.weigh.model()

    def scores(self, commit: str) -> list[float]:
        """Each of the commit's boots as the likelihood reads it now (less the level)."""
        return self.weigh.scores(commit)

    def certainty(self, commit: str) -> float:
        """P(the commit's verdict is right) on all its boots, weighed by today's model."""
        return self.weigh.certainty(commit)

    def judge(self, scores: list[float]) -> Decision | None:
        """A sequential test on a kernel's boot scores so far: a verdict, or None for
        another boot (a counter's commits; any job's kernels outside the range)."""
        return self.weigh.judge(scores)

    def level_adjusted(self, scores: list[float]) -> list[float]:
        """Scores of boots run now (after the job: a verification) on the job's scale."""
        return self.weigh.level_adjusted(scores)

    def boot_score(self, samples: list[float]) -> float:
        """One boot's score on the job's scale, as the engine scores its own boots."""
        return mean_score(Boot(samples), self.log, self.weigh.spread)

    def pairs_verification(self) -> bool:
        """Whether each verification boot wants a boot of the kernel it was made from
        beside it (see paired)."""
        return self.weigh.pairs_verification()

    def paired(self, score: float, beside: float, new_side: bool) -> float:
        """A verification boot's score, given the score of the boot beside it of the
        kernel it was made from (an endpoint: the new one when `new_side`)."""
        return self.weigh.paired(score, beside, new_side)
