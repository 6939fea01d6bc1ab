"""HIST001 (latency-jump-against-history): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/HIST001/.

`triage diagnose --prometheus URL --against 7d` compares the current window of the engine's metrics
with the same window a week (or `--against`) earlier. A latency jump with more traffic (more requests, or
longer prompts) is capacity: the fix is more replicas or admission control. A jump with the same traffic
means the server or the hardware changed: a deploy, a flag, a throttling GPU. The rule says which, with
every other signal that moved.
"""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import PromHistoryData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.fmt import ms, pct
from triage.rules.registry import rule

# The latency the rule judges, in order of preference (TGI has no TTFT histogram).
LATENCIES = (("ttft_p99_s", "TTFT p99"), ("queue_time_p99_s", "queue time p99"), ("e2e_p99_s", "end-to-end p99"))
TRAFFIC = (("requests_per_s", "requests/s"), ("prompt_tokens_per_request", "prompt tokens per request"))
# Server and hardware signals listed when they moved (name, label, change that counts as moved).
SERVER_SIDE = (("kv_cache_usage_mean", "KV cache usage"), ("requests_waiting_mean", "waiting requests"),
               ("preemptions_per_s", "preemptions/s"), ("tpot_p99_s", "TPOT p99"),
               ("generation_tokens_per_s", "output tokens/s"), ("gpu_sm_clock_mhz_mean", "GPU SM clock"),
               ("gpu_power_w_mean", "GPU power"), ("gpu_temp_c_max", "GPU temperature"),
               ("gpu_clock_event_reasons_max", "GPU clock-event reasons bitmask"))


def _ratio(now: float | None, then: float | None) -> float | None:
    if now is None or then is None or then <= 0:
        return None
    return now / then


@rule("HIST001", "latency-jump-against-history", Severity.HIGH, ("prometheus_history",), RuleDoc(
    what="In the engine's Prometheus history, TTFT p99 (TGI: queue time or end-to-end p99) in the current "
         "window is >= 1.25x the same window --against earlier (default 7 days). Attributed to traffic when "
         "requests/s or prompt tokens per request rose >= 1.2x; otherwise to the server or the hardware.",
    why="An SRE paged for TTFT needs to know what changed. More traffic on the same fleet is a capacity "
        "question; the same traffic served slower means something in the server or under it changed.",
    example="prometheus_history.now.ttft_p99_s = 1.9, then.ttft_p99_s = 0.95, requests_per_s 20 -> 20.5",
    fix="Traffic: add replicas or admit less (rate-limit at the gateway). Not traffic: compare the deploys and "
        "flags of the two windows and the GPU clock/throttle signals listed, then `triage diagnose --url` on "
        "an affected instance.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide': compare current values with a 7-day offset to catch regressions",
                "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide' (request patterns: long-prompt spikes inflate TTFT)", "claim:vllm.ttft-histogram",
                "claim:sglang.ttft-histogram", "claim:tgi.request-queue-duration", "claim:tgi.request-duration"),
), thresholds=("HIST001.min_latency_rise_x", "HIST001.min_latency_rise_ms", "HIST001.traffic_rise_x",
               "HIST001.moved_x"))
def hist001(ctx: Context) -> Hit | None:
    h = ctx.need(PromHistoryData)
    now, then = h.now or {}, h.then or {}
    if not any(v is not None for v in then.values()):
        raise MissingInput("the comparison window has no series (Prometheus keeps less history than --against)")
    measured = [(key, label, now.get(key), then.get(key)) for key, label in LATENCIES
                if now.get(key) is not None and then.get(key) is not None]
    if not measured:
        raise MissingInput("no latency histogram in both windows (TTFT, queue time or end-to-end)")
    key, label, lat_now, lat_then = measured[0]
    rise = _ratio(lat_now, lat_then)
    if rise is None or rise < ctx.th("HIST001.min_latency_rise_x") or \
            (lat_now - lat_then) * 1000 < ctx.th("HIST001.min_latency_rise_ms"):
        return None
    days = (h.against_s or 0) / 86400
    when = f"{days:g} day{'s' if days != 1 else ''} earlier" if days >= 1 else f"{(h.against_s or 0) / 3600:g} h earlier"
    evidence: dict[str, Any] = {f"prometheus_history.now.{key}": lat_now, f"prometheus_history.then.{key}": lat_then,
                                "derived.latency_rise_x": round(rise, 2)}
    traffic = []
    for tkey, tlabel in TRAFFIC:
        r = _ratio(now.get(tkey), then.get(tkey))
        if r is not None:
            evidence[f"prometheus_history.now.{tkey}"] = now.get(tkey)
            evidence[f"prometheus_history.then.{tkey}"] = then.get(tkey)
            traffic.append((tlabel, r))
    if not traffic:
        raise MissingInput("the request rate and prompt lengths were not in the history: the jump cannot be "
                           "attributed")
    moved = []
    for skey, slabel in SERVER_SIDE:
        r = _ratio(now.get(skey), then.get(skey))
        if r is not None and (r >= ctx.th("HIST001.moved_x") or r <= 1 / ctx.th("HIST001.moved_x")):
            moved.append(f"{slabel} {_change(r)}")
            evidence[f"prometheus_history.now.{skey}"] = now.get(skey)
            evidence[f"prometheus_history.then.{skey}"] = then.get(skey)
    head = f"{label} rose {_change(rise)} ({ms(lat_then * 1000)} -> {ms(lat_now * 1000)}) against the same window {when}"
    traffic_text = ", ".join(f"{t} {_change(r)}" for t, r in traffic)
    grew = [(t, r) for t, r in traffic if r >= ctx.th("HIST001.traffic_rise_x")]
    if grew:
        evidence["derived.explained_by"] = "traffic"
        return Hit(
            title=f"{label} jumped, and the traffic explains it",
            message=f"{head}; traffic grew ({traffic_text}). The same servers are serving more work"
                    + (f"; also moved: {', '.join(moved)}." if moved else "."),
            evidence=evidence, severity=Severity.MEDIUM, certainty=Certainty.LIKELY, impact=0.5,
            fix=Fix("Capacity, not a regression: add replicas (triage plan sizes them), or admit less at the gateway; "
                    "for longer prompts, keep chunked prefill on so they do not stall decodes.", ()),
        )
    evidence["derived.explained_by"] = "server or hardware"
    return Hit(
        title=f"{label} jumped with no change in traffic",
        message=f"{head}, while traffic did not grow ({traffic_text}): the server or the hardware changed"
                + (f". What moved: {', '.join(moved)}." if moved else "; no other signal in the history moved."),
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.6,
        fix=Fix("Compare the two windows' deploys, engine version and flags; check the GPU signals above "
                "(clocks, power, throttle reasons); then run `triage diagnose --url` on an affected instance.", ()),
    )


def _change(ratio: float) -> str:
    return f"+{pct(ratio - 1)}" if ratio >= 1 else f"-{pct(1 - ratio)}"
