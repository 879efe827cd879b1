"""The host's level over a job, fitted to reference boots. Pure.

Each reference boot (an endpoint, or a commit whose side is settled) says how far the host
read from that side's mean at its time. The level is a random walk through the job's
boots (a local-level state-space model), filtered forward and smoothed back (Kalman and
Rauch-Tung-Striebel), so a probe is judged against the references nearest it in time.
Slow drift is the walk's own motion. A single wild reference moves it little: its
innovation is clipped (Huber). Two or three references in a row far off the same way are a jump:
the walk is let free there, so a lasting shift is followed at once, and a disturbed
stretch is a jump down and a jump back up.
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
class Trend:
    level: list[float]  # by clock, 0 .. the last boot
    var: list[float]  # its variance
    jumps: list[int] = field(default_factory=list)  # clocks where it jumped
    memory: float = 1.0  # boots over which its errors stay correlated

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


def flat(clocks: int) -> Trend:
    """No trend: a host whose level is not followed."""
    return Trend([0.0] * (clocks + 1), [0.0] * (clocks + 1))


WALKS = (0.0, 0.01, 0.02, 0.04, 0.08)  # how fast the level may move, in sigmas a boot
WALK_EVIDENCE = 3.0  # log likelihood a moving level must gain over a still one


def fit_trend(
    observations: Sequence[tuple[int, float]], sigma: float, clocks: int, walk: float | None = None
) -> Trend:
    """The level at clocks 0..`clocks` from (clock, residual) observations, each with
    noise `sigma`; the level moves by `walk` (a standard deviation) per boot, or, when
    None, by the one of WALKS x sigma that explains the observations best (a steady host
    then gets a flat level, known from all its references)."""
    by_clock: dict[int, list[float]] = {}
    for clock, value in observations:
        by_clock.setdefault(clock, []).append(value)
    if walk is None:
        # A moving level must explain the references better by WALK_EVIDENCE than a
        # still one: chance wiggles would cost every probe precision.
        fits = [
            _log_likelihood(_smooth(by_clock, sigma, clocks, w * sigma, set())[1])
            - (WALK_EVIDENCE if w else 0.0)
            for w in WALKS
        ]
        walk = WALKS[fits.index(max(fits))] * sigma
    jumps: set[int] = set()
    # A reference every `gap` boots: the walk's errors last about as long as it takes the
    # walk to move as far as the references' noise averaged over that time.
    gap = (clocks + 1) / max(len(observations), 1)
    memory = sigma * math.sqrt(gap) / walk if walk > 0 else float(clocks + 1) * 4
    for _ in range(MAX_JUMPS + 1):
        trend, innovations = _smooth(by_clock, sigma, clocks, walk, jumps)
        jump = _first_jump(innovations, jumps)
        if jump is None:
            break
        jumps.add(jump)
    return replace(trend, memory=max(memory, 1.0))


def _smooth(
    by_clock: dict[int, list[float]], sigma: float, clocks: int, walk: float, jumps: set[int]
) -> tuple[Trend, list[tuple[int, float, float]]]:
    r = sigma * sigma
    q = walk * walk
    m, p = 0.0, (START_SIGMAS * sigma) ** 2
    m_pred, p_pred, m_filt, p_filt = [], [], [], []
    innovations: list[tuple[int, float, float]] = []  # (clock, z, its variance)
    for t in range(clocks + 1):
        if t:
            p += q + ((JUMP_SIGMAS * sigma) ** 2 if t in jumps else 0.0)
        m_pred.append(m)
        p_pred.append(p)
        for y in by_clock.get(t, ()):
            s = p + r
            z = (y - m) / math.sqrt(s)
            innovations.append((t, z, s))
            gain = p / s
            m += gain * max(-HUBER_Z, min(HUBER_Z, z)) * math.sqrt(s)
            p *= 1 - gain
        m_filt.append(m)
        p_filt.append(p)
    level, var = list(m_filt), list(p_filt)
    for t in range(clocks - 1, -1, -1):
        c = p_filt[t] / p_pred[t + 1] if p_pred[t + 1] > 0 else 0.0
        level[t] = m_filt[t] + c * (level[t + 1] - m_pred[t + 1])
        var[t] = p_filt[t] + c * c * (var[t + 1] - p_pred[t + 1])
    return Trend(level, var, sorted(jumps)), innovations


def _log_likelihood(innovations: list[tuple[int, float, float]]) -> float:
    return sum(-0.5 * (math.log(s) + z * z) for _, z, s in innovations)


def _first_jump(innovations: list[tuple[int, float, float]], jumps: set[int]) -> int | None:
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
