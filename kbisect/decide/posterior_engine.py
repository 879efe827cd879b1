"""The posterior engine (v3): one Bayesian search over the whole range. Pure.

Driven like workflows.engine.Engine (wants, observe, result) and a drop-in for it:

1. Both endpoints boot once. A counter (every repetition and boot the same) takes
   Engine's exact path: one boot a commit.
2. Otherwise every boot updates one posterior (workflows.posterior) over "which commit is
   the culprit", plus "no culprit". Each boot's value is weighed under the old and the new
   model (Student t, so an outlier boot moves little); the models are refitted at every
   round from the endpoints and from every commit whose side is settled, so every verdict
   sharpens the next, and every past boot is weighed again with the latest models.
3. The endpoints keep booting as references, interleaved with the probes in a balanced
   random order (old-new or new-old blocks, one reference every REFERENCE_EVERY probe
   boots). The host's level is a trend fitted to the references (workflows.trend), and
   each probe boot is judged against the level at its time: slow drift, a level shift
   and a disturbed stretch are all the trend's motion, not separate rules. Since
   revision 9, near an answer, the posterior is averaged over every motion of the level
   that the references leave likely, not taken from the likeliest alone.
4. The next commit is where P(new-like) crosses one half; with --parallel K, the K
   quantiles (revision 3: K boots a round, its references among them; on a farm the
   build hosts build ahead where the next picks will likely fall). While "no culprit"
   still holds half the mass, that point is the new endpoint itself: the endpoints are
   booted in pairs, which is the old gate.
5. The job ends when one hypothesis holds 1 - error/MARGIN of the mass: a culprit with its
   P(culprit), or "no difference"; or at the caps, "cannot decide".
"""

import math
import random
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kbisect.contract import Mode
from kbisect.decide import split_likelihood
from kbisect.decide.endpoints import (
    Effect,
    EndpointVerdict,
    Gate,
    effect_of,
    noise_free,
)
from kbisect.decide.engine import Answer, Decision, Engine, EngineConfig, EngineResult
from kbisect.decide.evidence import (
    Boot,
    Model,
    log_scale,
    mean_score,
    pooled_sigma,
    relative,
    score,
    within_spread,
)
from kbisect.decide.posterior import NONE, Posterior
from kbisect.decide.stats import robust_mean, t_logpdf
from kbisect.decide.strategy import Graph, State
from kbisect.decide.trend import (
    SWING_PHIS,
    SWING_PHIS_MOMENT,
    Swing,
    Trend,
    fit_swing,
    fit_trend,
    swing_means,
)

NONE_PRIOR = 0.5  # "no culprit" before any boot: the user's word that they differ is half
REFERENCE_EVERY = 3  # probe boots per reference boot
BOUND_EVERY = 1  # and for a commit whose verdict waits on the level (see _level_bound)
BOUND_FRACTION = 0.1  # of the step: a level error smaller than this is not worth references
FIRST_PAIRS = 3  # old-new blocks before any probe: a first noise figure
FIRM = 0.005  # a commit's side is settled beyond this (it then joins the models)
FIT_ROUNDS = 3  # model and trend refitted in turn
# The answer waits for 1 - error/MARGIN: the models are fitted, not known. At 1 - error/2
# an A/A range whose new endpoint's first 6 boots read 12% low named a culprit
# (tests/workflows/test_bisect_workflow.py), and simulated claims at 0.995 were wrong
# more often than they said.
MARGIN = 4
UNSPLIT = 1e-6  # a commit this sure of its side has nothing left to tell
# Rival motions of the level are weighed (revision 9) once the likeliest one leaves a
# hypothesis this sure: they move the answer, and cost a refit each
RIVALS_FROM = 0.9
APART = 12.0  # sigmas between the sides beyond which one boot settles a commit's side


@dataclass(frozen=True)
class Tuning:
    """What differs between the engine's revisions. A job keeps the revision it started
    with (the workflow's patch markers say which), so a history replays the same way."""

    build_cost: float  # a build, in boots
    shared_level_cancels: bool  # see Fit.level_var
    new_end_built: bool  # the new endpoint is a pick that needs no build (booted in pairs)
    slope: bool | None  # the trend's steady slope: never, always, or when it fits (None)
    per_host: bool  # each VM host has its own level, fitted to the references it booted
    full_rounds: bool = False  # with --parallel K, a round is K boots, references included
    rep_mean: bool = False  # a boot scores its repetitions' clipped mean, not their median
    # Each hypothesis weighed on the split it makes of every boot, the noise integrated out
    # (workflows.split_likelihood), the step's prior mostly a normal of this scale (log
    # units, or a fraction of the old mean): None, each commit's boots against the models.
    split_tau: float | None = None
    swing: bool = False  # a swing of the host's speed, where the boots show one
    # each other boot has the swing the references around it show taken off it, and
    # carries only the swing's variance they left (Trend.swing_at)
    swing_mean: bool = False
    # the posterior averaged over the level's motions that the references leave likely
    # (Trend.rivals), not taken from the likeliest alone
    rival_trends: bool = False


REVISIONS = {
    # As it first shipped (patch posterior-engine): a build cost 1.5 boots (the lab's
    # 12-40 s warm build against a 20 s boot), every boot carried the level's whole error.
    1: Tuning(
        build_cost=1.5, shared_level_cancels=False, new_end_built=False, slope=False, per_host=False
    ),
    # posterior-engine-2: a build costs 4 boots (a distro config's warm build takes
    # minutes, a boot seconds). The level always has a steady slope: a drift too slow for
    # the references to show (0.05% a boot) still moved a commit booted 30 times enough
    # for false culprits in 5 of 100 simulated jobs.
    2: Tuning(
        build_cost=4.0, shared_level_cancels=True, new_end_built=True, slope=True, per_host=True
    ),
    # round-at-once: a round's boots go out together, one to each VM host with room, so a
    # round of K boots keeps K hosts busy in one wave: its references come out of the K
    # (not on top: 8 probes and 3 references took two waves on 8 hosts, the second
    # mostly idle), and the first references are K/2 blocks at once.
    3: Tuning(
        build_cost=4.0,
        shared_level_cancels=True,
        new_end_built=True,
        slope=True,
        per_host=True,
        full_rounds=True,
    ),
}
# boot-mean: a boot's score is its repetitions' mean, each held near the boot's median
# (evidence.mean_score): 8% fewer boots at a 10% step and 9% at 20% (benchmarks.accuracy),
# as the within-boot half of the noise no longer pays a median's price.
REVISIONS[4] = replace(REVISIONS[3], rep_mean=True)
# Each hypothesis weighed on its split with the noise marginalised (docs/measurements.md,
# "The posterior engine, revision 5"); the models, the trend and the picks are revision
# 4's.
REVISIONS[5] = replace(REVISIONS[4], split_tau=0.15)
# Revision 5 with a slope only where the references show one (the trend's own choice):
# an always-on slope left the level unsure away from the job's middle, a probe's boots
# (booted close together) carried that error as one, and their verdicts waited on
# references (docs/measurements.md, "The posterior engine, revision 6").
REVISIONS[6] = replace(REVISIONS[5], slope=None)
# Revision 6 that knows a host's speed may swing for a minute or two: where the boots
# show it, a commit's boots close together count partly as one
# (docs/measurements.md, "A host that swings (revision 7)").
REVISIONS[7] = replace(REVISIONS[6], swing=True)
# Revision 7 that takes a swing as a mean where references show it, not only as noise: a
# probe booted beside or between references is judged against what they read beyond
# their side (docs/measurements.md, "The swing as a mean (revision 8)").
REVISIONS[8] = replace(REVISIONS[7], swing_mean=True)
# Revision 8 that weighs every motion of the level the references leave likely, not the
# likeliest alone: a drift they cannot yet tell from a still level no longer has probes
# judged against a still one as if it were known (docs/measurements.md, "Rival motions
# (revision 9)").
REVISIONS[9] = replace(REVISIONS[8], rival_trends=True)
LATEST = max(REVISIONS)


@dataclass(frozen=True)
class Fit:
    """The models of this round: each side's mean on the job's first level, one boot's
    noise, and the host's level through the job."""

    old_mean: float
    step: float  # the step the likelihood uses: at least the minimum effect, the right way
    sigma: float
    n_old: int
    n_new: int
    trends: dict[str, Trend]  # by VM host that booted references ("": hosts not told apart)
    df: float  # the noise figure's degrees of freedom
    shared: dict[str, float]  # by host: the part of its level's error every boot shares

    @property
    def trend(self) -> Trend:
        """The level of the host with the most references (the report's)."""
        return max(self.trends.values(), key=lambda t: t.references)

    def level_var(self, boots: list[tuple[str, int]], left: bool = False) -> float:
        """The level's error over boots at these (host, clock)s, less the part every boot
        of a host shares: each side's mean is taken on the same levels, so that part
        cancels in a verdict; plus what a swinging host's boots close together share (a
        commit whose boots share much calls for references between them: _level_bound).
        Hosts' errors are independent. A boot on a host with no references yet is not
        weighed at all (a farm's new host: benchmarks.farm). `left`: boots that had the
        swing's mean taken off (revision 8) share only what the references left of it."""
        boots = [(host, clock) for host, clock in boots if host in self.trends]
        clocks: dict[str, list[int]] = {}
        for host, clock in boots:
            clocks.setdefault(host, []).append(clock)
        return sum(
            (len(cs) / len(boots)) ** 2
            * (
                max(0.0, self.trends[h].mean_var(cs) - self.shared.get(h, 0.0))
                + self.trends[h].swing_var(cs, left)
            )
            for h, cs in clocks.items()
        )


def _noise(groups: list[list[float]], robust: float) -> float:
    """One boot's noise: the pooled standard deviation within commits (all its degrees
    of freedom count), but never under the robust figure (a few wild boots widen it,
    never narrow it)."""
    ss = sum(sum((v - statistics.fmean(g)) ** 2 for v in g) for g in groups if len(g) > 1)
    df = sum(len(g) - 1 for g in groups if len(g) > 1)
    return max(math.sqrt(ss / df) if df else 0.0, robust)


def information(q: float, separation: float) -> float:
    """What one boot tells (nats) about whether a commit is new-like, when it is with
    probability q and one boot's value sits `separation` sigmas from the other side's:
    the mutual information of a two-point Gaussian mixture, by quadrature."""
    if q <= 0 or q >= 1:
        return 0.0
    lo, hi, points = -6.0, separation + 6.0, 120
    width = (hi - lo) / points
    entropy = 0.0
    for i in range(points):
        y = lo + (i + 0.5) * width
        density = (
            (1 - q) * math.exp(-0.5 * y * y) + q * math.exp(-0.5 * (y - separation) ** 2)
        ) / math.sqrt(2 * math.pi)
        if density > 0:
            entropy -= density * math.log(density) * width
    return max(0.0, entropy - 0.5 * math.log(2 * math.pi * math.e))


def tells(q: float, separation: float) -> float:
    """information(), exact where the sides lie APART: one boot then tells the side, and
    the quadrature's fixed grid would step over the Gaussians (wants() keeps the grid:
    its recorded jobs replay with it)."""
    if separation >= APART and 0 < q < 1:
        return -q * math.log(q) - (1 - q) * math.log(1 - q)
    return information(q, separation)


class PosteriorEngine(Engine):
    def __init__(
        self,
        graph: Graph,
        new: str,
        old: list[str] | tuple[str, ...],
        config: EngineConfig,
        revision: int = LATEST,
    ) -> None:
        super().__init__(graph, new, old, config)
        self.tuning = REVISIONS[revision]
        self.posterior = Posterior(graph, NONE_PRIOR)
        self._exact: bool | None = None  # a counter: Engine's path
        seed = int.from_bytes((new + self.old_end).encode()[:16].ljust(16, b"0"), "big")
        self._rng = random.Random(seed)  # deterministic: a workflow replays it
        self._queue: list[str] = []  # reference boots due, in order
        self._since_reference = 0.0  # probe boots since the last reference, weighed
        self._picked: set[str] = set()  # built already: a boot of one costs no build
        self._capped: set[str] = set()
        self._fit: Fit | None = None
        self._spread = 0.0  # one repetition's stray from its boot's median (rep_mean)
        # by commit, its boots' scores so far on the scale (log, spread) they were taken on:
        # a boot is scored once until the scale changes, not every time a fit reads it
        self._scored: dict[str, tuple[tuple[bool, float], list[float]]] = {}
        self._answer: EngineResult | None = None
        # next_for, by VM host: its next references (balanced blocks), how many are due now,
        # and its probe boots since its last one (weighed as wants() weighs them)
        self._host_refs: dict[str, list[str]] = {}
        self._host_due: dict[str, int] = {}
        self._host_since: dict[str, float] = {}

    # --- driving ----------------------------------------------------------------------
    def wants(self) -> list[str]:
        if self.gate is not None and self.gate.gate == Gate.SAME and self._exact is None:
            return []  # byte-identical endpoints: nothing to boot
        if short := self._first_boots():
            return short
        if self._exact:
            return super().wants()
        if self._answer is not None:
            return []
        k = self.config.parallel if self.tuning.full_rounds else 1
        if not self._first_blocks_in():
            return [c for _ in range(max(1, k // 2)) for c in self._reference_block()]
        self._refresh()
        probes = k - k // (REFERENCE_EVERY + 1) if k > 1 else self.config.parallel
        picks = self._choose(probes)
        if self._settled(picks):
            return []
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
        if self._exact:
            return next((c for c in super().wants() if not running[c]), None)
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
        self._refresh()
        pick = self._most_told(running)
        if self._settled([pick] if pick else []):
            return None
        assert pick is not None
        if pick == self.new_end:  # the gate's question: a pair of this host's references
            self._host_due[host] += 2
            return self._host_reference(host)
        self._picked.add(pick)
        self._host_since[host] = self._host_since.get(host, 0.0) + self._reference_share(pick)
        return pick

    def _most_told(self, running: Counter[str]) -> str | None:
        """The commit one more boot tells most about, given the boots of it running: a
        boot of a commit with r running adds what r + 1 boots tell over what r do (their
        mean is sqrt(r + 1) times as far from the other side), and a commit not built yet
        tells its part over 1 + build_cost boots. None: no commit splits what is left.
        So a freed host doubles a boot in flight only where another still tells the most
        (a small step), and spreads out where one boot nearly settles a commit."""
        separation, built = self._separation(), self._built()
        best, most = None, 0.0
        for commit in self._splitting():
            q, r = self.posterior.p_new(commit), running[commit]
            told = tells(q, separation * math.sqrt(r + 1)) - tells(q, separation * math.sqrt(r))
            told /= 1 if commit in built else 1 + self.tuning.build_cost
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

    @property
    def noisy(self) -> bool:
        """Both endpoints booted, and the metric is not a counter."""
        return not self._first_boots() and self._exact is False

    @property
    def counter(self) -> bool:
        """Both endpoints booted, and the metric is a counter (one boot a commit)."""
        return self._exact is True

    def _first_boots(self) -> list[str]:
        """The endpoints still to boot a first time; once both have, whether the metric
        is a counter (self._exact) is settled."""
        if self._exact is None:
            ends = (self.old_end, self.new_end)
            if short := [c for c in ends if not self.boots.get(c)]:
                return short
            self._exact = noise_free(self.boots[ends[0]]) and noise_free(self.boots[ends[1]])
        return []

    def _reference_share(self, pick: str) -> float:
        """The references a probe boot of `pick` calls for, in probe boots: a commit known
        better than the level it is weighed against learns more from references near it
        in time than from its own boots."""
        return REFERENCE_EVERY / (BOUND_EVERY if self._level_bound(pick) else REFERENCE_EVERY)

    def ahead(self, n: int) -> list[str]:
        """Up to n commits worth building before any round picks them: where the next
        rounds' picks are likely to fall (twice as fine quantiles of today's posterior),
        not built yet. On a farm a build host would be idle meanwhile; a build a round
        waits for is most of a farm's lost time (benchmarks.farm)."""
        if self._exact is not False or self._answer is not None or n <= 0:
            return []  # a counter's path, or the job is over
        splitting = [c for c in self._splitting() if c not in self._picked]
        likely = self.posterior.quantiles(2 * self.config.parallel + 1, splitting)
        return likely[:n]

    def built_ahead(self, commit: str) -> None:
        """The commit's kernel is built: a boot of it costs no build from now on."""
        self._picked.add(commit)

    def _reference_block(self) -> list[str]:
        """Both endpoints, in a random order (old-new or new-old: balanced over blocks)."""
        block = [self.old_end, self.new_end]
        self._rng.shuffle(block)
        return block

    def _next_reference(self) -> str:
        if not self._queue:
            self._queue = self._reference_block()
        return self._queue.pop(0)

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

    def observe(self, commit: str, boot: Boot | None) -> None:
        super().observe(commit, boot)
        if boot is None or self._exact:
            return
        n = len(self.boots[commit])
        if commit not in (self.old_end, self.new_end) and n >= self.config.max_commit_boots:
            self._capped.add(commit)

    def mark(self, commit: str, state: State, note: str = "marked by a person") -> None:
        super().mark(commit, state, note)
        if state != State.SKIP:
            self.posterior.mark(commit, state == State.NEW)

    def same_kernel(self, commit: str, of: str, why: str) -> None:
        super().same_kernel(commit, of, why)
        if commit in self.search.same_as:
            for later in self.search.remade(commit):
                self.posterior.impossible(later)

    # --- the models -------------------------------------------------------------------
    def _sides(self) -> dict[str, bool]:
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

    def _refresh(self) -> None:
        """Refit the models and the trend, then weigh every boot again."""
        every = [b for bs in self.boots.values() for b in bs]
        self.log = log_scale(every)
        if self.tuning.rep_mean:
            self._spread = within_spread(every, self.log)
        raw = {c: self._scores_of(c) for c, bs in self.boots.items() if bs}
        sides = self._sides()
        fit: Fit | None = None
        for _ in range(FIT_ROUNDS):
            adjusted = {c: self._adjusted(c, fit) for c in raw}
            old = [adjusted[c] for c, new in sides.items() if not new and c in adjusted]
            new = [adjusted[c] for c, is_new in sides.items() if is_new and c in adjusted]
            flat_old = [v for g in old for v in g]
            flat_new = [v for g in new for v in g]
            old_mean, new_mean = robust_mean(flat_old), robust_mean(flat_new)
            sigma = max(_noise([*old, *new], pooled_sigma([*old, *new])), 1e-9)
            fit = Fit(
                old_mean,
                self._model_step(new_mean - old_mean, old_mean),
                sigma,
                len(flat_old),
                len(flat_new),
                self._host_levels(raw, old_mean, new_mean, sigma),
                max(1.0, len(flat_old) + len(flat_new) - len(old) - len(new) - 1.0),
                {},
            )
            fit = replace(fit, shared=self._shared(fit))
        assert fit is not None
        means = {c: new_mean if is_new else old_mean for c, is_new in sides.items()}
        if self.tuning.swing:
            fit = replace(fit, trends=self._swings(fit.trends, raw, means))
        self._fit = fit
        weighed = self._split_weights(fit)
        if weighed is None:
            self.posterior.update({c: self._commit_llr(c, fit) for c in raw if c != self.old_end})
            return
        self.posterior.weigh(*weighed)
        if self.tuning.rival_trends and self.posterior.top().p >= RIVALS_FROM:
            self.posterior.average(self._rivals(fit, raw, means))

    def _rivals(
        self, fit: Fit, raw: dict[str, list[float]], means: dict[str, float]
    ) -> list[tuple[float, list[float], float]]:
        """(weight, each split's log likelihood, no culprit's) with each host's level
        moving as each of its rival motions has it (revision 9), the rest as fitted."""
        residuals = self._reference_residuals(raw, means[self.old_end], means[self.new_end])
        out = []
        for host, trend in fit.trends.items():
            for model, weight in trend.rivals:
                rival = fit_trend(
                    residuals[host], fit.sigma, self._clock, walk=model.walk, slope=model.slope
                )
                trends = {host: replace(rival, swing=trend.swing)}
                if trend.swing is not None:
                    trends = self._swings(trends, raw, means, trend.swing)
                other = replace(fit, trends={**fit.trends, **trends})
                weighed = self._split_weights(replace(other, shared=self._shared(other)))
                if weighed is not None:
                    out.append((weight, *weighed))
        return out

    def _split_weights(self, fit: Fit) -> tuple[list[float], float] | None:
        """Each hypothesis's log likelihood (by graph.order index) and no culprit's, from
        its split of every level-adjusted boot (revision 5); None: not this revision, or
        too few boots yet. A probe's mean carries the level's error where it was booted;
        the endpoints' boots are the level's own data."""
        tau = self.tuning.split_tau
        if tau is None:
            return None
        least, sign = self._least(fit.old_mean)
        ends = (self.old_end, self.new_end)
        names, commits = [], []
        for commit in self.boots:
            if known := self._known(commit, fit):
                where = [w for _, w in known]
                left = self._conditioned(commit)
                extra = 0.0 if commit in ends else fit.level_var(where, left)
                names.append(commit)
                values = [sign * v for v, _ in known]
                noise = self._scale(commit, fit, where)
                commits.append(split_likelihood.Commit.of(values, extra, noise))
        splits, which = self.posterior.splits(names)
        scale = tau if self.log else tau * abs(fit.old_mean)
        weighed = split_likelihood.split_loglik(commits, splits, least, scale)
        if weighed is None:
            return None
        by_split, none = weighed
        return [by_split[k] for k in which], none

    def _scores_of(self, commit: str) -> list[float]:
        """The commit's boots' scores on the job's scale now (a copy)."""
        boots = self.boots.get(commit, [])
        scale = (self.log, self._spread)
        kept = self._scored.get(commit)
        if kept is None or kept[0] != scale or len(kept[1]) > len(boots):
            kept = self._scored[commit] = (scale, [])
        kept[1].extend(self._score(b) for b in boots[len(kept[1]) :])
        return list(kept[1])

    def _score(self, boot: Boot) -> float:
        if self.tuning.rep_mean:
            return mean_score(boot, self.log, self._spread)
        return score(boot, self.log)

    def boot_score(self, samples: list[float]) -> float:
        return self._score(Boot(samples))

    def _hosts(self, commit: str) -> list[str]:
        """The VM host of each of the commit's boots ("" for all: one level)."""
        return [b.host if self.tuning.per_host else "" for b in self.boots.get(commit, [])]

    def _host_levels(
        self, raw: dict[str, list[float]], old_mean: float, new_mean: float, sigma: float
    ) -> dict[str, Trend]:
        """Each host's level, fitted to the references it booted. The trend follows the
        endpoints only: a probe's own boots in it would pull the level its way, and its
        verdict with it."""
        by_host = self._reference_residuals(raw, old_mean, new_mean)
        slope = self.tuning.slope
        return {h: fit_trend(obs, sigma, self._clock, slope=slope) for h, obs in by_host.items()}

    def _reference_residuals(
        self, raw: dict[str, list[float]], old_mean: float, new_mean: float
    ) -> dict[str, list[tuple[int, float]]]:
        """By VM host, (clock, score less its side's mean) of each endpoint boot."""
        by_host: dict[str, list[tuple[int, float]]] = {}
        for c in (self.old_end, self.new_end):
            mean = new_mean if c == self.new_end else old_mean
            for v, t, h in zip(raw[c], self.times[c], self._hosts(c), strict=True):
                by_host.setdefault(h, []).append((t, v - mean))
        return by_host

    def _swings(
        self,
        trends: dict[str, Trend],
        raw: dict[str, list[float]],
        means: dict[str, float],
        fitted: Swing | None = None,
    ) -> dict[str, Trend]:
        """Each host's trend with the swing, if any, that the residuals about its level
        show of every boot whose side is known (`means`: by commit, its side's mean): a
        settled commit's boots in a row show it as well as references do. `fitted`: the
        swing already found about another level of the host (a rival's: its size barely
        moves with the level, only where the references put it)."""
        by_host: dict[str, list[tuple[int, float]]] = {}
        refs: dict[str, list[tuple[int, float]]] = {}  # the endpoints' alone
        for c, mean in means.items():
            for v, t, h in zip(raw.get(c, []), self.times.get(c, []), self._hosts(c), strict=True):
                if h in trends:
                    residual = (t, v - mean - trends[h].at(t)[0])
                    by_host.setdefault(h, []).append(residual)
                    if c in (self.old_end, self.new_end):
                        refs.setdefault(h, []).append(residual)
        phis = SWING_PHIS_MOMENT if self.tuning.swing_mean else SWING_PHIS
        out = {}
        for h, trend in trends.items():
            swing = fitted or fit_swing(sorted(by_host.get(h, [])), phis)
            out[h] = replace(trend, swing=swing)
            if swing is not None and self.tuning.swing_mean:
                by_moment, left = swing_means(refs.get(h, []), swing, self._clock)
                out[h] = replace(out[h], swing_mean=by_moment, swing_left=left)
        return out

    def _conditioned(self, commit: str) -> bool:
        """Whether the commit's boots have the references' swing taken off (revision 8)."""
        return self.tuning.swing_mean and commit not in (self.old_end, self.new_end)

    def _scale(self, commit: str, fit: Fit, where: list[tuple[str, int]]) -> float:
        """A boot's noise variance in sigma^2, on average over the commit's boots at these
        (host, clock)s, each on a host with references (_known): below 1 where the
        references showed the swing (revision 8)."""
        if not self._conditioned(commit):
            return 1.0
        scales = []
        for host, clock in where:
            trend = fit.trends[host]
            swing = trend.swing
            if swing is None or swing.total <= 0:
                scales.append(1.0)
            else:
                scales.append(1 - (swing.var - trend.swing_at(clock)[1]) / swing.total)
        return statistics.fmean(scales) if scales else 1.0

    def _shared(self, fit: Fit) -> dict[str, float]:
        """By host, the part of its level's error that every boot shares, weighed by the
        share of the references behind the side means that the host booted."""
        if not self.tuning.shared_level_cancels:
            return {}
        ends = (self.old_end, self.new_end)
        refs: dict[str, list[int]] = {}
        for c in ends:
            for t, h in zip(self.times[c], self._hosts(c), strict=True):
                refs.setdefault(h, []).append(t)
        total = sum(len(ts) for ts in refs.values())
        return {h: fit.trends[h].mean_var(ts) * (len(ts) / total) for h, ts in refs.items()}

    def _model_step(self, step: float, base: float) -> float:
        """The new model's distance from the old: at least the minimum effect, and the
        expected way (a change smaller or the other way counts for "no culprit")."""
        least, sign = self._least(base)
        return sign * max(sign * step, least)

    def _least(self, base: float) -> tuple[float, float]:
        """The minimum effect as a step from `base`, and the expected step's sign."""
        cfg = self.config
        higher_better = cfg.better == "higher"
        lower = higher_better if cfg.mode == Mode.REGRESSION.value else not higher_better
        if self.log:
            least = -math.log1p(-cfg.min_effect) if lower else math.log1p(cfg.min_effect)
        else:
            least = cfg.min_effect * abs(base)
        return least, -1.0 if lower else 1.0

    def _level_bound(self, commit: str) -> bool:
        """Whether the commit's verdict waits on the level more than on its own boots."""
        fit, times = self._fit, self.times.get(commit, [])
        if fit is None or not times:
            return False
        shared = fit.level_var(self._where(commit), self._conditioned(commit)) + fit.sigma**2 / max(
            1, min(fit.n_old, fit.n_new)
        )
        # ... and only where that error is a noticeable part of the step
        return shared >= fit.sigma**2 / len(times) and shared >= (BOUND_FRACTION * fit.step) ** 2

    def _commit_llr(self, commit: str, fit: Fit) -> float:
        """log P(boots | new-like) / P(boots | old-like), from the commit's mean level
        (trimmed: one wild boot of five is dropped). Its spread holds the boots' noise and
        the uncertainty of each side's mean and of the trend where it was booted, so many
        boots of one commit cannot be surer than the models they are weighed against."""
        level = self._commit_level(commit, fit)
        if level is None:
            return 0.0
        mean, own = level
        v_old = own + fit.sigma**2 / max(fit.n_old, 1)
        v_new = own + fit.sigma**2 / max(fit.n_new, 1)
        z_old = (mean - fit.old_mean) / math.sqrt(v_old)
        z_new = (mean - fit.old_mean - fit.step) / math.sqrt(v_new)
        # Student t with the noise figure's degrees of freedom: a sigma from few boots
        # may be small by chance, and must not make the verdicts sure.
        df = fit.df
        return t_logpdf(z_new, df) - t_logpdf(z_old, df) + 0.5 * math.log(v_old / v_new)

    def _commit_level(self, commit: str, fit: Fit) -> tuple[float, float] | None:
        """The commit's mean level and its variance (its boots' noise and the host levels'
        errors); None when none of its boots ran on a host with references."""
        known = self._known(commit, fit)
        if not known:
            return None
        mean = robust_mean([v for v, _ in known])
        where = [w for _, w in known]
        own = fit.sigma**2 * self._scale(commit, fit, where) / len(known)
        return mean, own + fit.level_var(where, self._conditioned(commit))

    @property
    def _level(self) -> float:
        """The mass one hypothesis must hold to be the answer."""
        return 1 - self.config.error / MARGIN

    # --- choosing ---------------------------------------------------------------------
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
        if not splitting:
            return []
        separation = self._separation()
        return self.posterior.quantiles(
            count,
            splitting,
            self._built(),
            worth=lambda q: information(q, separation),
            build_cost=self.tuning.build_cost,
        )

    def _splitting(self) -> list[str]:
        """The testable commits whose side is still open."""
        p_new = self.posterior.p_new
        return [c for c in self._testable() if UNSPLIT < p_new(c) < 1 - UNSPLIT]

    def _built(self) -> set[str]:
        """Commits a boot of which costs no build."""
        return self._picked | ({self.new_end} if self.tuning.new_end_built else set())

    def _separation(self) -> float:
        """How many sigmas of one boot's noise the sides lie apart."""
        fit = self._fit
        assert fit is not None, "choosing before the models"
        return abs(fit.step) / fit.sigma

    def _settled(self, picks: list[str]) -> bool:
        """Whether the job has its answer (set in self._answer); `picks`: this round's."""
        top = self.posterior.top()
        level = self._level
        ends = (self.old_end, self.new_end)
        if self.gate is None or self.gate.gate != Gate.DIFFERENT:
            if self.posterior.p_none < 0.5:
                self.gate = self._different()
        if top.p >= level:
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

    def _effect(self) -> Effect:
        return effect_of(
            self._adjusted(self.old_end, self._fit),
            self._adjusted(self.new_end, self._fit),
            self.log,
        )

    def _different(self) -> EndpointVerdict:
        effect = self._effect()
        return EndpointVerdict(Gate.DIFFERENT, effect, effect.describe())

    def _adjusted(self, commit: str, fit: Fit | None) -> list[float]:
        """The commit's scores less its host's level at each boot (no models: as read)."""
        return [v for v, _ in self._known(commit, fit)]

    def _known(self, commit: str, fit: Fit | None) -> list[tuple[float, tuple[str, int]]]:
        """(score less its host's level, (host, clock)) of each boot of the commit on a
        host with references; a level nobody measured tells nothing (no models: all
        boots, as read)."""
        scores = self._scores_of(commit)
        where = self._where(commit)
        if fit is None:
            return list(zip(scores, where, strict=True))
        off = self._conditioned(commit)
        return [
            (v - fit.trends[h].at(t)[0] - (fit.trends[h].swing_at(t)[0] if off else 0.0), (h, t))
            for v, (h, t) in zip(scores, where, strict=True)
            if h in fit.trends
        ]

    def _where(self, commit: str) -> list[tuple[str, int]]:
        """(host, clock) of each of the commit's boots."""
        return list(zip(self._hosts(commit), self.times.get(commit, []), strict=True))

    def _finish(self, culprit: str | None, ambiguous: bool = False) -> None:
        self._settle_decisions()
        p_none = self.posterior.p_none
        different = self._different()
        base = self._no_culprit("", different.effect)
        if culprit == NONE or (culprit is None and p_none >= 0.5):
            self.gate = self._no_difference(p_none)
            answer = Answer.NO_DIFFERENCE if self.gate.gate != Gate.UNDECIDED else Answer.UNDECIDED
            self._answer = replace(base, answer=answer, message=self.gate.message)
            return
        self.gate = different
        level = self._level
        if culprit is not None and not ambiguous:
            p = self.posterior.top().p
            self._answer = replace(
                base, answer=Answer.FOUND, culprit=culprit, candidates=[culprit], confidence=p
            )
            return
        held = [c for c in self.posterior.credible(level) if c != NONE]
        message = f"the boots leave {len(held)} candidates"
        if held and self.posterior.top().commit != NONE and len(held) == 1:
            p = self.posterior.top().p
            self._answer = replace(
                base, answer=Answer.FOUND, culprit=held[0], candidates=held, confidence=p
            )
            return
        self._answer = replace(base, answer=Answer.AMBIGUOUS, candidates=held, message=message)

    def _no_difference(self, p_none: float) -> EndpointVerdict:
        olds, news = (
            self._adjusted(self.old_end, self._fit),
            self._adjusted(self.new_end, self._fit),
        )
        gate = self._gate_scores(olds, news, exact=False, max_boots=len(olds))
        effect = gate.effect
        if gate.gate == Gate.WRONG_WAY:
            return gate
        if p_none >= self._level:
            return EndpointVerdict(
                Gate.SAME,
                effect,
                f"no difference: {effect.describe()}, P(no culprit) {p_none:.1%}",
            )
        return EndpointVerdict(
            Gate.UNDECIDED,
            effect,
            f"cannot decide after {len(olds) + len(news)} endpoint boots: {effect.describe()}, "
            f"P(no culprit) {p_none:.0%}; a change under the {self.config.min_effect:.1%} "
            "minimum effect counts as none",
        )

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

    # --- reading ----------------------------------------------------------------------
    def result(self) -> EngineResult:
        if self._exact or self._answer is None:
            return super().result()
        return self._answer

    def model(self) -> Model:
        fit = self._fit
        if self._exact or fit is None:
            return super().model()
        return Model(fit.old_mean, fit.old_mean + fit.step, fit.sigma, fit.n_old, fit.n_new)

    def scores(self, commit: str) -> list[float]:
        if self._exact or self._fit is None:
            return super().scores(commit)
        return self._adjusted(commit, self._fit)

    def refit(self) -> Fit | None:
        """The models fitted to the boots so far, as wants() fits them each round, with
        no answer drawn (an offline replay: benchmarks.replay_lab); None before the
        endpoints' first blocks."""
        if self._exact or not self._first_blocks_in():
            return None
        self._refresh()
        return self._fit

    def _first_blocks_in(self) -> bool:
        """Whether both endpoints have their first FIRST_PAIRS boots: the first noise figure."""
        return min(len(self.boots.get(c, [])) for c in (self.old_end, self.new_end)) >= FIRST_PAIRS

    def level_adjusted(self, scores: list[float]) -> list[float]:  # type: ignore[override]
        if self._exact or self._fit is None:
            return super().level_adjusted(scores)
        level = self._fit.trend.at(self._clock)[0]
        return [s - level for s in scores]

    def pairs_verification(self) -> bool:
        """On a host that swings: a verification's boots in a row share a swing as a
        commit's do, and the boot beside each of its base kernel shows how far."""
        return bool(not self._exact and self._fit is not None and self._fit.trend.swing)

    def paired(self, score: float, beside: float, new_side: bool) -> float:
        """The verification boot's score less what the swing gave it: the base kernel
        beside it read its side's mean at the level now, and what it read beyond that
        the verification boot shares by the swing's correlation from one boot to the
        next (a regression on it: the noise left is 1 - that squared of a boot's)."""
        fit = self._fit
        swing = fit.trend.swing if fit is not None else None
        if fit is None or swing is None:
            return score
        mean = fit.old_mean + (fit.step if new_side else 0.0)
        return score - swing.next_boot * (beside - fit.trend.at(self._clock)[0] - mean)

    def certainty(self, commit: str) -> float:
        if self._exact or self._fit is None:
            return super().certainty(commit)
        q = self.posterior.p_new(commit)
        return max(q, 1 - q)

    def _notes(self) -> list[str]:
        notes = super()._notes() if self._exact else []
        fit = self._fit
        if fit is None:
            return notes
        boots = [b for some in self.boots.values() for b in some]
        ends = sum(len(self.boots[c]) for c in (self.old_end, self.new_end))
        notes.append(
            f"{ends} boots of the endpoints interleaved with {len(boots) - ends} of other "
            f"commits (references, {ends / max(len(boots), 1):.0%} of the boots)"
        )
        if beside := sum(b.beside for b in boots):
            notes.append(
                f"{len(boots)} boots at {len(boots) - beside} moments: {beside} duets, two "
                "guests booted at once on one VM host (--duets)"
            )
        levels = [fit.trend.at(t)[0] for t in range(1, self._clock + 1)]
        if levels:
            low, high = min(levels), max(levels)
            swing = relative(high - low, fit.old_mean, self.log)
            notes.append(
                f"host level moved {swing:.1%} during the job (a trend fitted to the references)"
            )
        if swung := fit.trend.swing:
            size = relative(math.sqrt(swung.var), fit.old_mean, self.log)
            notes.append(
                f"host speed swings by {size:.1%} for a few boots at a time (correlated "
                f"{swung.phi:.2f} from one boot to the next): boots of one commit close "
                "together count partly as one"
            )
        for t in fit.trend.jumps:
            notes.append(
                f"host level jumped at boot {t} (two references in a row far off the same way)"
            )
        return notes
