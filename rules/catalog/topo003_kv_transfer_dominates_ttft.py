"""TOPO003 (kv-transfer-dominates-ttft): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/TOPO003/.

In a disaggregated deployment a request's prompt is computed on a prefill instance, its KV moved by a connector to
a decode instance, and its tokens generated there. The first token waits for all three. The connector times each
transfer (vLLM's NIXL connector on the decode side, SGLang on the prefill side): when that time is most of TTFT,
the fix is the transfer, not the prefill.
"""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import (
    Histograms,
    HistogramWindow,
    KvTransferWindow,
    ServerMetricsData,
    ServerPeersData,
)
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import ms
from triage.rules.registry import rule


def _instances(ctx: Context) -> list[tuple[str, ServerMetricsData]]:
    out = [("server_metrics", ctx.need(ServerMetricsData))]
    for i, p in enumerate(ctx.seen(ServerPeersData).peers):
        if p.metrics is not None:
            out.append((f"server_peers.peers[{i}].metrics", p.metrics))
    return out


def _mean_s(h: HistogramWindow | None) -> float | None:
    return h.mean_s if h is not None else None


def _hists(m: ServerMetricsData) -> Histograms:
    return m.histograms or Histograms()


def _fix(ctx: Context, t: KvTransferWindow) -> Fix:
    cmds, note = engine_flags({"kv_cache_dtype_fp8": None}, ctx.engine())
    rate = (f"The transfers moved {t.gbytes_per_s:.1f} GB/s while running: compare that" if t.gbytes_per_s
            else "Compare the connector's throughput")
    return Fix("Make the transfer faster or smaller. " + rate + " with the link between the prefill and decode "
               "instances (NVLink, RDMA NIC or TCP); far below it, the connector is on a slow transport or path. Put prefill and decode in the same NVLink domain or on RDMA, and halve the bytes with an FP8 KV "
               "cache." + note, cmds)


@rule("TOPO003", "kv-transfer-dominates-ttft", Severity.HIGH, ("server_metrics",), RuleDoc(
    what="In a disaggregated deployment, the KV connector's mean transfer time is >= 50% of the mean TTFT (and "
         ">= 50 ms), read from the connector's own histogram on this instance or a peer given with --url. HIGH when "
         "the mean TTFT is >= 200 ms; below that an opportunity (LOW).",
    why="The first token cannot come before the prompt's KV reaches the decode instance: most of TTFT is then "
        "the move, and a faster prefill (more GPUs, chunking) would not shorten it.",
    example="server_metrics.kv_transfer.time_mean_s = 0.9, server_metrics.histograms.ttft_s.mean_s = 1.25",
    fix="Speed up or shrink the transfer: the transport the connector uses (NVLink, RDMA, not TCP), where the "
        "instances sit, and an FP8 KV cache (`--kv-cache-dtype fp8`) for half the bytes.",
    references=("claim:vllm.nixl-xfer-metrics", "claim:vllm.nixl-bytes-metric", "claim:vllm.nixl-records-on-receive",
                "claim:vllm.nixl-record-transfer", "claim:sglang.kv-transfer-timed-on-prefill", "docs/TOPOLOGIES.md"),
), thresholds=("TOPO003.min_share_of_ttft", "TOPO003.min_transfer_ms", "TOPO003.slow_ttft_ms"))
def topo003(ctx: Context) -> Hit | None:
    instances = _instances(ctx)
    transfer = next(((k, m.kv_transfer) for k, m in instances
                     if m.kv_transfer is not None and m.kv_transfer.time_mean_s is not None), None)
    if transfer is None:
        raise MissingInput("no KV connector transfer metrics on this instance or its peers (not disaggregated, "
                           "or the connector exports none)")
    ttft = next(((k, v) for k, m in instances if (v := _mean_s(_hists(m).ttft_s)) is not None and m.role != "prefill"),
                None)
    if ttft is None:
        raise MissingInput("no TTFT histogram over the window on a decode or unified instance")
    key, t = transfer
    share = t.time_mean_s / ttft[1] if ttft[1] > 0 else 0.0
    if share < ctx.th("TOPO003.min_share_of_ttft") or t.time_mean_s * 1000 < ctx.th("TOPO003.min_transfer_ms"):
        return None
    prefill = next(((k, v) for k, m in instances if (v := _mean_s(_hists(m).prefill_time_s)) is not None), None)
    evidence: dict[str, Any] = {f"{key}.kv_transfer.connector": t.connector,
                                f"{key}.kv_transfer.time_mean_s": round(t.time_mean_s, 4),
                                f"{key}.kv_transfer.time_p90_s": t.time_p90_s,
                                f"{key}.kv_transfer.gbytes_per_s": t.gbytes_per_s,
                                f"{key}.kv_transfer.failures_delta": t.failures_delta,
                                f"{ttft[0]}.histograms.ttft_s.mean_s": round(ttft[1], 4)}
    against = ""
    if prefill is not None:
        evidence[f"{prefill[0]}.histograms.prefill_time_s.mean_s"] = round(prefill[1], 4)
        where = "this instance" if prefill[0] == "server_metrics" else prefill[0].split(".metrics")[0]
        against = f", against {ms(prefill[1] * 1000)} of prefill time on {where}"
    failed = f" {t.failures_delta:g} transfers failed in the window." if t.failures_delta else ""
    slow = ttft[1] * 1000 >= ctx.th("TOPO003.slow_ttft_ms")    # quiet when healthy: a fast TTFT is an opportunity
    return Hit(
        title="The KV transfer between prefill and decode is most of TTFT",
        message=f"Each KV transfer ({t.connector}, timed on the {t.side} side) took {ms(t.time_mean_s * 1000)} on "
                f"average (p90 {ms((t.time_p90_s or t.time_mean_s) * 1000)}), {share:.0%} of the "
                f"{ms(ttft[1] * 1000)} mean TTFT{against}: the first token waits for the move, not the "
                f"prefill.{failed}",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=min(0.9, share) if slow else 0.1,
        severity=None if slow else Severity.LOW, kind=FindingKind.PROBLEM if slow else FindingKind.OPPORTUNITY,
        fix=_fix(ctx, t))
