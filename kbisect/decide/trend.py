"""The host's level over a job, fitted to reference boots. Pure.

Each reference boot (an endpoint, or a commit whose side is settled) says how far the host
read from that side's mean at its time. The level is a random walk through the job's
boots (a local-level state-space model), filtered forward and smoothed back (Kalman and
Rauch-Tung-Striebel), so a probe is judged against the references nearest it in time.
Slow drift is the walk's own motion. A single wild reference moves it little: its
innovation is clipped (Huber). Two or three references in a row far off the same way are a jump:
the walk is let free there, so a lasting shift is followed at once, and a disturbed
stretch is a jump down and a jump back up.

A host may also swing: its speed wanders for a minute or two and comes back (real labs
here: reference boots one apart correlate 0.3-0.8). That is no level: it is noise
correlated from boot to boot, an AR(1) fitted to the residuals about the level of every
boot whose side is known (fit_swing), so that boots of one commit booted close together
count partly as one. Since revision 8 the swing at each moment is also read off the
references around it (swing_means) and taken off the other boots there.

The motion (still, a walk, a slope) is chosen by evidence, and early in a job a drift
reads like a still level; since revision 9 the trend also keeps the other motions the
references leave likely, with their weights (Trend.rivals), for the engine to weigh.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

HUBER_Z = 2.5  # innovations beyond this many sigmas count as this many
JUMP_Z = 3.5  # 2-3 references in a row this far off together, one way: a jump
MAX_JUMPS = 12
JUMP_SIGMAS = 10.0  # the freedom a jump gets, in boot sigmas
START_SIGMAS = 10.0  # the level before any reference: unknown


@dataclass(frozen=True)
class Model:
    """How the level may move: a random walk of `walk` a boot, on a steady slope or not."""

    walk: float
    slope: bool = False


@dataclass(frozen=True)
class Swing:
    """An AR(1) part of a boot's noise: `var` (absolute) correlated `phi` a boot, of
    `total`, a boot's whole noise variance."""

    phi: float
    var: float
    total: float

    @property
    def next_boot(self) -> float:
        """The correlation of two boots in a row."""
        return self.phi * self.var / self.total if self.total > 0 else 0.0


@dataclass(frozen=True)
class Trend:
    level: list[float]  # by clock, 0 .. the last boot
    var: list[float]  # its variance
    jumps: list[int] = field(default_factory=list)  # clocks where it jumped
    memory: float = 1.0  # boots over which its errors stay correlated
    model: Model = Model(0.0)  # the motion the references chose
    references: int = 0  # how many it was fitted to
    swing: Swing | None = None  # the swing the boots showed (fit_swing), if any
    # The swing at each clock as the references around it show it (swing_means), and the
    # variance left about that; empty: not estimated (before revision 8)
    swing_mean: list[float] = field(default_factory=list)
    swing_left: list[float] = field(default_factory=list)
    # The other motions tried that the references leave likely (RIVAL_LEAST or more), each
    # with its weight among all tried; the chosen motion holds the rest
    rivals: tuple[tuple[Model, float], ...] = ()

    def at(self, clock: int) -> tuple[float, float]:
        """The level at `clock` and its variance; after the last boot, the last level
        with the walk's uncertainty growing (a verification boot after the job)."""
        if not self.level:
            return 0.0, 0.0
        last = len(self.level) - 1
        if clock <= last:
            return self.level[max(clock, 0)], self.var[max(clock, 0)]
        return self.level[last], self.var[last]

    def mean_var(self, clocks: Sequence[int]) -> float:
        """The variance of the level's mean error over boots at these clocks: errors
        close in time are one error, errors far apart (beyond its memory) average out."""
        if not clocks:
            return 0.0
        total, carry, last = 0.0, 0.0, None
        for t in sorted(clocks):
            a = math.sqrt(self.at(t)[1])
            if last is not None:
                carry *= math.exp(-(t - last) / self.memory)
            total += a * a + 2 * a * carry
            carry += a
            last = t
        return total / len(clocks) ** 2

    def swing_at(self, clock: int) -> tuple[float, float]:
        """The swing's estimate at `clock` from the references and the variance left
        about it; after the last boot it fades back to none as the swing forgets."""
        swing = self.swing
        if swing is None or not self.swing_mean:
            return 0.0, swing.var if swing else 0.0
        last = len(self.swing_mean) - 1
        t = max(clock, 0)
        if t <= last:
            return self.swing_mean[t], self.swing_left[t]
        fade = swing.phi ** (t - last)
        known = swing.var - self.swing_left[last]
        return self.swing_mean[last] * fade, swing.var - known * fade * fade

    def swing_var(self, clocks: Sequence[int], left: bool = False) -> float:
        """What the swing adds to the variance of the mean of boots at these clocks,
        beyond each boot's own noise: the covariance of every pair (phi ** apart); with
        `left`, of what the references left unknown of it (the pairs' covariance taken
        as phi ** apart of their variances left: no less than it is)."""
        swing = self.swing
        if swing is None or len(clocks) < 2:
            return 0.0
        pairs, carry, last = 0.0, 0.0, None
        for t in sorted(clocks):
            scale = math.sqrt(self.swing_at(t)[1] / swing.var) if left and swing.var else 1.0
            if last is not None:
                carry *= swing.phi ** (t - last)
                pairs += carry * scale
            carry += scale
            last = t
        return 2 * swing.var * pairs / len(clocks) ** 2


# The swings tried: correlation from one boot to the next, and the share of a reference's
# residual variance that swings (the rest is each boot's own).
SWING_PHIS = (0.5, 0.7, 0.85, 0.95)
SWING_SHARES = (0.3, 0.6, 0.9)
# Revision 8's also: a part that boots at one moment share (two guests side by side, a
# duet) and no longer (phi 0: boots a moment apart are independent)
SWING_PHIS_MOMENT = (0.0, *SWING_PHIS)
SWING_EVIDENCE = 3.0  # log likelihood a swing must gain over independent boots
SWING_LEAST = 8  # boots before a swing is looked for

WALKS = (0.0, 0.01, 0.02, 0.04, 0.08)  # how fast the level may move, in sigmas a boot
WALK_EVIDENCE = 3.0  # log likelihood a moving level must gain over a still one
SLOPE_EVIDENCE = 3.0  # and a steady slope over none
SLOPE_SIGMAS = 3.0  # a slope's prior: it may carry the level this many sigmas over the job
# A motion weighed beside the chosen one where it holds this much of them all, the
# evidence margins above taken as prior odds (Levels._rivals)
RIVAL_LEAST = 0.01


def fit_trend(
    observations: Sequence[tuple[int, float]],
    sigma: float,
    clocks: int,
    walk: float | None = None,
    slope: bool | None = None,
) -> Trend:
    """The level at clocks 0..`clocks` from (clock, residual) observations, each with
    noise `sigma`. The level moves by `walk` (a standard deviation) per boot, on a steady
    slope when `slope`; when either is None, the model among WALKS x sigma, with and
    without a slope, that explains the observations best (a steady host then gets a flat
    level, known from all its references; a host that warms or cools steadily, a slope,
    which a walk follows only with many references)."""
    by_clock: dict[int, list[float]] = {}
    for clock, value in observations:
        by_clock.setdefault(clock, []).append(value)
    walks = WALKS if walk is None else (walk / sigma if sigma else 0.0,)
    models = [Model(w * sigma, s) for w in walks for s in (False, True)]

    # A moving level must explain the references better by WALK_EVIDENCE than a still one
    # (and a slope by SLOPE_EVIDENCE): chance wiggles would cost every probe precision.
    def evidence(m: Model) -> float:
        fit = _log_likelihood(_forward(by_clock, sigma, clocks, m, set(), keep=False)[2])
        return fit - (WALK_EVIDENCE if m.walk else 0.0) - (SLOPE_EVIDENCE if m.slope else 0.0)

    scored = {m: evidence(m) for m in models}
    allowed = [m for m in scored if slope in (None, m.slope)]
    model = max(allowed, key=scored.__getitem__)
    # Jumps are found against the best level without a slope: early on, a slope's wide
    # prior makes every innovation look small, and a shift at boot 12 would pass for one.
    level_only = max((m for m in scored if not m.slope), key=scored.__getitem__)
    jumps: set[int] = set()
    # A reference every `gap` boots: the walk's errors last about as long as it takes the
    # walk to move as far as the references' noise averaged over that time.
    gap = (clocks + 1) / max(len(observations), 1)
    w = model.walk
    memory = sigma * math.sqrt(gap) / w if w > 0 else float(clocks + 1) * 4
    for _ in range(MAX_JUMPS + 1):
        trend, innovations = _smooth(by_clock, sigma, clocks, level_only, jumps)
        jump = _first_jump(innovations, jumps)
        if jump is None:
            break
        jumps.add(jump)
    if model.slope:
        trend = _smooth(by_clock, sigma, clocks, model, jumps)[0]
    return replace(
        trend,
        memory=max(memory, 1.0),
        model=model,
        references=len(observations),
        rivals=_rivals({m: scored[m] for m in allowed}, model),
    )


def _rivals(scored: dict[Model, float], chosen: Model) -> tuple[tuple[Model, float], ...]:
    """The motions other than `chosen` that hold RIVAL_LEAST or more of the posterior
    over all of `scored` (log evidence with the margins as prior odds), likeliest first."""
    top = max(scored.values())
    weights = {m: math.exp(v - top) for m, v in scored.items()}
    total = math.fsum(weights.values())
    held = [(m, w / total) for m, w in weights.items() if m != chosen and w / total >= RIVAL_LEAST]
    return tuple(sorted(held, key=lambda mw: -mw[1]))


def fit_swing(
    residuals: Sequence[tuple[int, float]], phis: Sequence[float] = SWING_PHIS
) -> Swing | None:
    """The swing among `phis` x SWING_SHARES that explains these (clock, residual)s,
    in clock order, better than independent boots by SWING_EVIDENCE; None if none does.
    The residuals' own spread is the scale: the noise figure pools the spread within
    commits, and boots of one commit in a row share a swing, so it holds less of it."""
    if len(residuals) < SWING_LEAST:
        return None
    total = math.fsum(r * r for _, r in residuals) / len(residuals)
    if total <= 0:
        return None
    best, most = None, _swing_loglik(residuals, 0.0, 0.0, total) + SWING_EVIDENCE
    for phi in phis:
        for share in SWING_SHARES:
            fit = _swing_loglik(residuals, phi, share * total, total)
            if fit > most:
                best, most = Swing(phi, share * total, total), fit
    return best


def swing_means(
    residuals: Sequence[tuple[int, float]], swing: Swing, clocks: int
) -> tuple[list[float], list[float]]:
    """The swing at every clock 0..`clocks` from these (clock, residual)s of references,
    and the variance left about it: a Kalman filter and smoother over the AR(1), each
    reference seeing it through its own noise (total - var)."""
    phi, var = swing.phi, swing.var
    own = max(swing.total - var, 1e-9 * swing.total)
    by_clock: dict[int, list[float]] = {}
    for clock, value in residuals:
        by_clock.setdefault(clock, []).append(value)
    m, p = 0.0, var
    predicted: list[tuple[float, float]] = []
    filtered: list[tuple[float, float]] = []
    for t in range(clocks + 1):
        if t:
            m, p = phi * m, phi * phi * p + var * (1 - phi * phi)
        predicted.append((m, p))
        for r in by_clock.get(t, ()):
            gain = p / (p + own)
            m, p = m + gain * (r - m), p - gain * p
        filtered.append((m, p))
    means, left = [m for m, _ in filtered], [p for _, p in filtered]
    for t in range(clocks - 1, -1, -1):
        (fm, fp), (pm, pp) = filtered[t], predicted[t + 1]
        back = fp * phi / pp if pp > 0 else 0.0
        means[t] = fm + back * (means[t + 1] - pm)
        left[t] = max(fp + back * back * (left[t + 1] - pp), 0.0)
    return means, left


def _swing_loglik(
    residuals: Sequence[tuple[int, float]], phi: float, var: float, total: float
) -> float:
    """The log likelihood of the residuals as an AR(1) of variance `var` and lag-1
    correlation `phi` plus independent noise (the rest of `total`): a Kalman filter."""
    own = total - var
    x, p, last, out = 0.0, var, None, 0.0
    for t, r in residuals:
        if last is not None:
            decay = phi ** (t - last)
            x, p = decay * x, decay * decay * p + var * (1 - decay * decay)
        s = p + own
        out -= 0.5 * (math.log(s) + (r - x) ** 2 / s)
        gain = p / s
        x, p = x + gain * (r - x), p - gain * p
        last = t
    return out


Matrix = tuple[float, float, float]  # a symmetric 2x2: (level, covariance, slope)
State = tuple[tuple[float, float], Matrix]  # (level, slope) and its covariance
Innovation = tuple[int, float, float]  # (clock, z, its variance)


def _forward(
    by_clock: dict[int, list[float]],
    sigma: float,
    clocks: int,
    model: Model,
    jumps: set[int],
    keep: bool = True,
) -> tuple[list[State], list[State], list[Innovation]]:
    """The Kalman filter's forward pass over the state (level, slope): its predictions and
    filtered states by clock (empty unless `keep`: a model's evidence needs only the
    innovations), and the innovations."""
    r = sigma * sigma
    q = model.walk**2
    # Without a slope its variance stays at a speck, so the algebra stays 2x2 throughout.
    slope_var = (SLOPE_SIGMAS * sigma / (clocks + 1)) ** 2 if model.slope else 1e-30
    # Plain floats, not tuples: this loop is most of a bisection's decision time.
    x0, x1 = 0.0, 0.0  # level, slope
    a, b, c = (START_SIGMAS * sigma) ** 2, 0.0, slope_var  # their covariance
    jump_var = (JUMP_SIGMAS * sigma) ** 2
    preds: list[State] = []
    filts: list[State] = []
    innovations: list[Innovation] = []
    for t in range(clocks + 1):
        if t:
            x0 += x1
            a, b = a + 2 * b + c + (q + (jump_var if t in jumps else 0.0)), b + c
        if keep:
            preds.append(((x0, x1), (a, b, c)))
        for y in by_clock.get(t, ()):
            s = a + r
            root = math.sqrt(s)
            z = (y - x0) / root
            innovations.append((t, z, s))
            k0, k1 = a / s, b / s
            e = max(-HUBER_Z, min(HUBER_Z, z)) * root
            x0, x1 = x0 + k0 * e, x1 + k1 * e
            a, b, c = a - k0 * a, b - k0 * b, c - k1 * b
        if keep:
            filts.append(((x0, x1), (a, b, c)))
    return preds, filts, innovations


def _smooth(
    by_clock: dict[int, list[float]], sigma: float, clocks: int, model: Model, jumps: set[int]
) -> tuple[Trend, list[Innovation]]:
    """Kalman forward and Rauch-Tung-Striebel back over the state (level, slope)."""
    preds, filts, innovations = _forward(by_clock, sigma, clocks, model, jumps)
    level = [f[0][0] for f in filts]
    var = [f[1][0] for f in filts]
    xs, ps = filts[-1]
    for t in range(clocks - 1, -1, -1):
        (fx, fp), (px, pp) = filts[t], preds[t + 1]
        a, b, c = fp
        pa, pb, pc = pp
        det = pa * pc - pb * pb
        ia, ib, ic = pc / det, -pb / det, pa / det
        # C = P_filt F' P_pred^-1, where P_filt F' = [[a + b, b], [b + c, c]]
        c00, c01 = (a + b) * ia + b * ib, (a + b) * ib + b * ic
        c10, c11 = (b + c) * ia + c * ib, (b + c) * ib + c * ic
        d0, d1 = xs[0] - px[0], xs[1] - px[1]
        xs = (fx[0] + c00 * d0 + c01 * d1, fx[1] + c10 * d0 + c11 * d1)
        sa, sb, sc = ps[0] - pa, ps[1] - pb, ps[2] - pc
        # C D C' for the symmetric D = (sa, sb, sc)
        t00 = c00 * (c00 * sa + c01 * sb) + c01 * (c00 * sb + c01 * sc)
        t01 = c00 * (c10 * sa + c11 * sb) + c01 * (c10 * sb + c11 * sc)
        t11 = c10 * (c10 * sa + c11 * sb) + c11 * (c10 * sb + c11 * sc)
        ps = (a + t00, b + t01, c + t11)
        level[t], var[t] = xs[0], max(ps[0], 0.0)
    return Trend(level, var, sorted(jumps)), innovations


def _log_likelihood(innovations: list[Innovation]) -> float:
    return sum(-0.5 * (math.log(s) + z * z) for _, z, s in innovations)


def _first_jump(innovations: list[Innovation], jumps: set[int]) -> int | None:
    """The clock of the first of 2 or 3 innovations in a row that lean the same way,
    each by 1.5 sigmas or more, and together by JUMP_Z (their mean, in its own sigmas)."""
    for i, (t, _, _) in enumerate(innovations):
        if t in jumps:
            continue
        for width in (2, 3):
            run = [z for _, z, _ in innovations[i : i + width]]
            if len(run) < width or min(abs(z) for z in run) < 1.5:
                break
            if (all(z > 0 for z in run) or all(z < 0 for z in run)) and abs(sum(run)) / math.sqrt(
                width
            ) > JUMP_Z:
                return t
    return None
