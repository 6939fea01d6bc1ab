"""The interval of a relative change, from scipy.stats.

- Per-request samples (many values a side): a two-sample bootstrap (`scipy.stats.bootstrap`, percentile
  method) of 100·(stat(cand) − stat(base)) / stat(base), the statistic itself (p99 of TTFT, say).
- Repeats (`--repeat K`, a few values a side): Welch's t interval of the difference of the means
  (`scipy.stats.ttest_ind(equal_var=False)`), divided by the base mean.

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
    """(95% CI of 100·(mean(cand) − mean(base)) / mean(base), one-sided p that cand's mean is larger), from
    Welch's t. None with fewer than MIN_REPEATS finite values a side or a zero base mean."""
    b, c = _finite(base), _finite(cand)
    if b.size < MIN_REPEATS or c.size < MIN_REPEATS:
        return None
    mb = float(b.mean())
    if mb == 0:
        return None
    diff = float(c.mean()) - mb
    if float(b.var(ddof=1)) == 0 and float(c.var(ddof=1)) == 0:
        pct = 100.0 * diff / abs(mb)
        return Interval(pct, pct, "welch-t", b.size, c.size), (0.0 if diff > 0 else 1.0)
    two_sided = stats.ttest_ind(c, b, equal_var=False)
    ci = two_sided.confidence_interval(CONFIDENCE)
    p_greater = float(stats.ttest_ind(c, b, equal_var=False, alternative="greater").pvalue)
    return Interval(100.0 * float(ci.low) / abs(mb), 100.0 * float(ci.high) / abs(mb), "welch-t",
                    b.size, c.size), p_greater


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
