"""A LogRead (triage/engines/log_read.py) as the `logs` payload's evidence fields: events with the phase they
struck in, the periodic stats lines as a series, the preemption rate from the log's own time stamps, the layers
offloaded, and the config line as server_config fields (through the engine's own flag map). Redacted."""
from __future__ import annotations

from typing import Any

from triage.core.log_text import sizes_bytes
from triage.core.redact import redact_text
from triage.engines import get
from triage.engines.log_facts import Hit
from triage.engines.log_read import LogRead, phase_at
from triage.probes.server_config import flag_table, parse_flags

EVENT_FACTS = ("kv_below_max_len", "kv_estimated_max_len", "no_cache_memory", "startup_failure", "oom",
               "preemption", "retraction", "nccl_warn", "nccl_error", "nccl_timeout")
MAX_EVENTS_PER_FACT = 20
MAX_STATS = 200
_TRUE = ("true", "1", "yes")


def _int(value: float | None) -> int | None:
    return int(value) if value is not None else None


def _first_size(text: str | None) -> float | None:
    found = sizes_bytes(text)
    return found[0] if found else None


def _event(hit: Hit, fact: str, phase: str | None) -> dict[str, Any]:
    v, t = hit.values, hit.texts
    return {"fact": fact, "phase": phase, "values": dict(v) or None,
            "texts": {k: redact_text(x)[:200] for k, x in t.items()} or None,
            "max_model_len": _int(v.get("max_model_len")), "kv_tokens": _int(v.get("kv_tokens")),
            "kv_needed_gib": v.get("kv_needed_gib"), "kv_available_gib": v.get("kv_available_gib"),
            "batch_tokens": _int(v.get("prefill_tokens")), "sequences": _int(v.get("dummy_requests")),
            "alloc_bytes": _first_size(t.get("alloc")), "gpu_total_bytes": _first_size(t.get("total")),
            "free_bytes": _first_size(t.get("free")),
            "line_no": hit.line_no, "at_s": hit.at_s, "line": redact_text(hit.line)[:300], "claim": hit.claim}


def _tokens_that_fit(events: list[dict[str, Any]]) -> None:
    """V1 states the tokens that fit on the line after its KV error (the estimate), else only GiB figures: the
    error's `kv_tokens` from the estimate, or in proportion to the GiB."""
    estimate = next((e["values"]["estimated_max_len"] for e in events if e["fact"] == "kv_estimated_max_len"
                     and e["values"] and "estimated_max_len" in e["values"]), None)
    for e in events:
        if e["fact"] != "kv_below_max_len" or e["kv_tokens"] is not None:
            continue
        if estimate is not None:
            e["kv_tokens"] = int(estimate)
        elif e["kv_needed_gib"] and e["kv_available_gib"] is not None and e["max_model_len"]:
            e["kv_tokens"] = int(e["max_model_len"] * e["kv_available_gib"] / e["kv_needed_gib"])


def _events(read: LogRead, order: tuple[str, ...]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    events, counts = [], {}
    for hit in read.hits:
        fact, _, stated = hit.fact.partition(".")     # `oom.kv_alloc`: the line states its phase itself
        if fact not in EVENT_FACTS:
            continue
        counts[fact] = counts.get(fact, 0) + 1
        if counts[fact] <= MAX_EVENTS_PER_FACT:
            events.append(_event(hit, fact, stated or phase_at(read, hit.index, order)))
    _tokens_that_fit(events)
    return events, counts


def _stats(read: LogRead) -> list[dict[str, Any]]:
    """The periodic stats lines as samples: a line's fragments (`stats`, `stats_waiting`, `stats_kv_usage_pct`,
    `stats_kv_usage_frac`) are facts of their own where the engine builds the line from parts."""
    by_line: dict[int, dict[str, float]] = {}
    first: dict[int, Hit] = {}
    for hit in read.hits:
        if hit.fact.startswith("stats"):
            by_line.setdefault(hit.index, {}).update(hit.values)
            first.setdefault(hit.index, hit)
    rows = [i for i, v in by_line.items() if {"running", "waiting", "kv_usage_pct", "kv_usage_frac"} & v.keys()]
    step = max(1, -(-len(rows) // MAX_STATS))
    out = []
    for i in rows[::step]:
        v = by_line[i]
        usage = v["kv_usage_pct"] / 100.0 if "kv_usage_pct" in v else v.get("kv_usage_frac")
        out.append({"at_s": first[i].at_s, "line_no": first[i].line_no, "num_requests_running": v.get("running"),
                    "num_requests_waiting": v.get("waiting"), "kv_cache_usage_frac": usage,
                    "generation_tokens_per_s": v.get("generation_tokens_per_s")})
    return out


def _serving_span_s(read: LogRead) -> float | None:
    """Seconds from the server being up (else its first stats line) to the log's last time stamp."""
    serving = [h for h in read.hits if h.fact in ("stats", "preemption", "retraction")]
    first = next((h.at_s for h in serving if h.at_s is not None), None)
    last = next((h.at_s for h in reversed(serving) if h.at_s is not None), None)
    return round(last - first, 3) if first is not None and last is not None and last > first else None


def _preemptions(read: LogRead, span_s: float | None) -> tuple[float | None, float | None]:
    """(preemptions, per second). The engine's own running total where it prints one (vLLM V0, every 50th):
    its growth between the first and last stamped line; else the requests retracted or the lines, over the
    serving span."""
    pre = read.hits_of("preemption")
    totals = [(h.at_s, h.values["total"]) for h in pre if "total" in h.values]
    if totals:
        stamped = [(t, n) for t, n in totals if t is not None]
        (t0, n0), (t1, n1) = (stamped[0], stamped[-1]) if stamped else ((None, 0.0), (None, 0.0))
        rate = round((n1 - n0) / (t1 - t0), 4) if t0 is not None and t1 is not None and t1 > t0 else None
        return max(n for _, n in totals), rate
    counted = [h.values["preemptions"] for h in read.hits_of("stats_preemptions") if "preemptions" in h.values]
    retracted = read.hits_of("retraction")
    if counted:
        count: float | None = sum(counted)
    elif retracted:
        count = sum(h.values.get("retracted", 1.0) for h in retracted)
    else:
        count = float(len(pre)) or None
    return count, round(count / span_s, 4) if count is not None and span_s else None


def config_fields(read: LogRead) -> dict[str, Any] | None:
    """The config line's settings as server_config fields, through the engine's flag map (as its argv would be)."""
    engine = get(read.engine)
    budget = read.last("memory_budget")
    if engine is None or not (read.config or read.config_fields or budget):
        return None
    table = flag_table(engine.name)
    argv: list[str] = []
    for key, raw in read.config.items():
        flag = engine.log_config_keys.get(key) or "--" + key.replace("_", "-")
        if flag not in table or raw in ("None", "none", ""):
            continue
        kind = table[flag][1]
        if kind in ("bool", "nobool"):       # a switch: present when the config says true (nobool: turns it off)
            argv += [flag] if raw.lower() in _TRUE else []
        else:
            argv += [flag, raw]
    fields, _ = parse_flags(argv, engine.name)
    fields.update({k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in read.config_fields.items()})
    if budget is not None and fields.get("gpu_memory_utilization") is None:    # the profile states the share used
        fields["gpu_memory_utilization"] = budget.values.get("gpu_memory_utilization")
    out = {k: (redact_text(v) if isinstance(v, str) else v) for k, v in fields.items() if v is not None}
    if read.version:
        out["engine_version"] = read.version
    return out or None


def evidence(read: LogRead) -> dict[str, Any]:
    """The LogsData fields a LogRead fills."""
    engine = get(read.engine)
    events, counts = _events(read, engine.startup_order if engine is not None else ())
    span = _serving_span_s(read)
    preempted, rate = _preemptions(read, span)
    offload = read.last("offload")
    budget = read.last("memory_budget")
    oom_total = next((sum(sizes_bytes(h.texts["total"])) for h in read.hits_of("oom") if h.texts.get("total")), None)
    if budget is not None and "total_gib" in budget.values:
        oom_total = budget.values["total_gib"] * 2**30
    return {
        "engine": read.engine, "engine_version": read.version, "first_line_no": read.first_line_no,
        "last_line_no": read.last_line_no, "num_restarts": max(0, len(read.start_indexes) - 1),
        "config": config_fields(read), "events": events, "event_counts": counts or None,
        "preemptions_total": preempted, "serving_span_s": span,
        "preemptions_per_s": rate,
        "stats": _stats(read),
        "gpu_layers_offloaded": int(offload.values["on_gpu"]) if offload and "on_gpu" in offload.values else None,
        "gpu_layers_total": int(offload.values["total"]) if offload and "total" in offload.values else None,
        "gpu_total_bytes": oom_total or None,
        "gpu_devices": _value(read, "gpu_devices", "devices"),
        "offload_available_bytes": _size(read, "offload_available", "available"),
        "offload_required_bytes": _size(read, "offload_required", "required"),
        "offload_kv_bytes": _size(read, "offload_kv", "kv"),
    }


def _value(read: LogRead, fact: str, key: str) -> int | None:
    hit = read.last(fact)
    return int(hit.values[key]) if hit is not None and key in hit.values else None


def _size(read: LogRead, fact: str, key: str) -> float | None:
    """A size the line states in words ('22.0 GiB', or a list of them: their sum)."""
    hit = read.last(fact)
    found = sizes_bytes(hit.texts.get(key)) if hit is not None else []
    return sum(found) if found else None
