"""Rules on `triage diagnose --active` measurements (probes/active/): each measured figure against what the
hardware should do. The expectation comes from the spec table (triage/core/specs.py) and, for PCIe, from
the link's own generation and width; every threshold is in rules/thresholds.py with its source.

- GPU004 (rules/gpu.py) is raised, confirmed, by `pcie_measured` here: pinned transfers far below the link's
  rate, or a link that trained below its maximum while the measurement loaded it;
- GPU010 (rules/gpu.py) is confirmed by `allreduce_measured`: NCCL bus bandwidth far below NVLink's;
- GPU014 hbm-bandwidth-low, GPU015 matmul-throughput-low and MEM003 numa-node-bandwidth-low live here.

Costs are said in the served model's terms with the roofline arithmetic of triage/core/roofline.py when
its weight bytes are known ([model] weight_bytes in triage.toml, a bench config, a `plan` baseline).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from triage.core.probe_data import GpuData, ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.core.roofline import decode_tokens_per_s_bound
from triage.core.specs import match_nvml_name, pcie_bytes_per_s
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.fmt import gib, pct
from triage.rules.registry import rule

NOT_MEASURED = object()          # pcie_measured's answer when there is no usable measurement
# What pinned copies reach on a healthy link, as a share of its theoretical one-direction rate (CUDA
# bandwidthTest: ~50 of 63 GB/s on Gen5 x16); used to say "about 1/N of a healthy link", not to judge.
HEALTHY_PCIE_EFFICIENCY = 0.8
_QUANT_BYTES = {"fp8": 1.0, "int8": 1.0, "awq": 0.5, "gptq": 0.5, "int4": 0.5, "marlin": 0.5}


def served_weight_bytes(ctx: Context) -> tuple[float, str] | None:
    """The served model's weight bytes and where they came from, or None when nothing says."""
    if ctx.config.model_weight_bytes:
        return float(ctx.config.model_weight_bytes), "config.model.weight_bytes"
    if ctx.bench is not None and ctx.bench.config.get("model_weight_bytes"):
        return float(ctx.bench.config["model_weight_bytes"]), "bench.config.model_weight_bytes"
    plan_model = ((ctx.baseline or {}).get("plan") or {}).get("model") or {}
    if isinstance(plan_model.get("weight_bytes"), (int, float)) and plan_model["weight_bytes"] > 0:
        return float(plan_model["weight_bytes"]), "baseline.plan.model.weight_bytes"
    return None


_NO_WEIGHTS = " (set [model] weight_bytes in triage.toml to see the cost in tokens/s for the served model)"


def _tp(ctx: Context) -> int:
    tp = ctx.seen(ServerConfigData).tensor_parallel_size
    return int(tp) if isinstance(tp, (int, float)) and tp >= 1 else 1


def _active(ctx: Context, probe: str) -> dict[str, Any]:
    """An active probe's data (a plain dict: these probes run only with `diagnose --active`)."""
    data = ctx.snapshot.data(probe)
    if not isinstance(data, dict) or not data:
        raise MissingInput(f"probe {probe} did not run (it runs with `triage diagnose --active`)")
    return data


def _gpus(ctx: Context, probe: str) -> list[dict[str, Any]]:
    data = _active(ctx, probe)
    gpus = [g for g in data.get("gpus") or [] if not g.get("error")]
    if not gpus:
        raise MissingInput(f"{probe} measured no GPU" + "".join(f"; GPU {g.get('index')}: {g['error']}"
                                                               for g in data.get("gpus") or [] if g.get("error")))
    return gpus


def pcie_pinned_gbps(ctx: Context) -> float | None:
    """The slowest pinned host<->GPU copy rate `diagnose --active` measured (GB/s), or None when not measured."""
    data = ctx.snapshot.data("pcie") or {}
    rates = [g.get(k) for g in data.get("gpus") or [] for k in ("h2d_pinned_gbps", "d2h_pinned_gbps")
             if g.get(k) is not None]
    return min(rates) if rates else None


# ------------------------------------------------------------------------------------------------
# GPU004, by measurement


def pcie_measured(ctx: Context) -> Hit | None | object:
    """GPU004's verdict from the `pcie` probe: a Hit, None (measured and healthy), or NOT_MEASURED."""
    data = ctx.snapshot.data("pcie")
    if not data:
        return NOT_MEASURED
    min_frac = ctx.th("GPU004.min_pcie_link_frac")
    evidence: dict[str, Any] = {}
    lines: list[str] = []
    worst_rate: tuple[float, float] | None = None   # (measured GB/s, expected GB/s) of the worst low GPU
    judged = False
    for g in data.get("gpus") or []:
        gen, width = g.get("pcie_link_gen_max"), g.get("pcie_link_width_max")
        link = g.get("link_theoretical_gbps")
        if link is None and gen and width:
            rate = pcie_bytes_per_s(int(gen), int(width))
            link = None if rate is None else rate / 1e9
        rates = {k: g.get(k) for k in ("h2d_pinned_gbps", "d2h_pinned_gbps") if g.get(k) is not None}
        if not link or not rates:
            continue
        judged = True
        key = f"pcie.gpus[{g.get('index')}]"
        low = {k: v for k, v in rates.items() if v < min_frac * link}
        gen_l, width_l = g.get("pcie_link_gen_under_load"), g.get("pcie_link_width_under_load")
        trained_low = None not in (gen_l, width_l) and (gen_l < gen or width_l < width)
        if not low and not trained_low:
            continue
        for k, v in rates.items():
            evidence[f"{key}.{k}"] = v
        evidence[f"{key}.link_theoretical_gbps"] = round(link, 1)
        evidence[f"{key}.pcie_link_gen_max"], evidence[f"{key}.pcie_link_width_max"] = gen, width
        worst = min(rates.values())
        text = (f"GPU {g.get('index')}: pinned copies move {worst:.1f} GB/s, {pct(worst / link)} of the "
                f"{link:.1f} GB/s a Gen{gen} x{width} link carries each way")
        healthy = HEALTHY_PCIE_EFFICIENCY * link
        if worst < healthy / 3:
            text += f", about 1/{round(healthy / worst)} of the ~{healthy:.0f} GB/s a healthy link measures"
        if trained_low:
            evidence[f"{key}.pcie_link_gen_under_load"], evidence[f"{key}.pcie_link_width_under_load"] = gen_l, width_l
            text += f"; under that load the link ran at Gen{gen_l} x{width_l}"
        lines.append(text)
        if worst_rate is None or worst / link < worst_rate[0] / worst_rate[1]:
            worst_rate = (worst, link)
    if not judged:
        return NOT_MEASURED
    if not evidence:
        return None
    cost = ""
    w = served_weight_bytes(ctx)
    if w is not None and worst_rate is not None:
        healthy = worst_rate[1] * HEALTHY_PCIE_EFFICIENCY
        cost = (f" Loading the served model's {gib(w[0])} of weights over it takes {w[0] / (worst_rate[0] * 1e9):.1f} s "
                f"instead of about {w[0] / (healthy * 1e9):.1f} s, and every host<->GPU copy (inputs, sampled tokens, "
                "swapped or offloaded KV) is as much slower.")
        evidence[w[1]] = w[0]
    return Hit(
        title="PCIe transfers measure far below the link's rate",
        message="; ".join(lines) + "." + cost,
        evidence=evidence, severity=Severity.HIGH, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix("Reseat the card, check the riser and slot, and the BIOS PCIe settings (link speed, bifurcation); "
                "then run `triage diagnose --active` again to confirm the copies reach the link's rate.",
                ("nvidia-smi -q -d PCIE", "triage diagnose --active")),
    )


# ------------------------------------------------------------------------------------------------
# GPU010, by measurement


@dataclass(frozen=True, slots=True)
class AllreduceMeasure:
    busbw_gbps: float
    expected_gbps: float | None          # NVLink per direction per GPU (half the spec's bidirectional figure)
    low: bool
    evidence: dict[str, Any]

    def note(self) -> str:
        if self.expected_gbps is None:
            return f" The measured NCCL all-reduce bus bandwidth is {self.busbw_gbps:.1f} GB/s."
        return (f" Measured: NCCL all-reduce moves {self.busbw_gbps:.1f} GB/s bus bandwidth, "
                f"{pct(self.busbw_gbps / self.expected_gbps)} of the {self.expected_gbps:.0f} GB/s NVLink would give.")


def allreduce_measured(ctx: Context) -> AllreduceMeasure | None:
    """The `allreduce` probe's NCCL figure against NVLink's expectation; None when not measured."""
    data = ctx.snapshot.data("allreduce") or {}
    nccl = data.get("nccl") or {}
    busbw = nccl.get("busbw_gbps")
    if busbw is None:
        return None
    specs = [match_nvml_name(g.name or "", g.memory_total_bytes) for g in ctx.seen(GpuData).gpus]
    if not specs:     # no NVML: name the GPUs from the active probes' own device records
        specs = [match_nvml_name(g.get("name") or "", g.get("memory_total_bytes"))
                 for g in (ctx.snapshot.data("hbm") or ctx.snapshot.data("matmul") or {}).get("gpus") or []]
    links = [s.nvlink_bytes_per_s for s in specs if s is not None and s.nvlink_bytes_per_s]
    expected = min(links) / 2 / 1e9 if links and len(links) == len(specs) else None
    evidence: dict[str, Any] = {"allreduce.nccl.busbw_gbps": busbw, "allreduce.nccl.world_size": nccl.get("world_size")}
    low = False
    if expected:
        frac = busbw / expected
        evidence["derived.nvlink_busbw_expected_gbps"] = round(expected, 1)
        evidence["derived.allreduce_busbw_frac"] = round(frac, 3)
        low = frac < ctx.th("GPU010.min_nvlink_busbw_frac")
    return AllreduceMeasure(busbw, expected, low, evidence)


def allreduce_hit(ctx: Context, tp: int, m: AllreduceMeasure, nvlink_seen: bool) -> Hit:
    """GPU010 from the measurement alone: TP > 1 and the all-reduce runs far below NVLink."""
    why = ("NVLink is there, but the traffic does not use it (NCCL_P2P_DISABLE, a down NVLink or fabric "
           "manager)" if nvlink_seen else "the traffic goes over PCIe or through the host")
    return Hit(
        title="Tensor-parallel all-reduce runs far below NVLink speed",
        message=f"TP={tp} all-reduces after every layer.{m.note()} So {why}.",
        evidence={"server_config.tensor_parallel_size": tp, **m.evidence}, certainty=Certainty.CONFIRMED,
        impact=0.5,
        fix=Fix("Check `nvidia-smi nvlink -s` and `nvidia-smi topo -m`, that nvidia-fabricmanager runs on NVSwitch "
                "systems, and that NCCL_P2P_DISABLE is not set; otherwise lower the TP and add replicas.",
                ("nvidia-smi nvlink -s", "nvidia-smi topo -m")),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU014", "hbm-bandwidth-low", Severity.HIGH, ("hbm",), RuleDoc(
    what="A GPU's measured device-to-device copy bandwidth (`triage diagnose --active`) is below 60% of its "
         "spec-sheet memory bandwidth.",
    why="Decode reads every weight once per step, so its ceiling is bandwidth / weight bytes: a GPU that "
        "moves 55% of its spec decodes at most 55% as fast. Healthy GPUs copy at 80-90% of spec; far below "
        "means lowered memory clocks, a power cap, throttling, or a sick GPU.",
    example="hbm.gpus[0].copy_bandwidth_gbps = 1500, hbm.gpus[0].spec_bandwidth_gbps = 3350 (H100 SXM)",
    fix="Check clocks and throttling (`nvidia-smi -q -d CLOCK,PERFORMANCE`), the power limit, application clocks "
        "(`nvidia-smi -rac`); run `dcgmi diag -r 3`; drain and RMA a GPU that stays slow.",
    references=("seed 003 GPU layer (dcgmi diag, memory bandwidth)", "seed 004 §2-3 (decode is memory-bound)",
                "DCGM diagnostics: memory bandwidth plugin"),
), thresholds=("GPU014.min_hbm_spec_frac",))
def gpu014(ctx: Context) -> Hit | None:
    min_frac = ctx.th("GPU014.min_hbm_spec_frac")
    evidence: dict[str, Any] = {}
    lines, judged, worst = [], False, None
    for g in _gpus(ctx, "hbm"):
        bw, spec = g.get("copy_bandwidth_gbps"), g.get("spec_bandwidth_gbps")
        if bw is None or not spec:
            continue
        judged = True
        if bw < min_frac * spec:
            key = f"hbm.gpus[{g.get('index')}]"
            evidence.update({f"{key}.copy_bandwidth_gbps": bw, f"{key}.spec_bandwidth_gbps": spec,
                             f"{key}.share_of_spec": round(bw / spec, 3)})
            lines.append(f"GPU {g.get('index')} ({g.get('name')}) copies {bw:,.0f} GB/s, {pct(bw / spec)} of its "
                         f"{spec:,.0f} GB/s spec")
            worst = (bw, spec) if worst is None or bw / spec < worst[0] / worst[1] else worst
    if not judged:
        raise MissingInput("no measured GPU is in the spec table (triage/core/specs.py), so there is nothing to "
                           "compare its bandwidth with")
    if worst is None:
        return None
    message = "; ".join(lines) + "."
    w = served_weight_bytes(ctx)
    if w is not None:
        tp = _tp(ctx)
        at_spec = decode_tokens_per_s_bound(1, worst[1] * 1e9 * tp, w[0], 0.0, 0.0)
        at_meas = decode_tokens_per_s_bound(1, worst[0] * 1e9 * tp, w[0], 0.0, 0.0)
        message += (f" For the served model ({gib(w[0])} of weights, TP={tp}) the batch-1 decode ceiling falls "
                    f"from {at_spec:,.0f} to {at_meas:,.0f} tokens/s ({at_spec - at_meas:,.0f} tokens/s lost).")
        evidence.update({w[1]: w[0], "derived.decode_tokens_per_s_bound_spec": round(at_spec, 1),
                         "derived.decode_tokens_per_s_bound_measured": round(at_meas, 1)})
    else:
        message += _NO_WEIGHTS
    return Hit(
        title="GPU memory bandwidth measures far below spec", message=message, evidence=evidence,
        certainty=Certainty.CONFIRMED, impact=0.7,
        fix=Fix("Look for the cause in clocks, power and throttling (GPU002, GPU003); reset application clocks; "
                "run DCGM's memory diagnostic; drain the GPU if it stays slow.",
                ("nvidia-smi -q -d CLOCK,PERFORMANCE,POWER", "dcgmi diag -r 3")),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU015", "matmul-throughput-low", Severity.MEDIUM, ("matmul",), RuleDoc(
    what="A GPU's measured dense bf16 (or fp8) matmul TFLOP/s (`triage diagnose --active`) is below 45% of the "
         "spec-sheet dense tensor-core peak.",
    why="Prefill and large-batch decode are compute-bound: their ceiling is FLOP/s / (2 x parameters) tokens/s. "
        "Large cuBLAS matmuls reach 60-80% of the dense peak on a healthy GPU; far below means low clocks, a "
        "power cap, thermal throttling or a sick GPU.",
    example="matmul.gpus[0].bf16_tflops = 310, matmul.gpus[0].bf16_spec_tflops = 989.4 (H100 SXM)",
    fix="Check clocks, power cap and throttling (`nvidia-smi -q -d CLOCK,PERFORMANCE,POWER`); run `dcgmi diag -r 3`.",
    references=("DCGM diagnostics: targeted stress / diagnostic plugins", "seed 004 §2 (prefill is compute-bound)"),
), thresholds=("GPU015.min_matmul_spec_frac",))
def gpu015(ctx: Context) -> Hit | None:
    min_frac = ctx.th("GPU015.min_matmul_spec_frac")
    evidence: dict[str, Any] = {}
    lines, judged, worst = [], False, None
    for g in _gpus(ctx, "matmul"):
        for dt in ("bf16", "fp8"):
            got, spec = g.get(f"{dt}_tflops"), g.get(f"{dt}_spec_tflops")
            if got is None or not spec:
                continue
            judged = True
            if got < min_frac * spec:
                key = f"matmul.gpus[{g.get('index')}]"
                evidence.update({f"{key}.{dt}_tflops": got, f"{key}.{dt}_spec_tflops": spec})
                lines.append(f"GPU {g.get('index')} runs {dt} matmuls at {got:,.0f} TFLOP/s, {pct(got / spec)} of its "
                             f"{spec:,.0f} TFLOP/s dense peak")
                if worst is None or got / spec < worst[0] / worst[1]:
                    worst = (got, spec)
    if not judged:
        raise MissingInput("no measured GPU is in the spec table (triage/core/specs.py)")
    if worst is None:
        return None
    message = "; ".join(lines) + "."
    w = served_weight_bytes(ctx)
    if w is not None:
        quant = str(ctx.seen(ServerConfigData).quantization or "").lower()
        params = w[0] / _QUANT_BYTES.get(quant, 2.0)
        at_spec, at_meas = worst[1] * 1e12 / (2 * params), worst[0] * 1e12 / (2 * params)
        message += (f" For the served model (~{params / 1e9:.1f} B parameters) the prefill ceiling per GPU falls from "
                    f"{at_spec:,.0f} to {at_meas:,.0f} tokens/s; decode loses as much once the batch makes it "
                    "compute-bound.")
        evidence.update({w[1]: w[0], "derived.prefill_tokens_per_s_bound_spec": round(at_spec, 1),
                         "derived.prefill_tokens_per_s_bound_measured": round(at_meas, 1)})
    else:
        message += _NO_WEIGHTS
    return Hit(
        title="GPU matmul throughput measures far below spec", message=message, evidence=evidence,
        certainty=Certainty.CONFIRMED, impact=0.5,
        fix=Fix("Look for the cause in clocks, power and throttling (GPU002, GPU003); run DCGM's diagnostic; drain "
                "the GPU if it stays slow.", ("nvidia-smi -q -d CLOCK,PERFORMANCE,POWER", "dcgmi diag -r 3")),
    )


# ------------------------------------------------------------------------------------------------
@rule("MEM003", "numa-node-bandwidth-low", Severity.MEDIUM, ("host_memory",), RuleDoc(
    what="On a host with several NUMA nodes, one node's measured memory copy bandwidth (`triage diagnose "
         "--active`, threads and pages on that node) is below 60% of the best node's.",
    why="Nodes of one server carry the same memory population and measure within a few tens of percent of each "
        "other. A node far below the others has missing, mismatched or failed DIMMs or a degraded channel; "
        "processes and pinned buffers on it (the GPU's staging buffers, tokenizers) run at its speed.",
    example="host_memory.nodes[1].copy_bandwidth_gbps = 48, host_memory.nodes[0].copy_bandwidth_gbps = 160",
    fix="Check the DIMM population and errors per node (`dmidecode -t memory`, `edac-util -v`, the BMC); bind "
        "serving processes to a healthy node until it is fixed.",
    references=("seed 003 memory layer (mbw: system memory bandwidth)", "seed 003 CPU layer (numactl --hardware)"),
), thresholds=("MEM003.min_node_frac_of_best",))
def mem003(ctx: Context) -> Hit | None:
    nodes = [n for n in _active(ctx, "host_memory").get("nodes") or [] if n.get("copy_bandwidth_gbps") is not None]
    if len(nodes) < 2:
        raise MissingInput("this host has a single NUMA node (or one was measured): nothing to compare")
    best = max(nodes, key=lambda n: n["copy_bandwidth_gbps"])
    min_frac = ctx.th("MEM003.min_node_frac_of_best")
    slow = [n for n in nodes if n["copy_bandwidth_gbps"] < min_frac * best["copy_bandwidth_gbps"]]
    if not slow:
        return None
    evidence: dict[str, Any] = {f"host_memory.nodes[{best['node']}].copy_bandwidth_gbps": best["copy_bandwidth_gbps"]}
    for n in slow:
        evidence[f"host_memory.nodes[{n['node']}].copy_bandwidth_gbps"] = n["copy_bandwidth_gbps"]
    rates = sorted(n["copy_bandwidth_gbps"] for n in nodes)
    median = (rates[(len(rates) - 1) // 2] + rates[len(rates) // 2]) / 2
    return Hit(
        title="One NUMA node's memory is far slower than the others",
        message="; ".join(f"node {n['node']} copies {n['copy_bandwidth_gbps']:.1f} GB/s, "
                          f"{pct(n['copy_bandwidth_gbps'] / best['copy_bandwidth_gbps'])} of node {best['node']}'s "
                          f"{best['copy_bandwidth_gbps']:.1f} GB/s" for n in slow)
                + f" (median of the nodes: {median:.1f} GB/s).",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.3,
        fix=Fix("Check that node's DIMMs and memory errors; until it is fixed, bind the server and its GPU's "
                "staging buffers to a healthy node.", ("numactl --hardware", "sudo dmidecode -t memory")),
    )
