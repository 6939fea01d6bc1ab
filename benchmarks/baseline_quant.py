"""Weight-only FP8 and INT4 on this CPU: whole-model decode of the `small` preset against bf16-stored weights.

Paths, on one engine (the model is swapped between measurements):
- bf16-stored: Bf16StoredLinear (kernels/bf16_weights.cpp), 2 bytes a weight, fp32 arithmetic;
- fp8: Fp8KernelLinear (kernels/quant_weights.cpp), e4m3 + per-channel fp32 scale, ~1 byte a weight, fp32
  arithmetic;
- int4: Int4KernelLinear, group 128 asymmetric, 0.5 byte + 8 bytes of scale/offset per 128 weights, on the body
  the ISA choice measured fastest (an int8-activation one, *_w4a8, where it won: `isa` and `paths` say which).
At bs=1 and bs=8: decode tok/s (steady-state steps after two warm ones; the paths alternate over --rounds and
each keeps its best tok/s; speed-ups are the median of the ratios within each round), and the % of the memory
roofline each reaches counting its own bytes: B x BW / (W + A + B x ctx x kv), W the bytes a step streams (every
weight, scale and offset but the embedding table), A the fp32 activations the linears read and write, BW the
rate at which this host reads W bytes, measured just before each round with a buffer of W bytes (read_bandwidth;
each path's own roofline: weights that fit in the last-level cache stream from it, not from DRAM, so a 512 MiB
buffer would understate what they can reach; that DRAM figure is kept beside it as `roofline_pct_dram`). Then,
to tell the kernels from the rest of the step:
`layer_stream`, the same linears called in sequence without the rest of the step (bytes / time / BW: each
kernel's own roofline), and `engine_floor`, the step with every linear stubbed out (what no kernel can remove)
with the roofline % it leaves reachable, and `step_split`, the real step cut into the time inside its linears and
the rest (the rest runs slower than in the stubbed step: the weights stream through the caches between its ops),
and `arena_huge_pages`, bs=1 decode with the packed weights in huge pages against 4 KiB pages.
Then a layer table (1 x K @ K x N, per ISA) and the perplexity change on a fixed token sequence. Where the int4
choice is an int8-activation body, `int4_fp32_activations` (the fastest fp32 body) is measured beside it.
Writes JSON (default benchmarks/results/baseline_quant.json) with host, ISA and load.
TRIAGE_QUANT_ISA=avx2 (or avx512, avx512vbmi, ...) forces the kernels' ISA for the decode part;
TRIAGE_QUANT_ISA=avx2,avx2_intwiden,avx2_w4a8 chooses among the AVX2 bodies as an AVX2-only CPU would.

    python benchmarks/baseline_quant.py [--threads N] [--rounds 5] [--decode-steps 12] [--ppl-tokens 256]
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from triage.baseline.engine_driver import synthetic_prompt  # noqa: E402
from triage.baseline.host_bandwidth import host_bandwidth  # noqa: E402
from triage.core.roofline import decode_tokens_per_s_bound  # noqa: E402
from triage.reference_engine import EngineConfig, LLMEngine  # noqa: E402
from triage.reference_engine.host.threads import fit_num_threads  # noqa: E402
from triage.reference_engine.layers.kernels import quant_weights as qw  # noqa: E402
from triage.reference_engine.layers.kernels.bf16_weights import _time_s  # noqa: E402
from triage.reference_engine.layers.quant import model_weight_bytes, quantize_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))      # the sibling modules below, however it is started
from quant_decode import (  # noqa: E402
    PROMPT_TOKENS,
    WARM_STEPS,
    _decode,
    _decode_linears,
    _fp32_bodies_allowed,
    _load,
    isa_choice,
)
from quant_step_parts import engine_floor_s, huge_pages_ab, step_split  # noqa: E402

LAYER_SHAPES = [(2048, 768), (768, 2048), (32000, 768)]        # (out, in): gate/up, down, lm_head of `small`
DRAM_BUFFER_BYTES = 512 << 20       # past the 480 MiB last-level cache of the Xeon these runs use


def _host() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    flags = next((set(ln.split(":", 1)[1].split()) for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), set())
    return {"cpu": cpu, "num_cpus": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
            "torch_num_threads": torch.get_num_threads(), "avx512f": "avx512f" in flags,
            "isa_flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c"))),
            "isa_forced": os.environ.get("TRIAGE_QUANT_ISA") or None,
            "label": (f"the {os.environ['TRIAGE_QUANT_ISA']} path forced (TRIAGE_QUANT_ISA) on this CPU, whose ISA "
                      f"flags are listed: not a machine limited to that ISA" if os.environ.get("TRIAGE_QUANT_ISA")
                      else "the ISA each scheme measured fastest on this CPU"),
            "load_avg_at_start": _load(),
            "note": "shared 2-core VM: other jobs run beside this one; the paths alternate within each round "
                    "and ratios are taken within one run"}


def _stream_bytes(model: nn.Module) -> int:
    """What a decode step reads of the weights: everything but the embedding table (it gathers B rows)."""
    w = model_weight_bytes(model)
    embed = model.model.embed_tokens.weight
    if getattr(model.lm_head, "weight", None) is not embed:
        w -= embed.numel() * embed.element_size()
    return w


def _layer_bytes(layer: nn.Module) -> int:
    """A layer's own stored bytes: packed weights + scales/offsets (weight_bytes), or its parameters."""
    if hasattr(layer, "weight_bytes"):
        return layer.weight_bytes() + (0 if layer.bias is None else layer.bias.numel() * 4)
    return sum(t.numel() * t.element_size() for t in layer.parameters(recurse=False))


def _activation_bytes(model: nn.Module, batch: int) -> int:
    """fp32 activations the linears read (x) and write (y) in one decode step of ``batch`` tokens."""
    return sum(4 * batch * (m.in_features + m.out_features) for m in _decode_linears(model))


COMPILED = "+compiled"       # a path's name with its decode step compiled (reference_engine/engine/compiled_step.py)


def _eager_name(name: str) -> str:
    return name.removesuffix(COMPILED)


def compile_paths(engine: LLMEngine, models: dict[str, nn.Module], batches: list[int]) -> dict[str, dict]:
    """Each path's decode step compiled for ``batches`` (one bucket each), added to ``models`` as NAME+compiled;
    returns what each compile cost and the compiled steps (the decode loop installs them on the runner)."""
    from triage.reference_engine.engine.compiled_step import CompiledDecode

    out = {}
    for name, m in list(models.items()):
        runner = engine.runner
        runner.model = m
        tic = time.perf_counter()
        compiled = CompiledDecode(m, tuple(batches), runner.device)
        with torch.inference_mode():
            compiled.warm_up(runner.scratch_step, tuple(batches))
        models[name + COMPILED] = m
        out[name + COMPILED] = {"step": compiled, "compile_s": time.perf_counter() - tic, "buckets": list(batches)}
        print(f"compiled {name} for batches {batches} in {out[name + COMPILED]['compile_s']:.1f} s", flush=True)
    engine.runner.model = models["bf16_stored"]
    return out


def bench_decode(rounds: int, steps: int, batches: list[int], compiled_step: bool) -> tuple[dict, dict, dict]:
    engine = LLMEngine(EngineConfig(model="small", dtype="float32", weight_storage="bf16", max_num_seqs=max(batches),
                                    max_model_len=PROMPT_TOKENS + steps + WARM_STEPS + 8,
                                    num_kv_blocks=(max(batches) + 1) * 8, enable_prefix_caching=False))
    vocab = engine.model_config.vocab_size
    base = engine.runner.model
    models, paths = {"bf16_stored": base}, {}
    paths["bf16_stored"] = {"kernel": "bf16_weight_linear", "isa": "avx2", "bytes_per_weight": 2.0,
                            "fell_back": False, "reason": engine.dtype_note}
    for scheme in ("fp8", "int4"):
        m = copy.deepcopy(base)
        s = quantize_model(m, scheme, group_size=128)
        models[scheme] = m
        paths[scheme] = {**(s.kernel or {}), "bytes_per_weight": s.bytes_per_weight, "layer_paths": s.paths}
    if paths["int4"].get("isa") in {qw.ISA_NAMES[i] for i in qw.INT8_ACTIVATION_ISAS}:
        allowed = _fp32_bodies_allowed()
        models["int4_fp32_activations"], body = _quantized(base, "int4", "fp32")
        paths["int4_fp32_activations"] = {"isa": body, "allowed": allowed}
    eager_models = dict(models)
    compiled = compile_paths(engine, models, batches) if compiled_step else {}
    kv_tok = engine.runner.kv_cache_bytes / (engine.runner.num_blocks * engine.runner.block_size)
    ctx = PROMPT_TOKENS + 1 + WARM_STEPS + steps / 2
    best: dict[tuple[str, int], dict] = {}
    per_round: dict[int, list[dict]] = {b: [] for b in batches}
    for r in range(rounds):
        dram_bw = read_bandwidth(DRAM_BUFFER_BYTES)
        own_bw = {w: read_bandwidth(w) for w in {_stream_bytes(m) for m in models.values()}}
        for b in batches:
            this_round = {}
            for name, m in models.items():
                engine.runner.model = m
                engine.runner.compiled = compiled[name]["step"] if name in compiled else None
                tok_s = _decode(engine, b, steps, vocab)
                w, act = _stream_bytes(m), _activation_bytes(m, b)
                bound = decode_tokens_per_s_bound(b, own_bw[w], w + act, ctx, kv_tok)
                dram_bound = decode_tokens_per_s_bound(b, dram_bw, w + act, ctx, kv_tok)
                point = {"path": name, "batch_size": b, "decode_tokens_per_s": tok_s, "stream_bytes": w,
                         "activation_bytes": act, "bandwidth_bytes_per_s": own_bw[w], "bandwidth_buffer_bytes": w,
                         "bound_tokens_per_s": bound, "roofline_pct": 100 * tok_s / bound,
                         "dram_bandwidth_bytes_per_s": dram_bw, "roofline_pct_dram": 100 * tok_s / dram_bound,
                         "step": "compiled" if name in compiled else "eager", "round": r, "load_avg": _load()}
                this_round[name] = point
                if (name, b) not in best or tok_s > best[name, b]["decode_tokens_per_s"]:
                    best[name, b] = point
                print(f"round {r} bs={b} {name:12s} {tok_s:7.2f} tok/s  {point['roofline_pct']:5.1f}% of "
                      f"{bound:6.1f}  (BW {own_bw[w] / 1e9:.1f} GB/s reading {w / 2**20:.0f} MiB; "
                      f"{point['roofline_pct_dram']:.0f}% of DRAM's {dram_bw / 1e9:.1f}; load {point['load_avg'][0]})",
                      flush=True)
            # Each path against bf16-stored run the same way (eager against eager, compiled against compiled),
            # and a compiled path against its own eager step.
            tps = {name: p["decode_tokens_per_s"] for name, p in this_round.items()}
            per_round[b].append({name: {"speedup_vs_bf16_stored": tps[name] / tps["bf16_stored" + name[len(_eager_name(name)):]],
                                        "speedup_vs_eager": tps[name] / tps[_eager_name(name)],
                                        "roofline_pct": p["roofline_pct"]} for name, p in this_round.items()})
    engine.runner.model, engine.runner.compiled = base, None
    stream = layer_stream(eager_models, batches, rounds)
    extra = {"layer_stream": stream, "engine_floor": {},
             "compile": {name: {k: v for k, v in c.items() if k != "step"} for name, c in compiled.items()},
             "compiled_step_split": {f"bs{b}": {name: _compiled_split(best[name, b], stream[f"bs{b}"][_eager_name(name)])
                                                for name in compiled} for b in batches},
             "arena_huge_pages": huge_pages_ab(engine, base, steps, vocab, rounds),
             "step_split": {f"bs{b}": {name: step_split(engine, m, b, steps, vocab) for name, m in eager_models.items()}
                            for b in batches}}
    for b in batches:       # the step's non-matmul time, and the roofline % it leaves reachable for each path
        floor = engine_floor_s(engine, base, b, steps, vocab)
        ceiling = {}
        for name, m in eager_models.items():
            bound = decode_tokens_per_s_bound(b, best[name, b]["bandwidth_bytes_per_s"],
                                              _stream_bytes(m) + _activation_bytes(m, b), ctx, kv_tok)
            ceiling[name] = 100 * (b / bound) / (floor + b / bound)
        extra["engine_floor"][f"bs{b}"] = {"seconds_per_step": floor, "load_avg": _load(),
                                           "roofline_pct_ceiling": ceiling}
        print(f"bs={b}: engine floor {floor * 1e3:.2f} ms/step (linears stubbed out); roofline % reachable with "
              f"infinitely fast linears at the step's bound: " +
              ", ".join(f"{n} {c:.0f}%" for n, c in ceiling.items()), flush=True)
    out = {}
    for b in batches:       # ratios within a round (the same load on both sides), their median over rounds
        rs = per_round[b]
        out[f"bs{b}"] = {name: {**best[name, b],
                                "speedup_vs_bf16_stored": statistics.median(r[name]["speedup_vs_bf16_stored"] for r in rs),
                                "speedups_per_round": [round(r[name]["speedup_vs_bf16_stored"], 3) for r in rs],
                                "speedup_vs_eager": statistics.median(r[name]["speedup_vs_eager"] for r in rs),
                                "roofline_pct_median": statistics.median(r[name]["roofline_pct"] for r in rs),
                                "roofline_pct_per_round": [round(r[name]["roofline_pct"], 1) for r in rs]}
                         for name in models}
    return out, paths, extra


def _compiled_split(point: dict, alone: dict) -> dict:
    """A compiled step cut in two the only way that does not change it: its linears as they stream called alone
    (layer_stream, the same kernels) and the rest by difference (fused norms, RoPE, attention, sampling, Python)."""
    step_s = point["batch_size"] / point["decode_tokens_per_s"]
    return {"step_s": step_s, "linears_alone_s": alone["seconds"], "rest_s": step_s - alone["seconds"],
            "method": "rest = best compiled step - the linears called in sequence alone (layer_stream)"}


def layer_stream(models: dict[str, nn.Module], batches: list[int], rounds: int) -> dict:
    """The decode linears of each model called in sequence (call order, bs rows of x), as the step calls them but
    without the rest of the step: bytes (own weights + scales/offsets + fp32 x and y) / time against the rate at
    which this host reads that many bytes, i.e. each kernel's own roofline. Paths alternate within a round; each
    keeps its best time, and its % is taken against the highest rate any round measured for its size (the
    conservative reading)."""
    best: dict[tuple[str, int], dict] = {}
    weights = {name: sum(_layer_bytes(layer) for layer in _decode_linears(m)) for name, m in models.items()}
    bws: dict[int, list[float]] = {w: [] for w in weights.values()}
    for r in range(rounds):
        for w, rates in bws.items():
            rates.append(read_bandwidth(w))
        for b in batches:
            for name, m in models.items():
                layers = _decode_linears(m)
                xs = {k: torch.randn(b, k) for k in {layer.in_features for layer in layers}}
                nbytes = weights[name] + _activation_bytes(m, b)
                with torch.inference_mode():
                    t = _time_s(lambda: [layer(xs[layer.in_features]) for layer in layers], 3)  # noqa: B023
                point = {"seconds": t, "bytes": nbytes, "bytes_per_s": nbytes / t, "round": r, "load_avg": _load()}
                if (name, b) not in best or t < best[name, b]["seconds"]:
                    best[name, b] = point
    for (name, _), p in best.items():
        rates = bws[weights[name]]
        p["bandwidth_bytes_per_s"], p["roofline_pct"] = max(rates), 100 * p["bytes_per_s"] / max(rates)
        p["bandwidth_buffer_bytes"], p["bandwidth_per_round_bytes_per_s"] = weights[name], rates
    return {f"bs{b}": {name: best[name, b] for name in models} for b in batches}


def read_bandwidth(buffer_bytes: int) -> float:
    """The best rate at which this host reads a buffer of ``buffer_bytes`` (torch's threads), bytes/s."""
    res = host_bandwidth(buffer_bytes, 3, 1.0)
    return res.read_best_bytes_per_s or res.best_bytes_per_s


def bench_layers() -> list[dict]:
    module = qw.kernel()[0]
    from triage.reference_engine.layers.kernels.bf16_weights import kernel as bf16_kernel

    bk = bf16_kernel()[0]
    fp8_isas, int4_isas = qw.available_isas(module, "fp8"), qw.available_isas(module, "int4")
    rows = []
    for n, k in LAYER_SHAPES:
        torch.manual_seed(0)
        lin = nn.Linear(k, n, bias=False)
        w16 = lin.weight.detach().bfloat16()
        for t in (1, 8):
            x = torch.randn(t, k)
            entry = {"out_in": [n, k], "rows": t, "load_avg": _load(),
                          "bf16_stored_ms": 1e3 * _time_s(lambda: bk.bf16_weight_linear(x, w16))}     # noqa: B023
            for isa in fp8_isas:
                f8 = qw.Fp8KernelLinear.from_linear(lin, isa)
                entry[f"fp8_{qw.ISA_NAMES[isa]}_ms"] = 1e3 * _time_s(lambda: f8(x))       # noqa: B023
            for isa in int4_isas:
                i4 = qw.Int4KernelLinear.from_linear(lin, isa)
                entry[f"int4_{qw.ISA_NAMES[isa]}_ms"] = 1e3 * _time_s(lambda: i4(x))      # noqa: B023
            rows.append(entry)
    return rows


# The paths whose arithmetic the perplexity compares: (scheme, the bodies allowed: None as TRIAGE_QUANT_ISA says,
# "fp32" its fp32-activation ones).
PPL_PATHS = {"fp8": ("fp8", None), "int4": ("int4", None), "int4_fp32_activations": ("int4", "fp32")}


def _quantized(base: nn.Module, scheme: str, allowed: str | None) -> tuple[nn.Module, str]:
    """A copy of ``base`` quantized with the ISA choice narrowed to ``allowed`` (isa_choice's argument); (model,
    the body chosen)."""
    with isa_choice(allowed):
        m = copy.deepcopy(base)
        summary = quantize_model(m, scheme, group_size=128)
    return m, (summary.kernel or {}).get("isa") or (summary.kernel or {}).get("kernel", "?")


def perplexity(num_tokens: int) -> dict:
    """Perplexity of the `small` preset per path on one fixed text (token ids from a fixed seed), with the
    top-1 agreement of the next-token predictions. The preset's weights are generated, not trained: its logits
    are very peaked (std ~28) and its perplexity on any text is astronomically large, so the figure to read is
    the relative change of the cross-entropy (log perplexity), not of the perplexity itself. The whole text is
    one forward pass with the decode kernels on every row (MAX_KERNEL_ROWS lifted), so the figure includes the
    decode arithmetic: for int4 both the chosen body (int8 activations where it is a *_w4a8 one) and the
    fastest fp32-activation body."""
    engine = LLMEngine(EngineConfig(model="small", dtype="float32", weight_storage="fp32", max_model_len=num_tokens + 8,
                                    num_kv_blocks=num_tokens // 16 + 4, enable_prefix_caching=False))
    base = engine.runner.model
    text = synthetic_prompt(num_tokens, engine.model_config.vocab_size, seed=1234)
    target = torch.tensor(text[1:])
    out, ref_top1 = {}, None
    rows_limit = qw.MAX_KERNEL_ROWS
    qw.MAX_KERNEL_ROWS = num_tokens
    try:
        for name in ("float32", *PPL_PATHS):
            m, body = (base, "torch fp32") if name == "float32" else _quantized(base, *PPL_PATHS[name])
            with torch.inference_mode():
                logits = m.forward_full(text).float()[:-1]
            ce = torch.nn.functional.cross_entropy(logits, target).item()
            top1 = logits.argmax(-1)
            ref_top1 = top1 if ref_top1 is None else ref_top1
            out[name] = {"body": body, "cross_entropy_nats": ce, "log10_perplexity": ce / math.log(10),
                         "top1_agreement_with_fp32": (top1 == ref_top1).float().mean().item()}
    finally:
        qw.MAX_KERNEL_ROWS = rows_limit
    for name in PPL_PATHS:
        ce0 = out["float32"]["cross_entropy_nats"]
        out[name]["cross_entropy_delta_pct"] = 100 * (out[name]["cross_entropy_nats"] / ce0 - 1)
        out[name]["perplexity_ratio_vs_fp32"] = math.exp(out[name]["cross_entropy_nats"] - ce0)
    out["num_tokens"] = num_tokens
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "baseline_quant.json")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: fit_num_threads())")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decode-steps", type=int, default=12)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--ppl-tokens", type=int, default=256, help="0 skips the perplexity part")
    ap.add_argument("--no-compile", action="store_true", help="time the eager step only (no torch.compile paths)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads or fit_num_threads()[0])
    result = {"name": "baseline_quant", "host": _host(),
              "isa": {scheme: qw.choose_isa(scheme)[1] for scheme in ("fp8", "int4")}}
    result["decode"], result["paths"], extra = bench_decode(args.rounds, args.decode_steps,
                                                            [int(b) for b in args.batches.split(",")],
                                                            compiled_step=not args.no_compile)
    result.update(extra)
    result["layers"] = bench_layers()
    if args.ppl_tokens:
        result["perplexity"] = perplexity(args.ppl_tokens)
    result["host"]["load_avg_at_end"] = _load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for key, pts in result["decode"].items():
        for name, p in pts.items():
            print(f"{key} {name:21s} best {p['decode_tokens_per_s']:7.2f} tok/s; median of per-round ratios "
                  f"{p['speedup_vs_bf16_stored']:.2f}x {p['speedups_per_round']}; roofline median "
                  f"{p['roofline_pct_median']:.0f}% {p['roofline_pct_per_round']}")
    for key, pts in result["step_split"].items():
        for name, p in pts.items():
            print(f"{key} {name:12s} step {p['step_s'] * 1e3:6.2f} ms = linears {p['linears_s'] * 1e3:6.2f} ms + rest "
                  f"{p['rest_s'] * 1e3:5.2f} ms (engine floor, linears stubbed: "
                  f"{result['engine_floor'][key]['seconds_per_step'] * 1e3:.2f} ms)")
    for key, pts in result["compiled_step_split"].items():
        for name, p in pts.items():
            print(f"{key} {name:21s} step {p['step_s'] * 1e3:6.2f} ms = linears alone {p['linears_alone_s'] * 1e3:6.2f} "
                  f"ms + rest {p['rest_s'] * 1e3:5.2f} ms")
    for key, pts in result["layer_stream"].items():
        for name, p in pts.items():
            print(f"{key} {name:12s} linears alone: {p['seconds'] * 1e3:6.2f} ms, {p['bytes_per_s'] / 1e9:5.1f} GB/s = "
                  f"{p['roofline_pct']:3.0f}% of {p['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s")
    print(json.dumps({"perplexity": result.get("perplexity"), "isa": result["isa"]}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
