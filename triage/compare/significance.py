"""The interval of a relative change, from scipy.stats.

- Per-request samples (many values a side): a two-sample bootstrap (`scipy.stats.bootstrap`, percentile
  method) of 100·(stat(cand) − stat(base)) / stat(base), the statistic itself (p99 of TTFT, say).
- Repeats (`--repeat K`, a few values a side): Welch's t interval on the ratio scale: `scipy.stats.ttest_ind(
  equal_var=False)` of the logs of the per-repeat values gives an interval of log(cand / base), mapped back to
  a relative change. A relative change of a positive quantity cannot be below −100%, and this interval never
  is (an interval of the difference of the means divided by the base mean could be, with 2 or 3 repeats).
  With a zero or negative value on a side there is no log: the interval of the difference of the means is
  used, and for values that cannot be negative its low end is clipped at −100% (method "welch-t, clipped").

A one-sided p-value (Mann–Whitney U for samples, Welch's t for repeats) is kept for the record; it does not
decide anything: the interval alone does (see bench_diff).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_SAMPLES = 8            # fewer per side: no bootstrap (Welch's t from 2 repeats)
MIN_REPEATS = 2            # fewer per side and no spread can be estimated
NUM_RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    low_pct: float
    high_pct: float
    method: str            # "bootstrap" or "welch-t"
    n_base: int = 0        # values a side it rests on (requests or repeats)
    n_cand: int = 0


def statistic(stat: str) -> Callable[..., np.ndarray]:
    """The statistic along `axis`: mean, max, or a percentile (p50, p99, ...)."""
    if stat == "mean":
        return lambda a, axis=-1: np.mean(a, axis=axis)
    if stat == "max":
        return lambda a, axis=-1: np.max(a, axis=axis)
    q = float(stat.lstrip("p"))
    return lambda a, axis=-1: np.percentile(a, q, axis=axis)


def _finite(values: Sequence[float]) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    return a[np.isfinite(a)]


def bootstrap_change_pct(base: Sequence[float], cand: Sequence[float], stat: str, seed: int = 0,
                         transform: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> Interval | None:
    """95% CI of 100·(stat(cand) − stat(base)) / stat(base), resampling both sides independently.
    `transform(stat_base, stat_cand)` replaces the relative change (e.g. a throughput from mean latencies)."""
    b, c = _finite(base), _finite(cand)
    if b.size < MIN_SAMPLES or c.size < MIN_SAMPLES:
        return None
    fn = statistic(stat)

    def rel(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        sb, sc = fn(x, axis=axis), fn(y, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            return transform(sb, sc) if transform else 100.0 * (sc - sb) / sb

    if not np.isfinite(rel(b, c)):
        return None
    if np.ptp(b) == 0 and np.ptp(c) == 0:          # no spread: the change is exactly what was measured
        point = float(rel(b, c))
        return Interval(point, point, "bootstrap", b.size, c.size)
    res = stats.bootstrap((b, c), rel, n_resamples=NUM_RESAMPLES, paired=False, vectorized=True,
                          confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return Interval(low, high, "bootstrap", b.size, c.size)


def mann_whitney_p_greater(base: Sequence[float], cand: Sequence[float]) -> float | None:
    """One-sided Mann–Whitney U p-value that `cand` tends to be larger than `base`."""
    b, c = _finite(base), _finite(cand)
    if b.size < MIN_SAMPLES or c.size < MIN_SAMPLES:
        return None
    return float(stats.mannwhitneyu(c, b, alternative="greater").pvalue)


def welch_change_pct(base: Sequence[float], cand: Sequence[float]) -> tuple[Interval, float] | None:
    """(95% CI of the relative change of cand against base in %, one-sided p that cand is larger), from Welch's
    t: on the logs of the values (a ratio, so the low end stays above −100%) when every value is positive,
    else on the difference of the means divided by the base mean. None with fewer than MIN_REPEATS finite
    values a side or a zero base mean."""
    b, c = _finite(base), _finite(cand)
    if b.size < MIN_REPEATS or c.size < MIN_REPEATS or float(b.mean()) == 0:
        return None
    if float(b.var(ddof=1)) == 0 and float(c.var(ddof=1)) == 0:
        diff = float(c.mean() - b.mean())
        pct = 100.0 * diff / abs(float(b.mean()))
        return Interval(pct, pct, "welch-t", b.size, c.size), (0.0 if diff > 0 else 1.0)
    if b.min() > 0 and c.min() > 0:
        low, high, p_greater = _welch(np.log(b), np.log(c))
        return Interval(100.0 * math.expm1(low), 100.0 * math.expm1(high), "welch-t", b.size, c.size), p_greater
    low, high, p_greater = _welch(b, c)
    mb = abs(float(b.mean()))
    low_pct, high_pct, method = 100.0 * low / mb, 100.0 * high / mb, "welch-t"
    if b.min() >= 0 and c.min() >= 0 and low_pct < -100.0:     # a count or a rate cannot fall below zero
        low_pct, method = -100.0, "welch-t, clipped"
    return Interval(low_pct, high_pct, method, b.size, c.size), p_greater


def _welch(b: np.ndarray, c: np.ndarray) -> tuple[float, float, float]:
    """(95% CI of mean(c) − mean(b), one-sided p that c's mean is larger), Welch's t."""
    ci = stats.ttest_ind(c, b, equal_var=False).confidence_interval(CONFIDENCE)
    p_greater = float(stats.ttest_ind(c, b, equal_var=False, alternative="greater").pvalue)
    return float(ci.low), float(ci.high), p_greater


def needed_to_settle(interval: Interval, worse_low: float, worse_high: float, limit_pct: float) -> int | None:
    """About how many values a side (requests or repeats) would shrink an interval that straddles the limit
    until it stops straddling, if the change stays where it is: the half-width goes as 1/sqrt(n). None when
    the estimate sits on the limit itself (no sample size settles that)."""
    centre, half = (worse_low + worse_high) / 2.0, (worse_high - worse_low) / 2.0
    gap = abs(centre - limit_pct)
    n = max(interval.n_base, interval.n_cand, 1)
    if gap < 1e-9 or half <= 0:
        return None
    return max(n + 1, math.ceil(n * (half / gap) ** 2))
