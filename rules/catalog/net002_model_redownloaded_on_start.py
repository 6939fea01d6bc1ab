"""NET002 (model-redownloaded-on-start): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/NET002/."""
from __future__ import annotations

from triage.core.probe_data import StorageData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("NET002", "model-redownloaded-on-start", Severity.MEDIUM, ("storage",), RuleDoc(
    what="A hub model id is served while the Hugging Face cache is ephemeral (tmpfs, a container layer) or "
         "empty.",
    why="Every cold start then downloads the weights again: 20 minutes instead of 30 seconds for a large "
        "model (seed 000's before/after table), paid in GPU time and in scale-out lag.",
    example="storage.serves_hub_model_id = true, storage.hf_cache_fstype = 'overlay', "
            "storage.hf_cache_persistent = false",
    fix="Mount a persistent volume for the cache and set HF_HOME to it (or `--download-dir`), or serve from a "
        "local path.",
    references=("seed 000 §6 (model download on every cold start)",),
))
def net002(ctx: Context) -> Hit | None:
    hub = ctx.measured(ctx.need(StorageData).serves_hub_model_id, "storage.serves_hub_model_id")
    if not hub:
        return None
    persistent, empty = ctx.seen(StorageData).hf_cache_persistent, ctx.seen(StorageData).hf_cache_empty
    if persistent is None and empty is None:
        raise MissingInput("storage.hf_cache_persistent and storage.hf_cache_empty were not measured")
    if persistent is not False and not empty:
        return None
    reason = "ephemeral" if persistent is False else "empty"
    return Hit(
        title="Hub weights are downloaded again on every start",
        message=f"The server loads a hub model id and its Hugging Face cache is {reason}: each cold start "
                "downloads the weights.",
        evidence={"storage.serves_hub_model_id": True, "storage.hf_cache_dir": ctx.seen(StorageData).hf_cache_dir,
                  "storage.hf_cache_fstype": ctx.seen(StorageData).hf_cache_fstype,
                  "storage.hf_cache_persistent": persistent, "storage.hf_cache_empty": empty},
        certainty=Certainty.LIKELY, impact=0.2,
        fix=Fix("Mount a persistent volume for the Hugging Face cache and point HF_HOME at it (vLLM also takes "
                "--download-dir).", ("export HF_HOME=/mnt/persistent/hf",
                                     "vllm serve <model> --download-dir /mnt/persistent/hf")),
    )
