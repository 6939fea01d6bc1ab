"""GPU and hardware rules (probes: gpu via NVML, kernel_log)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import (
    GpuData,
    KernelLogData,
    ServerConfigData,
    ServerMetricsData,
    ServerProcessData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.core.xid import XID_MEANINGS
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engines import engine_flags
from triage.rules.fmt import gib, pct
from triage.rules.registry import rule


def _gid(g: dict[str, Any]) -> str:
    return f"gpu.gpus[{g.index}]"


# ------------------------------------------------------------------------------------------------
@rule("GPU001", "vram-spillover", Severity.HIGH, ("gpu", "server_process"), RuleDoc(
    what="VRAM is (nearly) full and the server shows signs of offloading to the CPU: an explicit "
         "`--cpu-offload-gb`, the server's host RSS growing during the window, or a pegged server thread "
         "while the GPU is starved.",
    why="When weights or KV do not fit, frameworks quietly move layers to host memory. Host-to-GPU "
        "transfers run 10-50x slower than HBM, so decode collapses to a few tokens/s (seed 000 §1).",
    example="gpu.gpus[0].memory_used_frac = 0.99, server_process.rss_growth_bytes = 6.4e9, "
            "server_process.max_thread_cpu_pct = 100, gpu.gpus[0].utilization_gpu_pct = 12",
    fix="Quantize (`--quantization fp8` on Hopper/Blackwell, AWQ/GPTQ INT4 elsewhere), shard over more GPUs "
        "(`--tensor-parallel-size`), or use a bigger GPU. `triage plan` shows the fit.",
    references=("seed 000 §1 (wrong GPU: model doesn't fit)", "seed 001 (the wrong GPU can look cheap until it spills)"),
), thresholds=("GPU001.vram_used_frac", "GPU001.rss_growth_bytes", "GPU001.cpu_busy_pct", "GPU001.gpu_starved_util_pct"))
def gpu001(ctx: Context) -> Hit | None:
    full = []
    measured = False
    for g in ctx.serving_gpus():
        used, total = g.memory_used_bytes, g.memory_total_bytes
        if used is None or not total:
            continue
        measured = True
        if used / total >= ctx.th("GPU001.vram_used_frac"):
            full.append((g, used / total))
    if not measured:
        raise MissingInput("gpu memory_used_bytes/memory_total_bytes were not measured")
    if not full:
        return None
    proc = ctx.need(ServerProcessData)
    evidence: dict[str, Any] = {f"{_gid(g)}.memory_used_frac": round(f, 3) for g, f in full}
    signals = []
    cmdline = [str(a) for a in proc.cmdline or []]
    for i, arg in enumerate(cmdline):
        value = arg.split("=", 1)[1] if arg.startswith("--cpu-offload-gb=") else (
            cmdline[i + 1] if arg == "--cpu-offload-gb" and i + 1 < len(cmdline) else None)
        if value is not None:
            try:
                if float(value) > 0:
                    evidence["server_process.cmdline.cpu_offload_gb"] = float(value)
                    signals.append(f"--cpu-offload-gb {value}")
            except ValueError:
                pass
    start, end = proc.rss_bytes_start, proc.rss_bytes_end
    if start is not None and end is not None:
        growth = end - start
        if growth >= ctx.th("GPU001.rss_growth_bytes"):
            evidence["server_process.rss_growth_bytes"] = growth
            signals.append(f"host RSS grew {gib(growth)} in {proc.window_s} s")
    thread = proc.max_thread_cpu_pct
    utils = [g.utilization_gpu_pct for g, _ in full if g.utilization_gpu_pct is not None]
    if thread is not None and utils and thread >= ctx.th("GPU001.cpu_busy_pct") and \
            max(utils) < ctx.th("GPU001.gpu_starved_util_pct"):
        evidence["server_process.max_thread_cpu_pct"] = thread
        evidence["gpu.utilization_gpu_pct_max"] = max(utils)
        signals.append(f"a server thread at {thread:.0f}% CPU while the GPU runs at {max(utils):.0f}%")
    if not signals:
        if start is None and thread is None and not cmdline:
            raise MissingInput("VRAM is full but server_process has no RSS, thread CPU or command line to tell "
                               "offload from a healthy, preallocated KV pool")
        return None
    major, minor = ctx.compute_capability() if any(g.compute_capability for g, _ in full) else (0, 0)
    knob = "quantization_fp8" if (major, minor) >= (9, 0) else "quantization_int4"
    cmds, note = engine_flags({knob: None}, ctx.engine().name)
    certainty = Certainty.CONFIRMED if "server_process.cmdline.cpu_offload_gb" in evidence else Certainty.LIKELY
    return Hit(
        title="The model spills out of VRAM into host memory",
        message=f"VRAM is {pct(max(f for _, f in full))} used and the server offloads: {'; '.join(signals)}.",
        evidence=evidence, certainty=certainty, impact=0.95,
        fix=Fix(("Make the model fit: quantize it " + ("to FP8 (this GPU supports it)" if knob == "quantization_fp8"
                 else "to INT4 (AWQ or GPTQ checkpoint)") + ", shard it with more tensor parallelism, or move to a "
                 "bigger GPU; drop any --cpu-offload-gb. `triage plan` gives the numbers." + note),
                cmds + ("triage plan",)),
    )


# ------------------------------------------------------------------------------------------------
_BAD_REASONS = {"hw_slowdown": Severity.HIGH, "hw_thermal_slowdown": Severity.HIGH,
                "hw_power_brake_slowdown": Severity.HIGH, "sw_thermal_slowdown": Severity.MEDIUM}


@rule("GPU002", "clock-throttling", Severity.HIGH, ("gpu|bench",), RuleDoc(
    what="While the GPU is busy, a hardware slowdown, hardware thermal slowdown, power-brake or software "
         "thermal clock event is active, or NVML's thermal/board/reliability throttle-time counters grew "
         "during the window. Software power capping at full load is normal and not counted.",
    why="A throttled GPU runs its SMs and often its memory at a fraction of their clocks: every kernel, so "
        "TTFT and TPOT, slows in proportion, and intermittently, so p99 suffers most.",
    example="gpu.gpus[0].clock_event_reasons = ['hw_thermal_slowdown'], gpu.gpus[0].utilization_gpu_pct = 97, "
            "gpu.gpus[0].sm_clock_mhz = 1005, gpu.gpus[0].sm_clock_max_mhz = 1980",
    fix="Fix cooling and airflow (fans, blanking panels, inlet temperature), power delivery (PSU, cables) and "
        "check the BMC/IPMI event log for power-brake assertions.",
    references=("seed 003 GPU layer (HW Thermal Slowdown, HW Power Brake)", "NVML clocks event reasons / DCGM health"),
), thresholds=("common.gpu_busy_util_pct", "GPU002.throttle_time_frac"))
def gpu002(ctx: Context) -> Hit | None:
    busy = ctx.th("common.gpu_busy_util_pct")
    evidence: dict[str, Any] = {}
    severity = None
    seen = False
    if ctx.has("gpu"):
        window = ctx.seen(GpuData).window_s
        for g in ctx.serving_gpus():
            reasons, util = g.clock_event_reasons, g.utilization_gpu_pct
            if reasons is not None and util is not None:
                seen = True
                bad = [r for r in reasons if r in _BAD_REASONS]
                if bad and util >= busy:
                    evidence[f"{_gid(g)}.clock_event_reasons"] = bad
                    evidence[f"{_gid(g)}.utilization_gpu_pct"] = util
                    if g.sm_clock_mhz is not None:
                        evidence[f"{_gid(g)}.sm_clock_mhz"] = g.sm_clock_mhz
                        evidence[f"{_gid(g)}.sm_clock_max_mhz"] = g.sm_clock_max_mhz
                    for r in bad:
                        severity = _BAD_REASONS[r] if severity is None or _BAD_REASONS[r].rank < severity.rank else severity
            fracs, deltas = g.throttle_time_frac, g.throttle_time_delta_us
            if fracs and any(v is not None for v in (fracs.thermal, fracs.board_limit, fracs.reliability)):
                seen = True
                frac = sum(v or 0 for v in (fracs.thermal, fracs.board_limit, fracs.reliability))
                if frac >= ctx.th("GPU002.throttle_time_frac"):
                    evidence[f"{_gid(g)}.throttle_time_frac.thermal+board_limit+reliability"] = round(frac, 4)
                    severity = severity or Severity.HIGH
            elif deltas and window and any(v is not None for v in (deltas.thermal, deltas.board_limit,
                                                                   deltas.reliability)):
                seen = True
                throttled_us = sum(v or 0 for v in (deltas.thermal, deltas.board_limit, deltas.reliability))
                if throttled_us / (window * 1e6) >= ctx.th("GPU002.throttle_time_frac"):
                    evidence[f"{_gid(g)}.throttle_time_delta_us.thermal+board_limit+reliability"] = throttled_us
                    evidence["gpu.window_s"] = window
                    severity = severity or Severity.HIGH
    if ctx.bench is not None:
        for lv in ctx.bench.levels:
            gpu = lv.gpu or {}
            reasons, util = gpu.get("clock_event_reasons_seen"), gpu.get("utilization_gpu_pct_mean")
            if reasons is None or util is None:
                continue
            seen = True
            bad = [r for r in reasons if r in _BAD_REASONS]
            if bad and util >= busy:
                evidence[f"{level_label(lv)}.gpu.clock_event_reasons_seen"] = bad
                evidence[f"{level_label(lv)}.gpu.utilization_gpu_pct_mean"] = util
                for r in bad:
                    severity = _BAD_REASONS[r] if severity is None or _BAD_REASONS[r].rank < severity.rank else severity
    if not seen:
        raise MissingInput("no clock event reasons or throttle-time counters were measured" + ctx.probe_note("gpu"))
    if not evidence:
        return None
    reasons = sorted({r for k, v in evidence.items() if k.endswith(("clock_event_reasons", "reasons_seen")) for r in v})
    clocks = [(evidence[k], evidence.get(k.replace("sm_clock_mhz", "sm_clock_max_mhz")))
              for k in evidence if k.endswith(".sm_clock_mhz")]
    fracs = [v for k, v in evidence.items() if ".throttle_time_frac." in k]
    counted = f"thermal/board/reliability throttling for {pct(max(fracs))} of the window" if fracs else \
        "the thermal/board/reliability throttle-time counters grew"
    detail = (f" ({', '.join(reasons)})" if reasons else f" ({counted})") + (
        f"; SM clock {clocks[0][0]:.0f} of {clocks[0][1]:.0f} MHz" if clocks and clocks[0][1] else "")
    return Hit(
        title="The GPU is throttling its clocks under load",
        message=f"The GPU slowed its clocks while serving{detail}: every kernel runs slower for as long as it "
                "lasts.",
        evidence=evidence, severity=severity, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix("Check cooling (fans, airflow, inlet temperature), power delivery (PSU, cables) and the BMC event "
                "log; watch the reasons live with the command below.",
                ("nvidia-smi -q -d PERFORMANCE", "nvidia-smi dmon -s pucvmet -d 1")),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU003", "power-cap-lowered", Severity.MEDIUM, ("gpu",), RuleDoc(
    what="The enforced power limit is below the board's default power limit.",
    why="A lowered cap makes the GPU clock down as soon as it draws that power, which under serving load is "
        "all the time: throughput drops roughly with the cap.",
    example="gpu.gpus[0].power_limit_enforced_w = 300, gpu.gpus[0].power_limit_default_w = 700",
    fix="Restore the default with `nvidia-smi -i N -pl <default>`, or find the policy (DCGM, a power-capping "
        "daemon, the datacenter's rack budget) that lowered it.",
    references=("seed 003 GPU layer (power draw)", "nvidia-smi -q -d POWER"),
), thresholds=("GPU003.power_limit_frac_of_default",))
def gpu003(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    cmds = []
    measured = False
    for g in ctx.serving_gpus():
        enforced, default = g.power_limit_enforced_w, g.power_limit_default_w
        if enforced is None or not default:
            continue
        measured = True
        if enforced < default * ctx.th("GPU003.power_limit_frac_of_default"):
            evidence[f"{_gid(g)}.power_limit_enforced_w"] = enforced
            evidence[f"{_gid(g)}.power_limit_default_w"] = default
            cmds.append(f"sudo nvidia-smi -i {g.index} -pl {default:.0f}")
    if not measured:
        raise MissingInput("gpu power_limit_enforced_w/power_limit_default_w were not measured")
    if not evidence:
        return None
    return Hit(
        title="The GPU power limit is set below its default",
        message="The power cap is below the board default (" + ", ".join(
            f"GPU {k.split('[')[1].split(']')[0]}: {v:.0f} W of {evidence[k.replace('enforced', 'default')]:.0f} W"
            for k, v in evidence.items() if k.endswith("power_limit_enforced_w")) + "), so it clocks down under load.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Restore the default power limit (and find whatever lowered it, or it will come back).", tuple(cmds)),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU004", "pcie-link-degraded", Severity.HIGH, ("gpu",), RuleDoc(
    what="The PCIe link runs at a lower generation or width than the card supports **while the GPU is busy**. "
         "An idle GPU downshifts its link on purpose to save power; that is not counted.",
    why="Host-device copies (inputs, sampled tokens, offloaded or swapped KV), weight loading and, without "
        "NVLink, tensor-parallel all-reduces all cross PCIe. A Gen3 x8 link has an eighth of Gen5 x16 "
        "bandwidth: in seed 003's case TTFT p99 rose from 1.2 s to 3.5 s at 80% SM utilization.",
    example="gpu.gpus[0].pcie_link_gen_current = 3, gpu.gpus[0].pcie_link_gen_max = 5, "
            "gpu.gpus[0].pcie_link_width_current = 8, gpu.gpus[0].pcie_link_width_max = 16, "
            "gpu.gpus[0].pcie_read_utilization_gpu_pct = 85",
    fix="Reseat the card, check the riser and the slot, and the BIOS lane settings (bifurcation, Gen speed).",
    references=("seed 003 case 1 (PCIe bottleneck, Gen3 x8 instead of Gen5 x16)", "nvidia-smi -q -d PCIE"),
), thresholds=("common.gpu_busy_util_pct",))
def gpu004(ctx: Context) -> Hit | None:
    busy = ctx.th("common.gpu_busy_util_pct")
    evidence: dict[str, Any] = {}
    severity = None
    certainty = Certainty.CONFIRMED
    judged = False
    for g in ctx.serving_gpus():
        gen, gen_max, width, width_max = (g.pcie_link_gen_current, g.pcie_link_gen_max,
                                          g.pcie_link_width_current, g.pcie_link_width_max)
        util = g.pcie_read_utilization_gpu_pct
        util_key = "pcie_read_utilization_gpu_pct"
        if util is None:
            util, util_key = g.utilization_gpu_pct, "utilization_gpu_pct"
        if None in (gen, gen_max, width, width_max) or util is None:
            continue
        if util < busy:
            continue  # idle links downshift legitimately: nothing can be judged from this GPU now
        judged = True
        card_gen = max(gen_max, g.pcie_link_gen_gpu_max or gen_max)
        if gen < gen_max or width < width_max:
            evidence.update({f"{_gid(g)}.pcie_link_gen_current": gen, f"{_gid(g)}.pcie_link_gen_max": gen_max,
                             f"{_gid(g)}.pcie_link_width_current": width, f"{_gid(g)}.pcie_link_width_max": width_max,
                             f"{_gid(g)}.{util_key}": util})
            severity = Severity.HIGH
        elif gen < card_gen:
            evidence.update({f"{_gid(g)}.pcie_link_gen_current": gen, f"{_gid(g)}.pcie_link_gen_gpu_max": card_gen,
                             f"{_gid(g)}.{util_key}": util})
            severity = severity or Severity.MEDIUM
            certainty = Certainty.LIKELY if severity is Severity.MEDIUM else certainty
    if not judged and not evidence:
        raise MissingInput("no GPU was busy when its PCIe link was read (an idle link downshifts on purpose); "
                           "run diagnose while the server is under load, e.g. during `triage bench`")
    if not evidence:
        return None
    platform_only = severity is Severity.MEDIUM
    links = []
    for g in ctx.serving_gpus():
        key = f"{_gid(g)}.pcie_link_gen_current"
        if key in evidence:
            links.append(f"GPU {g.index}: Gen{g.pcie_link_gen_current} x{g.pcie_link_width_current} "
                         f"of Gen{max(g.pcie_link_gen_max or 0, g.pcie_link_gen_gpu_max or 0)} "
                         f"x{g.pcie_link_width_max}")
    return Hit(
        title="The PCIe link is degraded under load" if not platform_only else "The slot caps the GPU's PCIe generation",
        message=("The GPU is busy but its PCIe link trained below its maximum generation or width ("
                 if not platform_only else
                 "The link runs at the platform's maximum, which is below what the card supports (")
                + "; ".join(links) + ").",
        evidence=evidence, severity=severity, certainty=certainty, impact=0.6,
        fix=Fix("Reseat the card, check the riser and slot, and the BIOS PCIe settings (link speed, bifurcation); "
                "confirm with the command below while the GPU is loaded.", ("nvidia-smi -q -d PCIE",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU005", "memory-errors", Severity.CRITICAL, ("gpu",), RuleDoc(
    what="Uncorrectable volatile ECC errors, too many retired pages (>= 63 in total, or > 15 from double-bit "
         "errors), pending page retirement, or a row-remap failure or pending remap.",
    why="Uncorrectable memory errors kill or corrupt running requests; a pending retirement or remap keeps "
        "the bad memory in use until the GPU is reset. Serving on such a GPU gives errors and restarts.",
    example="gpu.gpus[2].ecc_uncorrected_volatile = 4, gpu.gpus[2].remapped_rows_pending = true",
    fix="Drain the node and reset the GPU (`nvidia-smi -r -i N`, with nothing running on it); if errors return "
        "or a remap failed, RMA the board.",
    references=("DCGM health watches (memory): retired pages and row remapping thresholds",
                "NVIDIA GPU memory error management guide"),
), thresholds=("GPU005.retired_pages_total", "GPU005.retired_pages_dbe"))
def gpu005(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    severity = None
    measured = False
    cmds = []

    def bump(sev: Severity) -> None:
        nonlocal severity
        severity = sev if severity is None or sev.rank < severity.rank else severity

    for g in ctx.gpus():
        gid = _gid(g)
        fields = {"ecc_uncorrected_volatile": g.ecc_uncorrected_volatile, "retired_pages_sbe": g.retired_pages_sbe,
                  "retired_pages_dbe": g.retired_pages_dbe, "retired_pages_pending": g.retired_pages_pending,
                  "remapped_rows_pending": g.remapped_rows_pending, "remapped_rows_failure": g.remapped_rows_failure}
        if all(v is None for v in fields.values()):
            continue
        measured = True
        hit = False
        if (fields["ecc_uncorrected_volatile"] or 0) > 0:
            evidence[f"{gid}.ecc_uncorrected_volatile"] = fields["ecc_uncorrected_volatile"]
            bump(Severity.CRITICAL)
            hit = True
        if fields["remapped_rows_failure"]:
            evidence[f"{gid}.remapped_rows_failure"] = True
            bump(Severity.CRITICAL)
            hit = True
        sbe, dbe = fields["retired_pages_sbe"] or 0, fields["retired_pages_dbe"] or 0
        if sbe + dbe >= ctx.th("GPU005.retired_pages_total") or dbe > ctx.th("GPU005.retired_pages_dbe"):
            evidence[f"{gid}.retired_pages_sbe"] = sbe
            evidence[f"{gid}.retired_pages_dbe"] = dbe
            bump(Severity.HIGH)
            hit = True
        for key in ("retired_pages_pending", "remapped_rows_pending"):
            if fields[key]:
                evidence[f"{gid}.{key}"] = True
                bump(Severity.HIGH)
                hit = True
        if hit:
            cmds.append(f"sudo nvidia-smi -r -i {g.index}")
    if not measured:
        raise MissingInput("no ECC, page retirement or row remapping counters (ECC off or unsupported on this GPU)")
    if not evidence:
        return None
    return Hit(
        title="GPU memory errors: drain and reset",
        message="The GPU reports uncorrectable or pending memory errors; requests on it can fail or return "
                "garbage until it is reset.",
        evidence=evidence, severity=severity, certainty=Certainty.CONFIRMED, impact=1.0,
        fix=Fix("Drain the node, stop the server, then reset the GPU; RMA it if errors come back or a row remap "
                "failed.", tuple(cmds)),
    )


# ------------------------------------------------------------------------------------------------
_XID_CRITICAL = frozenset({48, 62, 64, 74, 79, 92, 94, 95, 119, 120})


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


@rule("GPU006", "xid-errors", Severity.HIGH, ("kernel_log",), RuleDoc(
    what="NVRM Xid lines in the kernel log. Hardware Xids (79 fell off the bus, 48/94/95 ECC, 63/64 retirement "
         "and remapping, 74 NVLink, 119/120 GSP) are critical; application-level ones (13, 31, 43, 45) are "
         "reported as possible causes.",
    why="An Xid means the driver saw the GPU fail: the requests on it die, the engine restarts, and a GPU "
        "that fell off the bus serves nothing until the node is fixed.",
    example="kernel_log.xid_events = [{xid: 79, pci_bus_id: '0000:3B:00.0'}]",
    fix="Look up each Xid in NVIDIA's Xid catalogue; for hardware Xids drain the node, reset or reboot, and RMA "
        "if it repeats.",
    references=("NVIDIA Xid errors catalogue", "DCGM diagnostics"),
))
def gpu006(ctx: Context) -> Hit | None:
    events = ctx.measured(ctx.need(KernelLogData).xid_events, "kernel_log.xid_events")
    counts: dict[int, int] = {}
    if ctx.seen(KernelLogData).xid_counts:   # complete counts; xid_events keeps only the last lines
        counts = {int(x): int(n) for x, n in ctx.seen(KernelLogData).xid_counts.items() if n}
    else:
        for e in events:
            if e.xid is not None:
                counts[int(e.xid)] = counts.get(int(e.xid), 0) + 1
    if not counts:
        return None
    critical = sorted(x for x in counts if x in _XID_CRITICAL)
    buses = sorted({e.pci_bus_id for e in events if e.pci_bus_id})
    evidence: dict[str, Any] = {f"kernel_log.xid_events.xid_{x}_count": n for x, n in sorted(counts.items())}
    if buses:
        evidence["kernel_log.xid_events.pci_bus_ids"] = buses
    names = "; ".join(f"Xid {x}: {XID_MEANINGS.get(x, 'see the Xid catalogue')}" for x in sorted(counts))
    newest = ctx.seen(KernelLogData).newest_xid_age_s
    when = ""
    if newest is not None:
        evidence["kernel_log.newest_xid_age_s"] = newest
        when = f" The newest is {_ago(newest)} old (the log covers the time since boot)."
    return Hit(
        title="The kernel log has GPU Xid errors",
        message=f"The driver logged {sum(counts.values())} Xid event(s): {names}.{when}",
        evidence=evidence, severity=Severity.CRITICAL if critical else Severity.MEDIUM,
        certainty=Certainty.CONFIRMED if critical else Certainty.POSSIBLE, impact=0.9 if critical else 0.3,
        fix=Fix(("Hardware Xids: drain the node, reset or reboot, and RMA the GPU if they repeat. "
                 if critical else "These Xids usually come from the application (a bad kernel or OOB access): "
                 "check the server's log around the same time. ") + "Read the lines with the command below.",
                ("sudo dmesg -T | grep -i xid",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU007", "persistence-mode-off", Severity.LOW, ("gpu",), RuleDoc(
    what="Persistence mode is disabled on a Linux server GPU.",
    why="Without persistence mode the driver tears the GPU state down whenever no process holds it, so the "
        "next start (or each short-lived client) pays seconds of initialization, and clocks/ECC settings "
        "can be lost between runs.",
    example="gpu.gpus[0].persistence_mode_enabled = false",
    fix="`sudo nvidia-smi -pm 1` (or run nvidia-persistenced as a service).",
    references=("DCGM diagnostic level r1 (persistence mode check)", "NVIDIA driver persistence documentation"),
))
def gpu007(ctx: Context) -> Hit | None:
    values = [(g, g.persistence_mode_enabled) for g in ctx.gpus()]
    if all(v is None for _, v in values):
        raise MissingInput("gpu.persistence_mode_enabled was not measured (not supported outside Linux)")
    off = [g for g, v in values if v is False]
    if not off:
        return None
    return Hit(
        title="GPU persistence mode is off",
        message=f"{len(off)} GPU(s) have persistence mode disabled: each time the GPU is released its driver "
                "state is torn down and rebuilt.",
        evidence={f"{_gid(g)}.persistence_mode_enabled": False for g in off},
        certainty=Certainty.CONFIRMED, impact=0.1,
        fix=Fix("Enable persistence mode (or run nvidia-persistenced).",
                ("sudo nvidia-smi -pm 1",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU008", "gpu-underutilized-under-load", Severity.HIGH, ("gpu|bench",), RuleDoc(
    what="GPU utilization stays below 40% while at least 4 requests are in flight.",
    why="With several requests in flight, a batching engine keeps the GPU at 80-95%. A low figure means the "
        "requests are served one at a time (static or no batching), or something upstream (the client, the "
        "tokenizer, a proxy) starves the GPU (seed 000 §4).",
    example="bench.c16.gpu.utilization_gpu_pct_mean = 28, bench.c16.server.num_requests_running_mean = 1.0",
    fix="Serve with continuous batching (vLLM, SGLang, TGI); raise `--max-num-seqs`; check for a client, CPU "
        "or single-request proxy bottleneck.",
    references=("seed 000 §4 and quick reference (GPU util <40% under concurrent load)",),
), thresholds=("GPU008.low_util_pct", "GPU008.min_in_flight"))
def gpu008(ctx: Context) -> Hit | None:
    low, min_load = ctx.th("GPU008.low_util_pct"), ctx.th("GPU008.min_in_flight")
    evidence: dict[str, Any] = {}
    loaded = False
    running_max = None
    if ctx.bench is not None:
        for lv in ctx.levels():
            gpu, server = lv.gpu or {}, lv.server or {}
            util = gpu.get("utilization_gpu_pct_mean")
            in_flight = lv.client.achieved_concurrency or lv.concurrency
            if util is None or in_flight is None or in_flight < min_load:
                continue
            loaded = True
            if util < low:
                p = level_label(lv)
                evidence[f"{p}.gpu.utilization_gpu_pct_mean"] = util
                evidence[f"{p}.client.achieved_concurrency"] = in_flight
                if server.get("num_requests_running_mean") is not None:
                    evidence[f"{p}.server.num_requests_running_mean"] = server["num_requests_running_mean"]
                running_max = server.get("num_requests_running_max", running_max)
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if ctx.has("gpu") and metrics is not None:
        running, waiting = metrics.num_requests_running, metrics.num_requests_waiting
        if running is not None:
            in_flight = running + (waiting or 0)
            utils = [g.utilization_gpu_pct for g in ctx.serving_gpus() if g.utilization_gpu_pct is not None]
            if utils and in_flight >= min_load:
                loaded = True
                if max(utils) < low:
                    evidence["gpu.utilization_gpu_pct_max_over_serving_gpus"] = max(utils)
                    evidence["server_metrics.num_requests_running"] = running
                    evidence["server_metrics.num_requests_waiting"] = waiting
                    running_max = running
    if not loaded:
        raise MissingInput(f"never saw >= {min_load:.0f} requests in flight together with GPU utilization "
                           "(run `triage bench --concurrency 1,4,16`)" + ctx.probe_note("gpu"))
    if not evidence:
        return None
    engine = ctx.engine()
    cfg_seqs = ctx.seen(ServerConfigData).max_num_seqs
    knobs = {}
    text = "Check the path from client to GPU: a single-request proxy, a client or tokenizer bottleneck (CPU003), "
    if engine.name in ("vllm", "sglang", "tgi") and cfg_seqs is not None and running_max is not None \
            and running_max >= cfg_seqs:
        knobs["max_num_seqs"] = max(256, int(cfg_seqs) * 2)
        text = f"The batch is capped at max_num_seqs={cfg_seqs}: raise it. Then check " + text[len("Check "):]
    cmds, note = engine_flags(knobs, engine.name) if knobs else ((), "")
    return Hit(
        title="The GPU idles while requests are in flight",
        message="GPU utilization stays low although several requests are in flight: they are not being batched "
                "together, or something upstream starves the GPU.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.8,
        fix=Fix(text + "or an engine without continuous batching (use vLLM, SGLang or TGI)." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU009", "foreign-gpu-process", Severity.MEDIUM, ("gpu", "server_process"), RuleDoc(
    what="Another process (not the server or its children) holds at least 1 GiB on a GPU the server uses.",
    why="The memory it holds is missing from the KV cache (vLLM sizes its pool from free memory at start: "
        "'Free memory on device ... is less than desired GPU memory utilization'), and its kernels compete "
        "for the SMs and bandwidth.",
    example="gpu.gpus[0].compute_processes[1] = {pid: 4242, name: 'python', used_memory_bytes: 8.6e9}",
    fix="Move the other job off the serving GPU (CUDA_VISIBLE_DEVICES, scheduler isolation, MIG), then restart "
        "the server so it can size its KV cache again.",
    references=("vLLM startup error 'Free memory on device ... less than desired GPU memory utilization'",),
), thresholds=("GPU009.foreign_bytes",))
def gpu009(ctx: Context) -> Hit | None:
    pids = ctx.server_pids()
    if not pids:
        raise MissingInput("server_process.pid is unknown, so own and foreign GPU processes cannot be told apart")
    gpus = ctx.gpus()
    if not any(p.pid in pids for g in gpus for p in g.compute_processes or []):
        raise MissingInput("none of the server's processes appear in NVML's process list (a container PID "
                           "namespace?), so own and foreign GPU processes cannot be told apart")
    serving = ctx.serving_gpus()
    if any(g.compute_processes is None for g in serving):
        raise MissingInput("gpu.compute_processes was not measured")
    evidence: dict[str, Any] = {}
    for g in serving:
        for i, p in enumerate(g.compute_processes or []):
            if p.pid not in pids and (p.used_memory_bytes or 0) >= ctx.th("GPU009.foreign_bytes"):
                key = f"{_gid(g)}.compute_processes[{i}]"
                evidence[f"{key}.pid"] = p.pid
                evidence[f"{key}.name"] = p.name
                evidence[f"{key}.used_memory_bytes"] = p.used_memory_bytes
    if not evidence:
        return None
    return Hit(
        title="Another process holds memory on the serving GPU",
        message="Processes outside the server hold memory on a serving GPU (" + ", ".join(
            f"pid {evidence[k]} {evidence[k.replace('.pid', '.name')] or '?'}: "
            f"{gib(evidence[k.replace('.pid', '.used_memory_bytes')])}"
            for k in evidence if k.endswith(".pid")) + "): that memory is missing from the KV cache and their "
                "kernels compete with the server's.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Move the other process off this GPU (CUDA_VISIBLE_DEVICES, your scheduler's GPU isolation, or "
                "MIG), then restart the server so it sizes its KV cache again.",
                ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",)),
    )


# ------------------------------------------------------------------------------------------------
_PCIE_ONLY = frozenset({"hostbridge", "node", "system"})


@rule("GPU010", "tp-without-nvlink", Severity.HIGH, ("gpu", "server_config"), RuleDoc(
    what="Tensor parallelism > 1 over GPUs with no NVLink between them whose common ancestor is a PCIe host "
         "bridge, the NUMA node or the system (SMP interconnect).",
    why="Tensor parallelism all-reduces after every layer. NVLink moves 600-900 GB/s; PCIe through the host "
        "bridge or across sockets moves a few tens of GB/s, so communication eats the gain (seed 002 step 6).",
    example="server_config.tensor_parallel_size = 2, gpu.topology[0] = {gpu_a: 0, gpu_b: 1, "
            "common_ancestor: 'system', nvlink: false}",
    fix="Place the TP group on NVLink-connected GPUs, lower the TP (and use replicas), or use pipeline "
        "parallelism across PCIe.",
    references=("seed 002 step 6 (PCIe interconnect negates TP gains)", "seed 004 §9 (TP needs NVLink)",
                "nvidia-smi topo -m"),
))
def gpu010(ctx: Context) -> Hit | None:
    tp = ctx.measured(ctx.need(ServerConfigData).tensor_parallel_size, "server_config.tensor_parallel_size")
    if tp <= 1:
        return None
    topology = ctx.need(GpuData).topology
    if topology is None:
        raise MissingInput("gpu.topology was not measured")
    serving = {g.index for g in ctx.serving_gpus()}
    pairs = [t for t in topology if t.gpu_a in serving and t.gpu_b in serving]
    if not pairs:
        raise MissingInput("no topology entry links two of the serving GPUs")
    bad = [t for t in pairs if not t.nvlink and t.common_ancestor in _PCIE_ONLY]
    if not bad:
        return None
    evidence: dict[str, Any] = {"server_config.tensor_parallel_size": tp}
    for t in bad:
        evidence[f"gpu.topology[{t.gpu_a},{t.gpu_b}].common_ancestor"] = t.common_ancestor
    cmds, note = engine_flags({"tensor_parallel_size": max(1, tp // 2)}, ctx.engine().name)
    return Hit(
        title="Tensor parallelism runs over PCIe, without NVLink",
        message=f"TP={tp} all-reduces every layer over PCIe ({', '.join(sorted({t.common_ancestor for t in bad}))}) "
                "instead of NVLink.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.5,
        fix=Fix("Put the TP group on NVLink-connected GPUs (see `nvidia-smi topo -m`), or lower the TP and add "
                "replicas, or use pipeline parallelism across PCIe." + note, ("nvidia-smi topo -m",) + cmds),
    )


# ------------------------------------------------------------------------------------------------
# Variables that slow serving when set (to anything but an "off" value): severity and what they do.
_DEBUG_ENV = {
    "CUDA_LAUNCH_BLOCKING": (Severity.HIGH, "makes every kernel launch synchronous"),
    "VLLM_TRACE_FUNCTION": (Severity.HIGH, "traces every Python function call in vLLM"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": (Severity.HIGH, "turns off PyTorch's CUDA caching allocator"),
    "CUDA_INJECTION64_PATH": (Severity.MEDIUM, "injects a profiler/tracer into the process"),
    "NSIGHT_CUDA_DEBUGGER": (Severity.MEDIUM, "runs under the CUDA debugger"),
    "CUDA_PROFILE": (Severity.MEDIUM, "turns on the legacy CUDA profiler"),
    "COMPUTE_PROFILE": (Severity.MEDIUM, "turns on the legacy CUDA profiler (its older name)"),
    "NVTX_INJECTION64_PATH": (Severity.MEDIUM, "injects an NVTX tracing tool into the process"),
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": (Severity.LOW, "arms GPU core dumps, a debugging mode"),
    "CUDA_DEVICE_WAITS_ON_EXCEPTION": (Severity.MEDIUM, "a debugging mode"),
    "CUDA_MEMCHECK_PATCH_MODULE": (Severity.MEDIUM, "a memory-checker mode"),
    "TORCH_COMPILE_DEBUG": (Severity.MEDIUM, "dumps torch.compile debug artefacts"),
    "NCCL_P2P_DISABLE": (Severity.MEDIUM, "forces GPU-to-GPU traffic through host memory"),
    "NCCL_SHM_DISABLE": (Severity.LOW, "disables NCCL's shared-memory transport"),
    "NCCL_DEBUG": (Severity.LOW, "logs every NCCL call at INFO/TRACE"),
}
_OFF_VALUES = frozenset({"", "0", "false", "no", "off", "warn", "version"})


@rule("GPU011", "bad-cuda-env", Severity.HIGH, ("server_process",), RuleDoc(
    what="A debugging or profiling variable is set in the server's environment: CUDA_LAUNCH_BLOCKING=1, "
         "CUDA_INJECTION64_PATH, NSIGHT_CUDA_DEBUGGER, CUDA_PROFILE, VLLM_TRACE_FUNCTION, "
         "PYTORCH_NO_CUDA_MEMORY_CACHING, NCCL_P2P_DISABLE, NCCL_DEBUG=INFO and the like.",
    why="CUDA_LAUNCH_BLOCKING makes every kernel launch synchronous, which defeats CUDA graphs and launch "
        "overlap; injected profilers and debuggers add overhead to every call.",
    example="server_process.debug_env = {CUDA_LAUNCH_BLOCKING: '1'}",
    fix="Unset them in the service definition and restart the server.",
    references=("DCGM diagnostic r1 (environment variable checks)", "CUDA environment variables reference"),
))
def gpu011(ctx: Context) -> Hit | None:
    env = ctx.need(ServerProcessData).debug_env
    if env is None:
        raise MissingInput("server_process.debug_env was not measured (the environment was not readable)")
    bad = {k: v for k, v in env.items() if k in _DEBUG_ENV and str(v).strip().lower() not in _OFF_VALUES}
    if not bad:
        return None
    severity = min((_DEBUG_ENV[k][0] for k in bad), key=lambda s: s.rank)
    return Hit(
        title="Debugging/profiling environment variables are set in the server",
        message="The server runs with " + "; ".join(f"{k}={v} ({_DEBUG_ENV[k][1]})" for k, v in sorted(bad.items()))
                + ".",
        evidence={f"server_process.debug_env.{k}": v for k, v in sorted(bad.items())},
        severity=severity, certainty=Certainty.CONFIRMED, impact=0.7 if "CUDA_LAUNCH_BLOCKING" in bad else 0.3,
        fix=Fix("Remove these variables from the server's environment (service file, container spec) and restart.",
                tuple(f"unset {k}" for k in sorted(bad))),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU012", "gpu-near-thermal-slowdown", Severity.MEDIUM, ("gpu",), RuleDoc(
    what="A busy GPU runs within 5 °C of its slowdown temperature (NVML's temperature threshold at which the "
         "GPU starts to clock down), before any slowdown reason has shown up.",
    why="The next warm afternoon, a failing fan or a neighbour's heat tips it into HW thermal slowdown "
        "(GPU002): clocks drop and latency jumps. Seen early, it is a cooling ticket, not an incident.",
    example="gpu.gpus[0].temperature_c = 86, gpu.gpus[0].temperature_slowdown_c = 90, "
            "gpu.gpus[0].utilization_gpu_pct = 94",
    fix="Check airflow, fan curves, inlet temperature and blanking panels; compare with the node's other GPUs.",
    references=("DCGM health watches (thermal)", "nvidia-smi -q -d TEMPERATURE (GPU Slowdown Temp)",
                "seed 003 GPU layer"),
), thresholds=("GPU012.margin_c", "common.gpu_busy_util_pct"))
def gpu012(ctx: Context) -> Hit | None:
    busy, margin = ctx.th("common.gpu_busy_util_pct"), ctx.th("GPU012.margin_c")
    evidence: dict[str, Any] = {}
    measured = False
    for g in ctx.serving_gpus():
        temp, slowdown, util = g.temperature_c, g.temperature_slowdown_c, g.utilization_gpu_pct
        if None in (temp, slowdown, util):
            continue
        measured = True
        if util >= busy and temp >= slowdown - margin:
            evidence.update({f"{_gid(g)}.temperature_c": temp, f"{_gid(g)}.temperature_slowdown_c": slowdown,
                             f"{_gid(g)}.utilization_gpu_pct": util})
    if not measured:
        raise MissingInput("gpu temperature_c/temperature_slowdown_c/utilization_gpu_pct were not measured")
    if not evidence:
        return None
    return Hit(
        title="The GPU runs close to its thermal slowdown point",
        message="Under load the GPU is within a few degrees of the temperature at which it starts to throttle.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.2,
        fix=Fix("Improve cooling before it throttles: airflow, fans, inlet temperature, blanking panels.",
                ("nvidia-smi -q -d TEMPERATURE",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("GPU013", "gpu-lost", Severity.CRITICAL, ("gpu",), RuleDoc(
    what="NVML reports a GPU as lost (GPU_IS_LOST): it fell off the bus and the driver can no longer reach it.",
    why="A lost GPU serves nothing: the engine on it has crashed or hangs, and its tensor-parallel peers "
        "stall with it. It does not come back without a reset or a reboot.",
    example="gpu.gpus[2].lost = true, gpu.gpus[2].pci_bus_id = '00000000:86:00.0'",
    fix="Drain the node, then reset the GPU or reboot; check the kernel log for Xid 79 and the slot, riser "
        "and power; RMA if it repeats.",
    references=("NVML nvmlDeviceGetHandleByIndex GPU_IS_LOST", "NVIDIA Xid 79 (GPU has fallen off the bus)",
                "DCGM health watches"),
))
def gpu013(ctx: Context) -> Hit | None:
    gpus = ctx.gpus()
    if all(g.lost is None for g in gpus):
        raise MissingInput("gpu.lost was not reported")
    lost = [g for g in gpus if g.lost]
    if not lost:
        return None
    evidence: dict[str, Any] = {}
    for g in lost:
        evidence[f"{_gid(g)}.lost"] = True
        evidence[f"{_gid(g)}.pci_bus_id"] = g.pci_bus_id
    return Hit(
        title="A GPU has fallen off the bus",
        message=f"NVML cannot reach {len(lost)} GPU(s) any more (GPU_IS_LOST).",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=1.0,
        fix=Fix("Drain the node and reset the GPU or reboot; then check the slot, riser and power, and RMA the "
                "board if it happens again.", ("sudo dmesg -T | grep -i xid", "sudo nvidia-smi -r")),
    )
