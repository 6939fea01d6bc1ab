"""NET006 (weights-load-slow): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/NET006/."""
from __future__ import annotations

from triage.core.probe_data import LogsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule
from triage.rules.startup_knobs import knob_fix


@rule("NET006", "weights-load-slow", Severity.MEDIUM, ("logs",), RuleDoc(
    what="The server's own log shows its weight load crawling: bytes over seconds below NET006.max_bytes_per_s for "
         "at least NET006.min_load_s (vLLM's 'Model loading took X GiB and Y seconds', or its weight-load lines' "
         "time stamps with the GiB they state; SGLang's 'Load weight end ... mem usage'). Judged from the log alone: "
         "where the storage probe measured the disk too, NET005 says whether the disk or the loader is the limit.",
    why="Every start, scale-out and crash recovery waits for the weights. A local NVMe disk reads gigabytes per "
        "second; a load at tens of megabytes per second is a network filesystem, a failing or throttled disk, or "
        "a cold object store, and it is the start-up's whole cost.",
    example="logs.startup.phases[weight_load].bandwidth_bytes_per_s = 1.9e7, logs.startup.phases[weight_load]"
            ".seconds = 7200",
    fix="Put the weights on local fast storage (copy them off the network volume, or test the disk: it may be "
        "failing), and load them with a parallel or streaming reader (vLLM --load-format fastsafetensors or "
        "runai_streamer).",
    references=("claim:vllm.log-load-took-0.6", "claim:vllm.log-load-took-0.10", "claim:vllm.log-load-took",
                "claim:vllm.log-load-start", "claim:sglang.log-load-end", "claim:vllm.load-formats",
                "vLLM issues 2233 and 2253: a 67B and a 7B model loading for 120 and 15 minutes off bad storage"),
), thresholds=("NET006.max_bytes_per_s", "NET006.min_load_s"))
def net006(ctx: Context) -> Hit | None:
    startup = ctx.need(LogsData).startup
    load = next((p for p in startup.phases if p.phase == "weight_load"), None) if startup is not None else None
    if load is None or not load.bytes or not load.seconds:
        raise MissingInput("the log gives no weight-load bytes and seconds")
    rate = load.bytes / load.seconds
    if rate >= ctx.th("NET006.max_bytes_per_s") or load.seconds < ctx.th("NET006.min_load_s"):
        return None
    commands, note = knob_fix(ctx, "fast_load_format", "fastsafetensors")
    return Hit(
        title="The weights load at a crawl",
        message=f"The weight load read {load.bytes / 2**30:.1f} GiB in {load.seconds / 60:.1f} min "
                f"({rate / 1e6:.0f} MB/s): far below what local disks read.",
        evidence={"logs.startup.phases[weight_load].bytes": load.bytes,
                  "logs.startup.phases[weight_load].seconds": load.seconds,
                  "logs.startup.phases[weight_load].bandwidth_bytes_per_s": round(rate, 1)},
        certainty=Certainty.LIKELY, impact=0.3,
        fix=Fix("Put the weights on local fast storage (copy them off a network volume; a disk this slow may be "
                f"failing: test its read speed), and load them with a parallel reader ({note}).", commands),
    )
