"""Is a difference real or noise? A bootstrap confidence interval of the relative change of the
statistic itself (p99 of TTFT, say), and a one-sided Mann–Whitney U test of the whole distribution.
A tail percentile of a few hundred requests rests on a handful of values, so its interval is wide;
the rank test sees a shift of the whole distribution with far fewer samples.

`--repeat K` gives K values per level (one per repeat), usually fewer than the bootstrap needs. For 2 to 7
values a side, Welch's t interval of the difference of the means and its one-sided t-test are used instead."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_SAMPLES = 8            # fewer per side: no bootstrap or rank test (Welch's t from 2 repeats)
MIN_REPEATS = 2            # fewer per side and no spread can be estimated: fall back to thresholds
ALPHA = 0.05               # one-sided significance level of the Mann–Whitney test
NUM_RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    low_pct: float
    high_pct: float
    method: str            # "bootstrap" or "welch-t"


def statistic(stat: str) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic along the last axis: mean, max, or a percentile (p50, p99, ...)."""
    if stat == "mean":
        return lambda a: a.mean(axis=-1)
    if stat == "max":
        return lambda a: a.max(axis=-1)
    q = float(stat.lstrip("p"))
    return lambda a: np.percentile(a, q, axis=-1)


def bootstrap_change_pct(base: Sequence[float], cand: Sequence[float], stat: str,
                         seed: int = 0) -> Interval | None:
    """95% CI of 100·(stat(cand) − stat(base)) / stat(base), resampling both sides independently."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    if b.size < MIN_SAMPLES or c.size < MIN_SAMPLES:
        return None
    rng = np.random.default_rng(seed)
    fn = statistic(stat)
    sb = fn(b[rng.integers(0, b.size, size=(NUM_RESAMPLES, b.size))])
    sc = fn(c[rng.integers(0, c.size, size=(NUM_RESAMPLES, c.size))])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = 100.0 * (sc - sb) / sb
    rel = rel[np.isfinite(rel)]
    if rel.size < NUM_RESAMPLES // 2:
        return None
    alpha = (1.0 - CONFIDENCE) / 2.0
    low, high = np.quantile(rel, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high), "bootstrap")


def mann_whitney_p_greater(base: Sequence[float], cand: Sequence[float]) -> float | None:
    """One-sided Mann–Whitney U p-value that `cand` tends to be larger than `base`
    (normal approximation with tie correction; fine for the ≥ 8 samples per side we require)."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    n1, n2 = c.size, b.size
    if n1 < MIN_SAMPLES or n2 < MIN_SAMPLES:
        return None
    both = np.concatenate([c, b])
    order = both.argsort(kind="mergesort")
    ranks = np.empty(both.size, dtype=float)
    sorted_vals = both[order]
    # Average ranks over ties.
    _, first, counts = np.unique(sorted_vals, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    tie_term = float((counts**3 - counts).sum()) / (n * (n - 1))
    sigma = np.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (u - n1 * n2 / 2.0 - 0.5) / sigma       # continuity correction
    return float(0.5 * math.erfc(z / math.sqrt(2.0)))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
            last = d * c
        if abs(last - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def student_t_ppf(q: float, df: float) -> float:
    """The t with P(T <= t) = q (q > 0.5), by bisection on the survival function."""
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - q:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if student_t_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def welch_change_pct(base: Sequence[float], cand: Sequence[float]) -> tuple[Interval, float] | None:
    """(95% CI of 100·(mean(cand) − mean(base)) / mean(base), one-sided p that cand's mean is larger), from
    Welch's t; for a few repeats a side. None with fewer than MIN_REPEATS finite values a side."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    if b.size < MIN_REPEATS or c.size < MIN_REPEATS:
        return None
    mb, mc = float(b.mean()), float(c.mean())
    if mb == 0:
        return None
    vb, vc = float(b.var(ddof=1)) / b.size, float(c.var(ddof=1)) / c.size
    diff, se = mc - mb, math.sqrt(vb + vc)
    if se == 0:  # no spread on either side: the difference is exactly what was measured
        pct = 100.0 * diff / abs(mb)
        return Interval(pct, pct, "welch-t"), (0.0 if diff > 0 else 1.0)
    df = (vb + vc) ** 2 / (vb * vb / (b.size - 1) + vc * vc / (c.size - 1))
    half = student_t_ppf(1.0 - (1.0 - CONFIDENCE) / 2.0, df) * se
    interval = Interval(100.0 * (diff - half) / abs(mb), 100.0 * (diff + half) / abs(mb), "welch-t")
    return interval, student_t_sf(diff / se, df)
