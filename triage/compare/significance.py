"""Is a difference real or noise? A bootstrap confidence interval of the relative change of the
statistic itself (p99 of TTFT, say), and a one-sided Mann–Whitney U test of the whole distribution.
A tail percentile of a few hundred requests rests on a handful of values, so its interval is wide;
the rank test sees a shift of the whole distribution with far fewer samples."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MIN_SAMPLES = 8            # fewer per side and a test means little: fall back to thresholds
ALPHA = 0.05               # one-sided significance level of the Mann–Whitney test
NUM_RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    low_pct: float
    high_pct: float
    method: str            # "bootstrap"


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
