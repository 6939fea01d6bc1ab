"""The plan section's human tables ({title, columns, rows, notes}), built from its structured data."""
from __future__ import annotations

from typing import Any

from triage.plan.assumptions import GIB


def _gib(x: float | None) -> str:
    return "n/a" if x is None else f"{x / GIB:,.2f} GiB"


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def _num(x: float | None, digits: int = 1, unit: str = "") -> str:
    if x is None:
        return "n/a"
    return f"{x:,.{digits}f}{unit}"


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.2f}"


def _model_table(p: dict[str, Any]) -> dict[str, Any]:
    m = p["model"]
    params = f"{m['num_params'] / 1e9:,.2f} B"
    if m["num_active_params"] != m["num_params"]:
        params += f" ({m['num_active_params'] / 1e9:,.2f} B active per token)"
    attn = f"{m['attention_kind']}: {m['num_attention_heads']} query heads"
    if m["attention_kind"] == "MLA":
        attn += f", latent {m['kv_lora_rank']} + rope {m['qk_rope_head_dim']}"
    else:
        attn += f", {m['num_kv_heads']} KV heads, head dim {m['head_dim']}"
    if m["sliding_window_tokens"]:
        attn += f"; {m['num_window_layers']} of {m['num_layers']} layers windowed to {m['sliding_window_tokens']:,}"
    rows = [
        ["parameters", params],
        ["layers", str(m["num_layers"])],
        ["attention", attn],
        [f"weights at {m['weight_dtype']}", f"{_gb(m['weight_bytes'])} ({_gib(m['weight_bytes'])})"],
        [f"KV cache per token ({m['kv_cache_dtype']})", f"{m['kv_bytes_per_token'] / 1024:,.1f} KiB"],
        [f"KV per sequence of {m['context_tokens']:,} tokens", _gib(m["kv_bytes_per_sequence"])],
        [f"KV per sequence at max-model-len {p['memory']['max_model_len']:,}",
         _gib(m["kv_bytes_per_sequence_at_max_model_len"])],
    ]
    return {"title": f"Model: {m['name']}", "columns": ["quantity", "value"], "rows": rows,
            "notes": [f"config from {m['source']}; parameter count computed from the shape"]}


def _memory_table(p: dict[str, Any]) -> dict[str, Any]:
    mem, gpu = p["memory"], p["gpu"]
    util = p["inputs"]["gpu_memory_utilization"]
    rows = [
        ["VRAM", _gib(gpu["vram_bytes"])],
        [f"budget (x {util:g} gpu-memory-utilization)", _gib(mem["budget_bytes_per_gpu"])],
        ["weights", _gib(mem["weight_bytes_per_gpu"])],
        ["activation peak (estimate)", _gib(mem["activation_bytes_per_gpu"])],
        ["runtime overhead (estimate)", _gib(mem["overhead_bytes_per_gpu"])],
        ["KV cache room", _gib(mem["kv_budget_bytes_per_gpu"])],
        ["KV capacity", f"{mem['kv_capacity_tokens']:,} tokens"],
        [f"concurrent sequences of {p['model']['context_tokens']:,} tokens", f"{mem['kv_capacity_seqs']:,}"],
        [f"concurrent sequences at max-model-len {mem['max_model_len']:,}",
         f"{mem['kv_capacity_seqs_at_max_model_len']:,}"],
        ["fits", "yes" if mem["fits"] else "no"],
        [f"margin after one {mem['max_len_checked']:,}-token sequence", _gib(mem["fit_margin_bytes_per_gpu"])],
    ]
    return {"title": f"Memory per GPU: TP {mem['tp']} on {gpu['name']}", "columns": ["", "per GPU"],
            "rows": rows, "notes": [mem["reason"]]}


def _tp_table(p: dict[str, Any]) -> dict[str, Any]:
    rows = [[f"{f['tp']}", _gib(f["weight_bytes_per_gpu"]), _gib(f["kv_budget_bytes_per_gpu"]),
             f"{f['kv_capacity_tokens']:,}", f"{f['kv_capacity_seqs']:,}", f["reason"]] for f in p["tp_options"]]
    rec = p["recommended_tp"]
    note = (f"smallest TP that fits with headroom (>= {p['memory']['min_concurrent_seqs_for_headroom']} "
            f"sequences): {rec}" if rec is not None else "no TP up to 8 fits this model on this GPU")
    return {"title": "Tensor-parallel options", "columns": ["TP", "weights/GPU", "KV room/GPU", "KV tokens",
                                                            "sequences", "verdict"],
            "rows": rows, "notes": [note]}


def _speed_table(p: dict[str, Any]) -> dict[str, Any]:
    s = p["speed"]
    rows = []
    b, kv_seqs = s["decode_at_batch"]["batch_size"], p["memory"]["kv_capacity_seqs"]
    why = "the KV cache's limit" if b >= kv_seqs else f"--max-num-seqs; KV holds {kv_seqs:,}"
    for label, d in (("decode, batch 1", s["decode_bs1"]), (f"decode, batch {b:,} ({why})", s["decode_at_batch"])):
        rows.append([label, _num(d["bound_tokens_per_s"], 0, " tok/s"), _num(d["bound_tpot_ms"], 2, " ms"),
                     d["limited_by"], _num(d["expected_tokens_per_s"], 0, " tok/s"),
                     _num(d["expected_tpot_ms"], 2, " ms")])
    pf = s["prefill"]
    rows.append([f"prefill {pf['input_tokens']:,} tokens (TTFT)", "", _num(pf["bound_ttft_ms"], 1, " ms"),
                 pf["limited_by"], "", _num(pf["expected_ttft_ms"], 1, " ms")])
    d1 = s["decode_bs1"]
    gpu = p["gpu"]
    notes = [
        f"bound = roofline at spec-sheet peak ({gpu['hbm_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, "
        f"{s['peak_flops_per_s'] / 1e12:,.0f} TFLOP/s {s['compute_dtype']} per GPU); expected = bound at "
        f"{p['inputs']['mbu']:g} of bandwidth (--mbu) and {p['inputs']['mfu']:g} of FLOP/s (--mfu).",
        f"batch 1 streams {_gib(d1['step_bytes_per_gpu'])} per GPU per token; the ridge point is "
        f"{s['ridge_point_flops_per_byte']:,.0f} FLOP/byte.",
        f"decode at an average context of {s['decode_context_tokens']:,.0f} tokens; TP all-reduce time and "
        "queueing are not included.",
    ]
    return {"title": "Speed (roofline)", "columns": ["phase", "bound", "bound TPOT/TTFT", "limited by",
                                                     "expected", "expected TPOT/TTFT"],
            "rows": rows, "notes": notes}


def _fleet_table(p: dict[str, Any]) -> dict[str, Any]:
    f, c = p["fleet"], p["cost"]
    rows = [
        ["batch per replica", f"{f['batch_per_replica']:,}"],
        ["GPUs per replica", str(f["gpus_per_replica"])],
        ["replica throughput", f"{f['replica_requests_per_s']:,.2f} req/s, "
                               f"{f['replica_output_tokens_per_s']:,.0f} output tok/s"],
        ["E2E at full load (Little's law)", _num(f["e2e_s_at_full_load"], 2, " s")
         + f", TPOT {_num(f['tpot_ms_at_full_load'], 1, ' ms')} with the arriving prompts' prefill in each step"
         + f" (decode alone: {_num(f['tpot_ms_at_batch'], 2, ' ms')}); the replica is {f['limited_by']}-bound"],
    ]
    if f["target_qps"] is not None:
        rows.append(["target", f"{f['target_qps']:g} req/s"])
    if f["target_concurrency"] is not None:
        rows.append(["target concurrency", f"{f['target_concurrency']:,} requests in flight"])
    if f["num_replicas"] is not None:
        rows.append([f"replicas (+{f['headroom_frac']:.0%} headroom)",
                     f"{f['num_replicas']:,} x TP {f['gpus_per_replica']} = {f['num_gpus']:,} "
                     f"GPU{'' if f['num_gpus'] == 1 else 's'}"])
    if f["e2e_s_at_target"] is not None:
        rows.append(["E2E at target load (Little's law)", f"{f['e2e_s_at_target']:,.2f} s, "
                                                          f"{f['in_flight_at_target']:,.1f} requests in flight"])
    notes = []
    if c is not None:
        rows += [
            ["cost per 1M output tokens, full batch", _money(c["cost_per_mtok_at_batch"])],
            ["cost per 1M output tokens, batch 1", _money(c["cost_per_mtok_at_bs1"])],
        ]
        if c["cost_per_mtok_at_target"] is not None:
            rows.append(["cost per 1M output tokens at target", _money(c["cost_per_mtok_at_target"])])
        if c["api_price_per_mtok"] is not None:
            verdict = ("reachable" if c["break_even_reachable"] else
                       "never: a full replica still costs more per token")
            rows += [
                ["break-even vs API", f"{c['break_even_output_tokens_per_s']:,.0f} output tok/s per replica "
                                      f"({c['break_even_qps']:,.2f} req/s, "
                                      f"{c['break_even_mtok_per_month']:,.0f} M tok/month): {verdict}"],
            ]
            if c["savings_per_month_at_target"] is not None:
                rows.append(["self-hosting saves per month at target", _money(c["savings_per_month_at_target"])])
            notes.append("API price compared per output token; pass a blended price if input tokens are billed.")
    else:
        notes.append("pass --price-per-gpu-hour for cost per token (and --api-price-per-mtok for break-even).")
    if f["num_replicas"] is None:
        notes.append("pass --qps or --concurrency for the number of replicas and GPUs.")
    return {"title": "Fleet and cost", "columns": ["", "value"], "rows": rows, "notes": notes}


def plan_tables(p: dict[str, Any]) -> list[dict[str, Any]]:
    tables = [_model_table(p), _memory_table(p), _tp_table(p), _speed_table(p)]
    if p["fleet"] is not None:       # no fleet, cost or command for a configuration that does not fit
        tables.append(_fleet_table(p))
    if p["vllm_command"] is not None:
        tables.append({"title": "Start vLLM with", "columns": ["command"], "rows": [[p["vllm_command"]]],
                       "notes": p["vllm_notes"]})
    if p["warnings"] or p["notes"]:
        tables.append({"title": "Warnings", "columns": ["", "message"],
                       "rows": [["!", w] for w in p["warnings"]] + [["i", n] for n in p["notes"]]})
    return tables
