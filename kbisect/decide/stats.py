"""Small statistics for the decision engine: Student's t and robust summaries.

Pure Python (the workflow sandbox has no SciPy): the t distribution through the
regularized incomplete beta function, evaluated by its continued fraction.
"""

import math
import statistics
from collections.abc import Sequence


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| >= |t|) of Student's t with df degrees of freedom."""
    if df <= 0:
        return 1.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The p-quantile (p > 0.5) of Student's t, by bisection on the two-sided tail."""
    tail = 2.0 * (1.0 - p)
    lo, hi = 0.0, 1.0
    while t_sf2(hi, df) > tail:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if t_sf2(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def t_logpdf(z: float, df: float) -> float:
    """log density of the standard Student t at z (outliers cost little: heavy tails)."""
    return (
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(z * z / df)
    )


def trimmed(values: Sequence[float], fraction: float = 0.2) -> list[float]:
    """The values sorted, without `fraction` of them at each end."""
    s = sorted(values)
    k = int(len(s) * fraction)
    return s[k : len(s) - k] if k else s


def robust_mean(values: Sequence[float]) -> float:
    """A 20% trimmed mean: the mean for small samples, outlier-proof for larger ones."""
    return statistics.fmean(trimmed(values))


def winsorized_ss(values: Sequence[float], fraction: float = 0.2) -> float:
    """Sum of squared deviations after winsorizing `fraction` at each end."""
    s = sorted(values)
    k = int(len(s) * fraction)
    if k:
        s = [s[k]] * k + s[k : len(s) - k] + [s[len(s) - k - 1]] * k
    m = statistics.fmean(s)
    return sum((v - m) ** 2 for v in s)


def log_phi(x: float) -> float:
    """log of the standard normal CDF, also far in its lower tail."""
    if x > -5:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2)))
    return -0.5 * x * x - math.log(-x) - 0.5 * math.log(2 * math.pi)
