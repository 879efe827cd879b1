"""How a noisy metric's boots are weighed: the engine's likelihood for timings. Pure.

Each boot's value is weighed under the old and the new model; the models are refitted at
every round from the endpoints and from every commit whose side is settled, so every
verdict sharpens the next, and every past boot is weighed again with the latest models.
The host's level is a trend fitted to each VM host's references (kbisect.decide.trend):
slow drift, a level shift, a disturbed stretch and a swing of a minute or two are all its
motion. Each hypothesis is weighed on the split it makes of every boot, the noise
integrated out (kbisect.decide.split_likelihood); near an answer, over every motion of
the level that the references leave likely, not the likeliest alone.
"""

import math
import statistics
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from kbisect.contract import Mode
from kbisect.decide import split_likelihood
from kbisect.decide.endpoints import Effect, EndpointVerdict, Gate, effect_of
from kbisect.decide.evidence import (
    Model,
    log_scale,
    mean_score,
    pooled_sigma,
    relative,
    within_spread,
)
from kbisect.decide.stats import robust_mean, t_logpdf, t_quantile
from kbisect.decide.strategy import State
from kbisect.decide.terms import Decision
from kbisect.decide.trend import SWING_PHIS_MOMENT, Swing, Trend, fit_swing, fit_trend, swing_means

if TYPE_CHECKING:
    from collections.abc import Callable

    from kbisect.decide.engine import Engine

T = TypeVar("T")

BOUND_FRACTION = 0.1  # of the step: a level error smaller than this is not worth references
FIT_ROUNDS = 3  # model and trend refitted in turn
# The step's prior in the split likelihood: mostly a normal of this scale (log units, or a
# fraction of the old mean)
SPLIT_TAU = 0.15
# Rival motions of the level are weighed once the likeliest one leaves a hypothesis this
# sure: they move the answer, and cost a refit each
RIVALS_FROM = 0.9
APART = 12.0  # sigmas between the sides beyond which one boot settles a commit's side
# A boot this many sigmas (a robust figure) off its kernel's others is wild: a disturbed
# host (a cron job, a noisy neighbour), set aside. Clean noise all but never reaches it
# (6 sigmas: 1 in 10^9); a boot 3 times slower than its kernel's others does at a CV of
# 15% (at 8 sigmas one did not, and a job named the wrong commit: docs/measurements.md)
WILD_SIGMAS = 6.0
WILD_LEAST = 6  # pairs of boots of one commit needed before any is judged wild
PAIR_MEDIAN = 0.6745 * math.sqrt(2)  # the median of |a - b| for two normal draws, in sigma
# ... and at least this factor off (a quiet or coarse metric's robust noise figure can be
# nearly 0: many boots reading alike would make every other one wild). At 2 a real
# burst's boots 1.5 times slower on a metric of 5% noise counted, and cost a job 2.4
# times its quiet boots (docs/measurements.md, "Wild boots")
WILD_FACTOR = 1.25
# A host with this many boots set aside, a tenth of its boots or more, is unfit for timing:
# the job says so and waits for a person (and again after as many more)
UNFIT_WILD, UNFIT_SHARE = 5, 0.1


@dataclass(frozen=True)
class Fit:
    """The models of this round: each side's mean on the job's first level, one boot's
    noise, and the host's level through the job."""

    old_mean: float
    step: float  # the step the likelihood uses: at least the minimum effect, the right way
    sigma: float
    n_old: int
    n_new: int
    trends: dict[str, Trend]  # by VM host that booted references
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
        commit whose boots share much calls for references between them: level_bound).
        Hosts' errors are independent. A boot on a host with no references yet is not
        weighed at all (a farm's new host: benchmarks.farm). `left`: boots that had the
        swing's mean taken off share only what the references left of it."""
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


def _noise(groups: list[list[float]], robust: float, levels: int = 0) -> float:
    """One boot's noise: the pooled standard deviation within commits (all its degrees
    of freedom count), but never under the robust figure (a few wild boots widen it,
    never narrow it). `levels`: host levels beyond the first fitted to these boots; each
    took a degree of freedom from them, so both figures are scaled back up (8 hosts with
    one old-new block each leave 7 of 14, and the noise read half as large)."""
    ss = sum(sum((v - statistics.fmean(g)) ** 2 for v in g) for g in groups if len(g) > 1)
    df = sum(len(g) - 1 for g in groups if len(g) > 1)
    left = max(df - levels, 1)
    return max(math.sqrt(ss / left) if df else 0.0, robust * math.sqrt(max(df, 1) / left))


def pair_sigma(groups: list[list[float]]) -> float:
    """One boot's noise, robustly: the median difference of two boots of one commit (a
    draw of twice the variance: 0.954 sigma for a normal), so a few wild boots cannot
    widen it. Distances from each commit's median would count the median's own zero, and
    read 3 boots' noise about half as large (clean boots then went wild: a wrong commit,
    docs/measurements.md). 0 with fewer than WILD_LEAST pairs."""
    pairs = [abs(a - b) for g in groups for i, a in enumerate(g) for b in g[:i]]
    return statistics.median(pairs) / PAIR_MEDIAN if len(pairs) >= WILD_LEAST else 0.0


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
    the quadrature's fixed grid would step over the Gaussians (the round's picks keep the
    grid: its recorded jobs replay with it)."""
    if separation >= APART and 0 < q < 1:
        return -q * math.log(q) - (1 - q) * math.log(1 - q)
    return information(q, separation)


class Levels:
    """A noisy metric's likelihood: models, the host's level, each hypothesis's weight."""

    def __init__(self, engine: "Engine") -> None:
        self.e = engine
        self.fit: Fit | None = None
        self.spread = 0.0  # one repetition's stray from its boot's median
        self.wild: dict[str, set[int]] = {}  # by commit, its boots set aside (find_wild)
        # by commit, its boots' scores so far on the scale (log, spread) they were taken on:
        # a boot is scored once until the scale changes, not every time a fit reads it
        self._scored: dict[str, tuple[tuple[bool, float], list[float]]] = {}

    # --- weighing ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Refit the models and the trend, then weigh every boot again."""
        e = self.e
        every = [b for bs in e.boots.values() for b in bs]
        e.log = log_scale(every)
        self.spread = within_spread(every, e.log)
        self.find_wild()
        raw = {c: self.scores_of(c) for c, bs in e.boots.items() if bs}
        sides = e.sides()
        fit: Fit | None = None
        for _ in range(FIT_ROUNDS):
            adjusted = {c: self.adjusted(c, fit) for c in raw}
            old = [adjusted[c] for c, new in sides.items() if not new and c in adjusted]
            new = [adjusted[c] for c, is_new in sides.items() if is_new and c in adjusted]
            flat_old = [v for g in old for v in g]
            flat_new = [v for g in new for v in g]
            old_mean, new_mean = robust_mean(flat_old), robust_mean(flat_new)
            levels = max(0, len(fit.trends) - 1) if fit is not None else 0
            sigma = max(_noise([*old, *new], pooled_sigma([*old, *new]), levels), 1e-9)
            fit = Fit(
                old_mean,
                self._model_step(new_mean - old_mean, old_mean),
                sigma,
                len(flat_old),
                len(flat_new),
                self._host_levels(raw, old_mean, new_mean, sigma),
                max(1.0, len(flat_old) + len(flat_new) - len(old) - len(new) - 1.0 - levels),
                {},
            )
            fit = replace(fit, shared=self._shared(fit))
        assert fit is not None
        means = {c: new_mean if is_new else old_mean for c, is_new in sides.items()}
        fit = replace(fit, trends=self._swings(fit.trends, raw, means))
        self.fit = fit
        weighed = self._split_weights(fit)
        if weighed is None:
            e.posterior.update({c: self._commit_llr(c, fit) for c in raw if c != e.old_end})
            return
        e.posterior.weigh(*weighed)
        if e.posterior.top().p >= RIVALS_FROM:
            e.posterior.average(self._rivals(fit, raw, means))

    def refit(self) -> Fit | None:
        """The models fitted to the boots so far, as a round fits them, with no answer
        drawn (an offline replay: benchmarks.replay_lab); None before the endpoints'
        first blocks, or on a counter's path."""
        if self.e.exact is not None or not self.e.first_blocks_in():
            return None
        self.refresh()
        return self.fit

    def _rivals(
        self, fit: Fit, raw: dict[str, list[float]], means: dict[str, float]
    ) -> list[tuple[float, list[float], float]]:
        """(weight, each split's log likelihood, no culprit's) with each host's level
        moving as each of its rival motions has it, the rest as fitted."""
        e = self.e
        residuals = self._reference_residuals(raw, means[e.old_end], means[e.new_end])
        fitted = {c: self._split_commit(c, fit) for c in e.boots}
        out = []
        for host, trend in fit.trends.items():
            # a rival moves this host's level alone: the others' commits stand as fitted
            same = {c: fitted[c] for c in e.boots if host not in self._hosts(c)}
            for model, weight in trend.rivals:
                rival = fit_trend(
                    residuals[host], fit.sigma, e.clock, walk=model.walk, slope=model.slope
                )
                trends = {host: replace(rival, swing=trend.swing)}
                if trend.swing is not None:
                    trends = self._swings(trends, raw, means, trend.swing)
                other = replace(fit, trends={**fit.trends, **trends})
                weighed = self._split_weights(replace(other, shared=self._shared(other)), same)
                if weighed is not None:
                    out.append((weight, *weighed))
        return out

    def _split_weights(
        self, fit: Fit, same: dict[str, split_likelihood.Commit | None] | None = None
    ) -> tuple[list[float], float] | None:
        """Each hypothesis's log likelihood (by graph.order index) and no culprit's, from
        its split of every level-adjusted boot; None: too few boots yet. `same`: commits
        whose boots this fit weighs as already done."""
        e = self.e
        least, _ = self._least(fit.old_mean)
        names, commits = [], []
        for commit in e.boots:
            split = same[commit] if same and commit in same else self._split_commit(commit, fit)
            if split is not None:
                names.append(commit)
                commits.append(split)
        splits, which = e.posterior.splits(names)
        scale = SPLIT_TAU if e.log else SPLIT_TAU * abs(fit.old_mean)
        lost = max(0, len(fit.trends) - 1)  # each host's level but the first took a df
        weighed = split_likelihood.split_loglik(commits, splits, least, scale, lost)
        if weighed is None:
            return None
        by_split, none = weighed
        return [by_split[k] for k in which], none

    def _split_commit(self, commit: str, fit: Fit) -> split_likelihood.Commit | None:
        """The commit's level-adjusted boots as the split likelihood weighs them (None:
        none on a host with references). A probe's mean carries the level's error where
        it was booted; the endpoints' boots are the level's own data."""
        known = self._known(commit, fit)
        if not known:
            return None
        _, sign = self._least(fit.old_mean)
        where = [w for _, w in known]
        left = self._conditioned(commit)
        ends = (self.e.old_end, self.e.new_end)
        extra = 0.0 if commit in ends else fit.level_var(where, left)
        values = [sign * v for v, _ in known]
        return split_likelihood.Commit.of(values, extra, self._scale(commit, fit, where))

    def _all_scores(self, commit: str) -> list[float]:
        """Every boot's score on the job's scale now, the wild ones too (a copy)."""
        boots = self.e.boots.get(commit, [])
        scale = (self.e.log, self.spread)
        kept = self._scored.get(commit)
        if kept is None or kept[0] != scale or len(kept[1]) > len(boots):
            kept = self._scored[commit] = (scale, [])
        kept[1].extend(mean_score(b, self.e.log, self.spread) for b in boots[len(kept[1]) :])
        return list(kept[1])

    def _kept(self, commit: str, each: list[T]) -> list[T]:
        """Of a list with one item a boot of the commit, those of boots not set aside."""
        wild = self.wild.get(commit)
        return [x for i, x in enumerate(each) if i not in wild] if wild else each

    def scores_of(self, commit: str) -> list[float]:
        """The commit's boots' scores on the job's scale now, its wild ones set aside."""
        return self._kept(commit, self._all_scores(commit))

    def _hosts(self, commit: str) -> list[str]:
        """The VM host of each of the commit's boots (its wild ones set aside)."""
        return self._kept(commit, [b.host for b in self.e.boots.get(commit, [])])

    def _times(self, commit: str) -> list[int]:
        """The moment of each of the commit's boots (its wild ones set aside)."""
        return self._kept(commit, self.e.times.get(commit, []))

    def unfit(self) -> str:
        """Why the host is unfit for timing ("" while it is not): its boots keep reading
        wild."""
        wild = sum(len(out) for out in self.wild.values())
        booted = sum(len(bs) for bs in self.e.boots.values())
        if wild < UNFIT_WILD or wild < UNFIT_SHARE * booted:
            return ""
        return (
            f"{wild} of {booted} boots read far off their kernel's others: the host is "
            "unfit for timing (another load on it?)"
        )

    def set_aside(self) -> dict[str, list[int]]:
        """By commit, the places (0 its first boot) of its boots set aside as wild."""
        return {c: sorted(out) for c, out in self.wild.items()}

    def find_wild(self) -> None:
        """Set aside the boots that read WILD_SIGMAS or more, and WILD_FACTOR or more, off
        their kernel's others:
        a commit's own median where it has three boots or more, else the nearer
        endpoint's. The noise figure is robust (pair_sigma), so the wild boots cannot
        hide each other. Judged afresh each time: a
        boot is wild against what its kernel's boots read now."""
        e = self.e
        scores = {c: self._all_scores(c) for c, bs in e.boots.items() if bs}
        centres = {c: statistics.median(vs) for c, vs in scores.items() if len(vs) >= 3}
        sigma = pair_sigma([scores[c] for c in centres])
        ends = [centres[c] for c in (e.old_end, e.new_end) if c in centres]
        self.wild = {}
        if sigma <= 0:
            return

        def far(v: float, c: float) -> bool:
            least = math.log(WILD_FACTOR) if e.log else (WILD_FACTOR - 1) * abs(c)
            return abs(v - c) > max(WILD_SIGMAS * sigma, least)

        for commit, values in scores.items():
            near = [centres[commit]] if commit in centres else ends
            if not near:
                continue
            out = {i for i, v in enumerate(values) if all(far(v, c) for c in near)}
            if out:
                self.wild[commit] = out

    def _host_levels(
        self, raw: dict[str, list[float]], old_mean: float, new_mean: float, sigma: float
    ) -> dict[str, Trend]:
        """Each host's level, fitted to the references it booted. The trend follows the
        endpoints only: a probe's own boots in it would pull the level its way, and its
        verdict with it. A host that has booted one endpoint only has no level yet: fitted
        to that side's boots alone, it would take them exactly to their side's mean and
        make them look noiseless (on a farm of 8, the first boot of each host did, and
        a job said "no difference" after 8 boots); its boots wait until it boots both."""
        by_host = self._reference_residuals(raw, old_mean, new_mean)
        return {
            h: fit_trend(obs, sigma, self.e.clock, slope=None)
            for h, obs in by_host.items()
            if h in self._two_sided()
        }

    def ready(self, pairs: int) -> bool:
        """Whether the endpoints' boots on hosts that booted both give a first noise
        figure: `pairs` boots of each, and as many degrees of freedom left after the
        hosts' levels as `pairs` old-new blocks on one host leave."""
        e = self.e
        self.find_wild()
        two = self._two_sided()
        n = [sum(1 for h in self._hosts(c) if h in two) for c in (e.old_end, e.new_end)]
        return min(n) >= pairs and n[0] + n[1] - 2 - (len(two) - 1) >= 2 * (pairs - 1)

    def _two_sided(self) -> set[str]:
        """The VM hosts that have booted both endpoints."""
        e = self.e
        old, new = (set(self._hosts(c)) for c in (e.old_end, e.new_end))
        return old & new

    def _reference_residuals(
        self, raw: dict[str, list[float]], old_mean: float, new_mean: float
    ) -> dict[str, list[tuple[int, float]]]:
        """By VM host, (clock, score less its side's mean) of each endpoint boot."""
        e = self.e
        by_host: dict[str, list[tuple[int, float]]] = {}
        for c in (e.old_end, e.new_end):
            mean = new_mean if c == e.new_end else old_mean
            for v, t, h in zip(raw[c], self._times(c), self._hosts(c), strict=True):
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
        e = self.e
        by_host: dict[str, list[tuple[int, float]]] = {}
        refs: dict[str, list[tuple[int, float]]] = {}  # the endpoints' alone
        for c, mean in means.items():
            for v, t, h in zip(raw.get(c, []), self._times(c), self._hosts(c), strict=True):
                if h in trends:
                    residual = (t, v - mean - trends[h].at(t)[0])
                    by_host.setdefault(h, []).append(residual)
                    if c in (e.old_end, e.new_end):
                        refs.setdefault(h, []).append(residual)
        out = {}
        for h, trend in trends.items():
            swing = fitted or fit_swing(sorted(by_host.get(h, [])), SWING_PHIS_MOMENT)
            out[h] = replace(trend, swing=swing)
            if swing is not None:
                by_moment, left = swing_means(refs.get(h, []), swing, e.clock)
                out[h] = replace(out[h], swing_mean=by_moment, swing_left=left)
        return out

    def _conditioned(self, commit: str) -> bool:
        """Whether the commit's boots have the references' swing taken off (a probe's)."""
        return commit not in (self.e.old_end, self.e.new_end)

    def _scale(self, commit: str, fit: Fit, where: list[tuple[str, int]]) -> float:
        """A boot's noise variance in sigma^2, on average over the commit's boots at these
        (host, clock)s, each on a host with references (_known): below 1 where the
        references showed the swing."""
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
        e = self.e
        refs: dict[str, list[int]] = {}
        for c in (e.old_end, e.new_end):
            for t, h in zip(self._times(c), self._hosts(c), strict=True):
                if h in fit.trends:  # the side means hold only these hosts' boots
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
        cfg = self.e.config
        higher_better = cfg.better == "higher"
        lower = higher_better if cfg.mode == Mode.REGRESSION.value else not higher_better
        if self.e.log:
            least = -math.log1p(-cfg.min_effect) if lower else math.log1p(cfg.min_effect)
        else:
            least = cfg.min_effect * abs(base)
        return least, -1.0 if lower else 1.0

    def level_bound(self, commit: str) -> bool:
        """Whether the commit's verdict waits on the level more than on its own boots."""
        fit, times = self.fit, self._times(commit)
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

    # --- choosing ---------------------------------------------------------------------
    def worth(self) -> "Callable[[float], float]":
        """What one boot of a commit new-like with probability q tells."""
        separation = self._separation()
        return lambda q: information(q, separation)

    def told(self, q: float, running: int) -> float:
        """What one more boot of a commit tells when `running` boots of it are in flight:
        their mean is sqrt(r + 1) times as far from the other side's."""
        separation = self._separation()
        return tells(q, separation * math.sqrt(running + 1)) - tells(
            q, separation * math.sqrt(running)
        )

    def _separation(self) -> float:
        """How many sigmas of one boot's noise the sides lie apart."""
        fit = self.fit
        assert fit is not None, "choosing before the models"
        return abs(fit.step) / fit.sigma

    # --- the endpoints' difference ----------------------------------------------------
    def effect(self) -> Effect:
        e = self.e
        return effect_of(
            self.adjusted(e.old_end, self.fit), self.adjusted(e.new_end, self.fit), e.log
        )

    def adjusted(self, commit: str, fit: Fit | None) -> list[float]:
        """The commit's scores less its host's level at each boot (no models: as read)."""
        return [v for v, _ in self._known(commit, fit)]

    def _known(self, commit: str, fit: Fit | None) -> list[tuple[float, tuple[str, int]]]:
        """(score less its host's level, (host, clock)) of each boot of the commit on a
        host with references; a level nobody measured tells nothing (no models: all
        boots, as read)."""
        scores = self.scores_of(commit)
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
        return list(zip(self._hosts(commit), self._times(commit), strict=True))

    def ruled_out(self) -> bool:
        """Whether the endpoints' difference rules out a change of the minimum effect or
        more the expected way: the far end of its 95% interval (_far_end) stops short of
        it. A "no difference" that does not is no answer yet."""
        return self._short_of_floor(self._far_end())

    def _short_of_floor(self, far: float | None) -> bool:
        """Whether the far end (_far_end) stops short of the minimum effect."""
        if far is None or self.fit is None:
            return False
        least, sign = self._least(self.fit.old_mean)
        return sign * far < least

    def _far_end(self) -> float | None:
        """The far end, the expected way, of the endpoints' difference's 95% interval (a
        change from fit.old_mean). Each VM host's own old-new
        difference (its level cancels in it) weighed by what it holds, with the noise the
        hosts' levels leave (fit.sigma, fit.df): a host that booted one side more than the
        other tells less (on one host: the plain difference). None: fewer than 2 boots a
        side."""
        e, fit = self.e, self.fit
        if fit is None:
            return None
        by_host: dict[str, tuple[list[float], list[float]]] = {}
        for side, c in enumerate((e.old_end, e.new_end)):
            for v, (host, _) in self._known(c, fit):
                by_host.setdefault(host, ([], []))[side].append(v)
        if min(sum(len(sides[i]) for sides in by_host.values()) for i in (0, 1)) < 2:
            return None
        total, weight = 0.0, 0.0
        for olds, news in by_host.values():
            if olds and news:
                w = 1 / (1 / len(olds) + 1 / len(news))
                total += w * (robust_mean(news) - robust_mean(olds))
                weight += w
        if not weight:
            return None
        _, sign = self._least(fit.old_mean)
        return total / weight + sign * t_quantile(0.975, fit.df) * fit.sigma / math.sqrt(weight)

    def no_difference(self, p_none: float) -> EndpointVerdict:
        e = self.e
        olds, news = self.adjusted(e.old_end, self.fit), self.adjusted(e.new_end, self.fit)
        gate = e.gate_scores(olds, news, exact=False, max_boots=len(olds))
        effect = gate.effect
        if gate.gate == Gate.WRONG_WAY:
            return gate
        far = self._far_end()  # once: ruled_out() would work it out again
        if p_none >= e.level and far is not None and self._short_of_floor(far):
            assert self.fit is not None  # a far end comes from a fit
            bound = relative(far, self.fit.old_mean, e.log)
            return EndpointVerdict(
                Gate.SAME,
                effect,
                f"no difference: {effect.describe()}, {bound:+.1%} at most the expected way "
                f"(each host's level taken out) against the {e.config.min_effect:.1%} "
                f"minimum effect; P(no culprit) {p_none:.1%}",
            )
        return EndpointVerdict(
            Gate.UNDECIDED,
            effect,
            f"cannot decide after {len(olds) + len(news)} endpoint boots: {effect.describe()}, "
            f"P(no culprit) {p_none:.0%}; a change under the {e.config.min_effect:.1%} "
            "minimum effect counts as none",
        )

    # --- reading ----------------------------------------------------------------------
    def model(self) -> Model:
        fit = self.fit
        if fit is None:
            return self.e.endpoint_model()
        return Model(fit.old_mean, fit.old_mean + fit.step, fit.sigma, fit.n_old, fit.n_new)

    def scores(self, commit: str) -> list[float]:
        if self.fit is None:
            return self.e.raw_scores(commit)
        return self.adjusted(commit, self.fit)

    def certainty(self, commit: str) -> float:
        """P(the commit's verdict is right) on all its boots, weighed by today's model."""
        if self.fit is None:
            m = self.model()
            llr = sum(m.llr(s) for s in self.scores(commit))
            return 1.0 / (1.0 + math.exp(-abs(llr)))
        q = self.e.posterior.p_new(commit)
        return max(q, 1 - q)

    def level_adjusted(self, scores: list[float]) -> list[float]:
        """Scores of boots run now (after the job: a verification) on the job's scale."""
        if self.fit is None:
            return list(scores)
        level = self.fit.trend.at(self.e.clock)[0]
        return [s - level for s in scores]

    def judge(self, scores: list[float]) -> Decision | None:
        """Wald's test on a commit's boot scores so far: a verdict, or None for another
        boot. A counter's commits in the range; any job's kernels outside it (the culprit
        reverted)."""
        if not scores:
            return None
        e = self.e
        m = e.model()
        llr = sum(m.llr(s) for s in scores)
        n = len(scores)
        if abs(llr) >= e.threshold:
            return Decision(State.NEW if llr > 0 else State.OLD, n, llr, firm=True)
        position = m.position(robust_mean(scores))
        note = f"between the endpoints ({position:.2f}) after {n} boots"
        if not e.noisy_ends and n >= 2:  # a counter: more boots say nothing new
            return Decision(State.SKIP, n, llr, note)
        if n < e.config.max_commit_boots:
            return None
        if abs(llr) >= math.log(19):  # at the cap, a lean of 95:5 still counts
            note = f"after {n} boots, at {1 / (1 + math.exp(-abs(llr))):.0%}"
            return Decision(State.NEW if llr > 0 else State.OLD, n, llr, note)
        return Decision(State.SKIP, n, llr, note)

    def pairs_verification(self) -> bool:
        """On a host that swings: a verification's boots in a row share a swing as a
        commit's do, and the boot beside each of its base kernel shows how far."""
        return bool(self.fit is not None and self.fit.trend.swing)  # a counter has no fit

    def paired(self, score: float, beside: float, new_side: bool) -> float:
        """The verification boot's score less what the swing gave it: the base kernel
        beside it read its side's mean at the level now, and what it read beyond that
        the verification boot shares by the swing's correlation from one boot to the
        next (a regression on it: the noise left is 1 - that squared of a boot's)."""
        fit = self.fit
        swing = fit.trend.swing if fit is not None else None
        if fit is None or swing is None:
            return score
        mean = fit.old_mean + (fit.step if new_side else 0.0)
        return score - swing.next_boot * (beside - fit.trend.at(self.e.clock)[0] - mean)

    def words(self) -> str:
        """The endpoints' difference in words beside the effect: none for a metric."""
        return ""

    def notes(self) -> list[str]:
        e, fit = self.e, self.fit
        if fit is None:
            return []
        boots = [b for some in e.boots.values() for b in some]
        ends = sum(len(e.boots[c]) for c in (e.old_end, e.new_end))
        notes = [
            f"{ends} boots of the endpoints interleaved with {len(boots) - ends} of other "
            f"commits (references, {ends / max(len(boots), 1):.0%} of the boots)"
        ]
        if beside := sum(b.beside for b in boots):
            notes.append(
                f"{len(boots)} boots at {len(boots) - beside} moments: {beside} duets, two "
                "guests booted at once on one VM host (--duets)"
            )
        levels = [fit.trend.at(t)[0] for t in range(1, e.clock + 1)]
        if levels:
            low, high = min(levels), max(levels)
            swing = relative(high - low, fit.old_mean, e.log)
            notes.append(
                f"host level moved {swing:.1%} during the job (a trend fitted to the references)"
            )
        if swung := fit.trend.swing:
            size = relative(math.sqrt(swung.var), fit.old_mean, e.log)
            notes.append(
                f"host speed swings by {size:.1%} for a few boots at a time (correlated "
                f"{swung.phi:.2f} from one boot to the next): boots of one commit close "
                "together count partly as one"
            )
        for t in fit.trend.jumps:
            notes.append(
                f"host level jumped at boot {t} (two references in a row far off the same way)"
            )
        if wild := sum(len(out) for out in self.wild.values()):
            notes.append(
                f"{wild} boot(s) read more than {WILD_SIGMAS:g} sigmas off their kernel's "
                "others, probably a disturbed host: set aside (shown, not weighed)"
            )
        return notes
