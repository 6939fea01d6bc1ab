"""The non-batching verdict from the load alone: throughput flat under 4x the concurrency."""
from __future__ import annotations

import dataclasses

from tests.factories import level
from triage.rules.scaling import throughput_scaling


def _lv(c: int, tps: float, valid: bool = True):
    lv = level(c, [10.0] * 4, [5.0] * 4, [100.0] * 4, tps)
    return dataclasses.replace(lv, client=dataclasses.replace(lv.client, valid=valid))


def test_flat_throughput_is_measured_against_the_ideal():
    # transformers serve without continuous batching, as tried live: 26.8 -> 24.3 tok/s from c=1 to c=4
    s = throughput_scaling([_lv(1, 26.8), _lv(4, 24.3)])
    assert s is not None and s.concurrency_x == 4
    assert round(s.throughput_x, 2) == 0.91 and s.efficiency < 0.25


def test_batching_engine_scales():
    s = throughput_scaling([_lv(1, 40.0), _lv(4, 150.0), _lv(16, 520.0)])
    assert s.high.concurrency == 16 and s.efficiency > 0.8


def test_needs_a_pair_four_times_apart_of_valid_levels():
    assert throughput_scaling([_lv(1, 40.0), _lv(2, 70.0)]) is None
    assert throughput_scaling([_lv(1, 40.0), _lv(8, 45.0, valid=False)]) is None
    assert throughput_scaling([]) is None
    assert throughput_scaling([_lv(2, 40.0), _lv(8, 41.0)]).concurrency_x == 4


def test_a_saturating_batching_engine_is_judged_by_its_best_level():
    # KV thrashing at c=64 drags throughput back down; c=16 showed the engine batches.
    s = throughput_scaling([_lv(1, 120.0), _lv(4, 440.0), _lv(16, 1500.0), _lv(64, 150.0)])
    assert s.high.concurrency == 16 and s.efficiency > 0.5
