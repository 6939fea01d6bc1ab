"""Fleet size from Little's law, and cost per token against an API price.

One replica (a TP group) keeps B sequences running. With chunked prefill, prompt chunks ride in the
same steps as decode tokens, so over a request's life the replica spends
    memory:  output_len x (decode step bytes at batch B) / B / bandwidth
    compute: (prefill FLOPs + output_len x decode FLOPs per token) / FLOP/s
and a request costs g = max(memory, compute) replica-seconds (each divided by --mbu / --mfu). The
replica serves at most 1/g requests per second, and by Little's law (L = lambda x W) each request
then spends W = B x g seconds in the system. Seed 003's capacity formula,
required_GPUs = target_QPS x E2E / per-GPU in-flight capacity, is the same law.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from triage.plan import assumptions as A
from triage.plan.speed import DecodePoint, PrefillPoint


@dataclass(frozen=True, slots=True)
class Fleet:
    batch_per_replica: int
    gpus_per_replica: int
    replica_requests_per_s: float
    replica_output_tokens_per_s: float
    e2e_s_at_full_load: float          # Little's law: B / replica_requests_per_s
    ttft_s_unloaded: float
    tpot_ms_at_batch: float            # decode step alone, no prefill riding along
    tpot_ms_at_full_load: float        # (E2E - TTFT) / output_len once prefills share the steps
    limited_by: str                    # what saturates the replica: memory | compute
    target_qps: float | None
    target_concurrency: int | None
    e2e_s_at_target: float | None      # at the per-replica load the target puts on the fleet
    in_flight_at_target: float | None  # Little's law: target_qps x e2e_s_at_target
    headroom_frac: float
    num_replicas: int | None
    num_gpus: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def request_cost_s(prefill: PrefillPoint, decode: DecodePoint, output_len: int, mbu: float,
                   mfu: float) -> tuple[float, str]:
    """Replica-seconds one request costs at batch B, and whether memory or compute sets it."""
    b = decode.batch_size
    memory_s = output_len * decode.memory_s / b / mbu
    compute_s = (prefill.compute_s + output_len * decode.compute_s / b) / mfu
    return max(memory_s, compute_s), "memory" if memory_s >= compute_s else "compute"


def e2e_at_load(requests_per_s: float, ttft_s: float, prefill_compute_s: float, output_len: int,
                step_parts_s: Callable[[int], tuple[float, float]], max_batch: int, e2e_full_s: float) -> float:
    """E2E latency of a replica offered `requests_per_s`, by fixed-point iteration of Little's law.

    The batch is b = lambda x W. A decode step of b sequences takes max(memory, compute), where the
    compute side also carries the prompts arriving meanwhile (chunked prefill): with rho = lambda x
    prefill compute time, compute stretches by 1 / (1 - rho). `step_parts_s(b)` gives the expected
    (memory_s, compute_s) of one step. At saturation this is the full-load figure.
    """
    rho = requests_per_s * prefill_compute_s
    if rho >= 1.0:
        return e2e_full_s

    def step(b: int) -> float:
        memory_s, compute_s = step_parts_s(b)
        return max(memory_s, compute_s / (1.0 - rho))

    w = ttft_s + output_len * step(1)
    for _ in range(200):
        b = min(max_batch, max(1, math.ceil(requests_per_s * w)))
        w_next = ttft_s + output_len * step(b)
        if abs(w_next - w) <= 1e-6 * w:
            break
        w = 0.5 * (w + w_next)      # damped: the batch is an integer and can flip between two values
    if requests_per_s * w > max_batch:
        return e2e_full_s
    return min(w, e2e_full_s)


def size_fleet(prefill: PrefillPoint, decode: DecodePoint, output_len: int, tp: int,
               qps: float | None, concurrency: int | None, mbu: float, mfu: float,
               step_parts_s: Callable[[int], tuple[float, float]],
               headroom_frac: float = A.DEFAULT_FLEET_HEADROOM_FRAC) -> Fleet:
    b = decode.batch_size
    t_prefill = prefill.expected_ttft_ms / 1e3
    g, limited_by = request_cost_s(prefill, decode, output_len, mbu, mfu)
    replica_qps = 1.0 / g
    e2e = max(b * g, t_prefill + output_len * decode.step_s_expected)
    needed: list[int] = []
    if qps is not None:
        needed.append(math.ceil(qps * (1 + headroom_frac) / replica_qps - 1e-9))
    if concurrency is not None:
        needed.append(math.ceil(concurrency * (1 + headroom_frac) / b - 1e-9))
    replicas = max(needed) if needed else None
    e2e_target = None
    if qps is not None and replicas:
        e2e_target = e2e_at_load(qps / replicas, t_prefill, prefill.compute_s / mfu, output_len,
                                 step_parts_s, b, e2e)
    return Fleet(
        batch_per_replica=b, gpus_per_replica=tp, replica_requests_per_s=replica_qps,
        replica_output_tokens_per_s=replica_qps * output_len, e2e_s_at_full_load=e2e,
        ttft_s_unloaded=t_prefill, tpot_ms_at_batch=decode.expected_tpot_ms,
        tpot_ms_at_full_load=(e2e - t_prefill) / output_len * 1e3, limited_by=limited_by,
        target_qps=qps, target_concurrency=concurrency, e2e_s_at_target=e2e_target,
        in_flight_at_target=None if e2e_target is None else qps * e2e_target, headroom_frac=headroom_frac,
        num_replicas=replicas, num_gpus=None if replicas is None else replicas * tp,
    )


@dataclass(frozen=True, slots=True)
class Cost:
    price_per_gpu_hour: float
    replica_cost_per_hour: float
    cost_per_mtok_at_batch: float      # a replica kept full at the planned batch
    cost_per_mtok_at_bs1: float        # a replica serving one request at a time
    fleet_cost_per_hour: float | None
    cost_per_mtok_at_target: float | None
    api_price_per_mtok: float | None
    break_even_output_tokens_per_s: float | None   # per replica: above this, self-hosting is cheaper
    break_even_qps: float | None
    break_even_mtok_per_month: float | None
    break_even_reachable: bool | None  # False: even a full replica costs more per token than the API
    api_cost_per_hour_at_target: float | None
    savings_per_month_at_target: float | None      # negative: the API is cheaper

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _per_mtok(cost_per_hour: float, tokens_per_s: float) -> float:
    return cost_per_hour / (tokens_per_s * 3600.0) * 1e6


def cost_of(fleet: Fleet, bs1_output_tokens_per_s: float, output_len: int, price_per_gpu_hour: float,
            api_price_per_mtok: float | None) -> Cost:
    replica_hour = price_per_gpu_hour * fleet.gpus_per_replica
    fleet_hour = None if fleet.num_gpus is None else fleet.num_gpus * price_per_gpu_hour
    target_tok_s = None if fleet.target_qps is None else fleet.target_qps * output_len
    at_target = None if fleet_hour is None or not target_tok_s else _per_mtok(fleet_hour, target_tok_s)
    be_tok_s = be_qps = be_month = reachable = api_hour = savings = None
    if api_price_per_mtok is not None and api_price_per_mtok > 0:
        be_tok_s = replica_hour / api_price_per_mtok * 1e6 / 3600.0
        be_qps = be_tok_s / output_len
        be_month = replica_hour * A.HOURS_PER_MONTH / api_price_per_mtok
        reachable = be_tok_s <= fleet.replica_output_tokens_per_s
        if target_tok_s is not None and fleet_hour is not None:
            api_hour = target_tok_s * 3600.0 / 1e6 * api_price_per_mtok
            savings = (api_hour - fleet_hour) * A.HOURS_PER_MONTH
    return Cost(
        price_per_gpu_hour=price_per_gpu_hour, replica_cost_per_hour=replica_hour,
        cost_per_mtok_at_batch=_per_mtok(replica_hour, fleet.replica_output_tokens_per_s),
        cost_per_mtok_at_bs1=_per_mtok(replica_hour, bs1_output_tokens_per_s),
        fleet_cost_per_hour=fleet_hour, cost_per_mtok_at_target=at_target,
        api_price_per_mtok=api_price_per_mtok, break_even_output_tokens_per_s=be_tok_s,
        break_even_qps=be_qps, break_even_mtok_per_month=be_month, break_even_reachable=reachable,
        api_cost_per_hour_at_target=api_hour, savings_per_month_at_target=savings,
    )
