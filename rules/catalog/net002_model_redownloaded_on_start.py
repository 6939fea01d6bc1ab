"""NET002 (model-redownloaded-on-start): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/NET002/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogsData, StorageData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule
from triage.rules.startup_knobs import knob_fix


@rule("NET002", "model-redownloaded-on-start", Severity.MEDIUM, ("storage|logs",), RuleDoc(
    what="A hub model id is served and there is positive evidence that its weights are fetched at start: "
         "the serving process's own Hugging Face cache sits on an ephemeral filesystem (tmpfs, an overlay "
         "container layer), or its log shows the weights being downloaded.",
    why="Every cold start then downloads the weights again: 20 minutes instead of 30 seconds for a large "
        "model (the 'Before/After Benchmarks' table in 'Why Your LLM Inference Is Slow (And How to Fix It)'), paid in GPU time and in scale-out lag.",
    example="storage.serves_hub_model_id = true, storage.hf_cache_fstype = 'overlay', "
            "storage.hf_cache_persistent = false; or logs.weights_download_s = 508.6",
    fix="Mount a persistent volume for the cache and set HF_HOME to it (or `--download-dir`), or serve from a "
        "local path.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Network Bottleneck' (model download on every cold start)",
                "claim:vllm.weights-download-log", "claim:vllm.download-dir",
                "An empty cache alone is not evidence: it may be another user's, or read from outside the "
                "server's mount namespace; triage reads the serving process's own environment and mounts"),
))
def net002(ctx: Context) -> Hit | None:
    storage = ctx.seen(StorageData)
    logs = ctx.seen(LogsData)
    downloaded = logs.weights_download_s
    each = list(logs.startup.download_s_each_start) if logs.startup is not None else []
    if downloaded is None and each:
        downloaded = max(each)
    hub, persistent = storage.serves_hub_model_id, storage.hf_cache_persistent
    if downloaded is None and (not hub or persistent is not False):
        if not ctx.has("storage") and not ctx.has("logs"):
            raise MissingInput("neither the server's storage view nor its log was read")
        return None
    evidence: dict[str, Any] = {}
    if hub:
        evidence.update({"storage.serves_hub_model_id": True, "storage.hf_cache_dir": storage.hf_cache_dir,
                         "storage.hf_cache_fstype": storage.hf_cache_fstype,
                         "storage.hf_cache_persistent": persistent})
    if logs.weights_download_s is not None:
        evidence["logs.weights_download_s"] = logs.weights_download_s
    why = (f"its log shows {downloaded:.0f} s spent downloading the weights" if downloaded is not None else
           f"its Hugging Face cache is on {storage.hf_cache_fstype}, which does not survive a restart")
    if each:
        # Joined to the start-up timeline (logs.startup): the download's share of the time to ready, per start.
        evidence["logs.startup.download_s_each_start"] = each
        ready = logs.startup.ready_s
        if len(each) >= 2:
            why += f", on each of the {len(each)} starts in the log ({', '.join(f'{x:.0f}' for x in each)} s)"
        if ready:
            evidence["logs.startup.ready_s"] = ready
            why += f"; {100 * each[-1] / ready:.0f}% of the last start's {ready:.0f} s to ready"
    commands, note = knob_fix(ctx, "download_dir", "/mnt/persistent/hf")
    return Hit(
        title="Hub weights are downloaded again on start",
        message=f"The server fetches its weights from the hub when it starts: {why}.",
        evidence=evidence, certainty=Certainty.CONFIRMED if downloaded is not None else Certainty.LIKELY,
        impact=0.2,
        fix=Fix(f"Mount a persistent volume for the Hugging Face cache and point HF_HOME at it, or serve from a "
                f"local path. {note}.", ("export HF_HOME=/mnt/persistent/hf", *commands)),
    )
