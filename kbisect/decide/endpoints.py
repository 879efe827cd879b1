"""Do the endpoints differ? Different, same, or unknown: measure more (as Pinpoint asks).

Different needs both significance (Yuen's trimmed t-test on per-boot scores, robust to an
outlier boot) and an effect of at least the minimum; same needs the effect's 90%
interval inside +-minimum (two one-sided tests: equivalence). Anything else boots both
endpoints more, at looks of 3, 6, 12... boots each, until the cap, where the answer is
"cannot decide" with the bound on the effect rather than a guess. The expected direction
comes from the manifest's `better`: a regression makes the new endpoint worse.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from kbisect.contract import BuildResult, TestResult, TestStatus
from kbisect.decide.evidence import Boot, relative
from kbisect.decide.stats import robust_mean, t_quantile, t_sf2, trimmed, winsorized_ss

LOOKS = (3, 6, 12, 24, 48, 96)  # boots per endpoint at which the test is read; then doubling
ALPHA = 0.01  # per look; the culprit's own verdicts guard A/A ranges too


class Gate(StrEnum):
    DIFFERENT = "different"
    SAME = "same"
    MORE = "more"  # boot both endpoints again
    UNDECIDED = "undecided"  # the cap is reached
    WRONG_WAY = "wrong-way"  # they differ, but the new endpoint is the better one


@dataclass(frozen=True)
class Effect:
    """new vs old as a fraction of old (-0.2: 20% lower), with its 95% interval."""

    value: float
    low: float
    high: float
    p: float
    boots_old: int
    boots_new: int

    def describe(self) -> str:
        if self.low == self.high:
            return f"{self.value:+.1%} (no noise; {boots(self.boots_old + self.boots_new)})"
        return (
            f"{self.value:+.1%} (95% CI {self.low:+.1%} to {self.high:+.1%}; "
            f"{self.boots_old}+{self.boots_new} boots)"
        )


def boots(n: int) -> str:
    return f"{n} boot" if n == 1 else f"{n} boots"


@dataclass(frozen=True)
class EndpointVerdict:
    gate: Gate
    effect: Effect
    message: str
    want: int = 0  # boots per endpoint to reach before the next look (gate MORE)


def noise_free(boots: Sequence[Boot]) -> bool:
    """Repetitions that all agree, boot after boot: a counter, not a timing."""
    medians = {b.samples[0] for b in boots}
    agree = all((b.exact or len(b.samples) >= 2) and b.spread == 0 for b in boots)
    return agree and len(medians) == 1


@dataclass(frozen=True)
class Pooled:
    """The noise of more groups than the two compared (a sweep's whole series: one
    testcase on one host): the winsorized variance pooled over every group, steadier
    than two small groups' own, and its degrees of freedom."""

    winsorized_var: float
    df: float

    @classmethod
    def of(cls, groups: Sequence[Sequence[float]]) -> "Pooled | None":
        used = [g for g in groups if len(trimmed(g)) >= 2]
        if not used:
            return None
        ss = sum(winsorized_ss(g) for g in used)
        return cls(ss / sum(len(g) - 1 for g in used), sum(len(trimmed(g)) - 1 for g in used))


def _mean_var(xs: Sequence[float], ss: float) -> tuple[float, int]:
    """The variance of a 20% trimmed mean from the winsorized sum of squares `ss`, and the
    count it stands on (Yuen)."""
    h = len(trimmed(xs))
    return ss / (h * (h - 1)), h


def _yuen(
    old: Sequence[float], new: Sequence[float], pooled: Pooled | None = None
) -> tuple[float, float, float]:
    """Difference of 20% trimmed means (new - old), its standard error and df, from each
    group's own winsorized variance (Yuen) or from the `pooled` one."""
    parts = []
    for xs in (old, new):
        ss = winsorized_ss(xs) if pooled is None else pooled.winsorized_var * (len(xs) - 1)
        parts.append(_mean_var(xs, ss))
    var = sum(d for d, _ in parts)
    if pooled is not None:
        df = pooled.df
    else:
        df = var**2 / sum(d * d / (h - 1) for d, h in parts) if var > 0 else 1.0
    return robust_mean(new) - robust_mean(old), math.sqrt(var), df


def effect_of(
    old: Sequence[float], new: Sequence[float], log: bool, pooled: Pooled | None = None
) -> Effect:
    base = robust_mean(old)
    if min(len(old), len(new)) < 2:
        d = robust_mean(new) - base
        return Effect(relative(d, base, log), -math.inf, math.inf, 1.0, len(old), len(new))
    d, se, df = _yuen(old, new, pooled)
    if se == 0:
        e = relative(d, base, log)
        return Effect(e, e, e, 0.0 if d else 1.0, len(old), len(new))
    q = t_quantile(0.975, df)
    return Effect(
        value=relative(d, base, log),
        low=relative(d - q * se, base, log),
        high=relative(d + q * se, base, log),
        p=t_sf2(d / se, df),
        boots_old=len(old),
        boots_new=len(new),
    )


@dataclass(frozen=True)
class Level:
    """One kernel's level from its boots' scores: the 20% trimmed mean the gate compares,
    its 95% interval (Yuen's, one sample; None with fewer than 2 boots), the lowest and
    highest boot."""

    centre: float
    low: float | None
    high: float | None
    lowest: float
    highest: float
    boots: int


def level_of(scores: Sequence[float]) -> Level | None:
    """The level of a kernel's boots (None for none)."""
    if not scores:
        return None
    centre = robust_mean(scores)
    low = high = None
    if len(trimmed(scores)) >= 2:
        var, h = _mean_var(scores, winsorized_ss(scores))
        se = math.sqrt(var)
        q = t_quantile(0.975, h - 1) if se else 0.0
        low, high = centre - q * se, centre + q * se
    return Level(centre, low, high, min(scores), max(scores), len(scores))


def _equivalent(
    old: Sequence[float],
    new: Sequence[float],
    log: bool,
    margin: float,
    pooled: Pooled | None = None,
) -> bool:
    """The 90% interval of the effect inside +-margin: no difference at 95% (TOST)."""
    if min(len(old), len(new)) < 3:
        return False
    d, se, df = _yuen(old, new, pooled)
    q = t_quantile(0.95, df)
    base = robust_mean(old)
    return -margin < relative(d - q * se, base, log) and relative(d + q * se, base, log) < margin


def next_look(n: int) -> int:
    """The next number of boots per endpoint at which the test is read, after n."""
    look = next((k for k in LOOKS if k > n), LOOKS[-1])
    while look <= n:
        look *= 2
    return look


def compare_scores(
    so: Sequence[float],
    sn: Sequence[float],
    *,
    exact: bool,
    log: bool,
    worse_is_lower: bool,
    regression: bool,
    min_effect: float,
    max_boots: int,
    alpha: float = ALPHA,
    pooled: Pooled | None = None,
) -> EndpointVerdict:
    """The gate on the endpoints' per-boot scores (`exact`: a counter's); `alpha` is the
    significance per look (a sweep splits ALPHA over its pairs); `pooled`, the noise of
    more kernels than these two (a sweep's series)."""
    effect = effect_of(so, sn, log, pooled)
    n = min(len(so), len(sn))
    size = abs(effect.value)
    if exact:
        effect = replace(effect, low=effect.value, high=effect.value, p=0.0 if size else 1.0)
    if exact or (effect.p < alpha and size >= min_effect):
        if size < min_effect:
            return EndpointVerdict(Gate.SAME, effect, f"no difference: {effect.value:+.1%}")
        worse = (effect.value < 0) == worse_is_lower
        if worse != regression:
            return EndpointVerdict(Gate.WRONG_WAY, effect, effect.describe())
        return EndpointVerdict(Gate.DIFFERENT, effect, effect.describe())
    if _equivalent(so, sn, log, min_effect, pooled):
        return EndpointVerdict(
            Gate.SAME,
            effect,
            f"no difference: {effect.value:+.1%}, within +-{min_effect:.0%} at 95% "
            f"({len(so)}+{len(sn)} boots)",
        )
    cap = max_boots
    if n >= cap:
        bound = max(abs(effect.low), abs(effect.high))
        if effect.p < alpha:
            why = f"it is {effect.describe()}, under the {min_effect:.0%} minimum"
        else:
            why = f"the effect is under {bound:.0%} at 95% ({effect.describe()})"
        return EndpointVerdict(
            Gate.UNDECIDED, effect, f"cannot decide after {len(so) + len(sn)} boots: {why}"
        )
    return EndpointVerdict(Gate.MORE, effect, effect.describe(), want=min(next_look(n), cap))


def endpoint_problem(word: str, commit: str, build: BuildResult, test: TestResult | None) -> str:
    """Why an endpoint cannot anchor the bisection ('' when it can): the user passed it."""
    if not build.ok:
        return (
            f"the {word} endpoint {commit[:12]} does not build: {build.error} "
            f"(log: {build.log}); pass a {word} revision that builds"
        )
    if test is None or test.status != TestStatus.OK:
        error, console = (test.error, test.console) if test else ("no test ran", "")
        return (
            f"the {word} endpoint {commit[:12]} failed: {error} "
            f"(console: {console}); pass a {word} revision that runs the testcase"
        )
    return ""
