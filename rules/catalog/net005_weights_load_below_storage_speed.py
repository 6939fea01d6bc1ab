"""NET005 (weights-load-below-storage-speed): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/NET005/."""
from __future__ import annotations

from triage.core.probe_data import LogsData, StorageData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule
from triage.rules.startup_knobs import knob_fix


@rule("NET005", "weights-load-below-storage-speed", Severity.LOW, ("logs", "storage"), RuleDoc(
    what="The engine loaded its weights at a small fraction of the read speed the storage probe measured on "
         "the same model directory (bytes and seconds from the engine's own load line).",
    why="The disk is not the limit then: the loader is (one thread deserialising safetensors, small reads). A "
        "faster reader cuts the weight-load phase of every start.",
    example="logs.startup.phases[weight_load].bandwidth_bytes_per_s = 3.1e8; storage.read_gbps = 2.8",
    fix="Use the engine's faster weight reader (vLLM: --load-format fastsafetensors or runai_streamer).",
    references=("claim:vllm.load-formats", "claim:vllm.log-load-took", "claim:sglang.log-load-end"),
), thresholds=("NET005.max_frac", "NET005.min_load_s"))
def net005(ctx: Context) -> Hit | None:
    startup = ctx.need(LogsData).startup
    storage = ctx.need(StorageData)
    load = next((p for p in startup.phases if p.phase == "weight_load"), None) if startup is not None else None
    if load is None or not load.bandwidth_bytes_per_s:
        raise MissingInput("the log gives no weight-load bytes and seconds")
    if storage.read_gbps is None:
        raise MissingInput("storage.read_gbps was not measured")
    if storage.page_cache_warm:
        raise MissingInput("the storage read rate came from a warm page cache and says nothing about the disk")
    disk = storage.read_gbps * 1e9
    frac = load.bandwidth_bytes_per_s / disk
    if frac >= ctx.th("NET005.max_frac") or (load.seconds or 0.0) < ctx.th("NET005.min_load_s"):
        return None
    commands, note = knob_fix(ctx, "fast_load_format", "fastsafetensors")
    return Hit(
        title="Weights load far below the disk's read speed",
        message=f"The weight load read {load.bytes / 2**30:.1f} GiB in {load.seconds:.1f} s "
                f"({load.bandwidth_bytes_per_s / 1e9:.2f} GB/s), {100 * frac:.0f}% of the {storage.read_gbps:.2f} "
                f"GB/s the storage probe read from {storage.model_dir or 'the model directory'}. {note}.",
        evidence={"logs.startup.phases[weight_load].bandwidth_bytes_per_s": load.bandwidth_bytes_per_s,
                  "logs.startup.phases[weight_load].seconds": load.seconds, "storage.read_gbps": storage.read_gbps,
                  "derived.load_to_disk_frac": round(frac, 3)},
        certainty=Certainty.LIKELY, impact=0.1,
        fix=Fix("Load with the engine's parallel or streaming weight reader.", commands),
    )
