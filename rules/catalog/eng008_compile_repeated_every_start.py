"""ENG008 (compile-repeated-every-start): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG008/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogsData, StorageData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule
from triage.rules.startup_knobs import knob_fix


@rule("ENG008", "compile-repeated-every-start", Severity.MEDIUM, ("logs",), RuleDoc(
    what="torch.compile takes its full time again on every start: the log shows two or more starts whose compile "
         "did not shrink, or one long compile while the server's cache directory (beside its Hugging Face cache, "
         "under ~/.cache) sits on an ephemeral filesystem.",
    why="A compile cache that survives restarts turns a compile of tens of seconds into a cache load of a few; "
        "on a filesystem that is thrown away with the container, every scale-out pays the whole compile again.",
    example="logs.startup.compile_s_each_start = [41.2, 40.8]; storage.hf_cache_persistent = false",
    fix="Put the engine's compile cache on a persistent volume (vLLM: VLLM_CACHE_ROOT).",
    references=("claim:vllm.cache-root", "claim:vllm.log-compile-0.10", "claim:vllm.log-compile"),
), thresholds=("ENG008.min_compile_s", "ENG008.kept_frac"))
def eng008(ctx: Context) -> Hit | None:
    startup = ctx.need(LogsData).startup
    if startup is None:
        raise MissingInput("the log shows no server start")
    each = list(startup.compile_s_each_start)
    if not each:
        return None
    storage = ctx.seen(StorageData)
    min_s, kept = ctx.th("ENG008.min_compile_s"), ctx.th("ENG008.kept_frac")
    evidence: dict[str, Any] = {"logs.startup.compile_s_each_start": each}
    recurring = len(each) >= 2 and each[-1] >= kept * each[0] and each[-1] >= min_s
    ephemeral = storage.hf_cache_persistent is False and not storage.hf_home_set and each[-1] >= min_s
    if not (recurring or ephemeral):
        return None
    if ephemeral:
        evidence.update({"storage.hf_cache_dir": storage.hf_cache_dir, "storage.hf_cache_fstype": storage.hf_cache_fstype,
                         "storage.hf_cache_persistent": False})
    if startup.cuda_graph_s_each_start:
        evidence["logs.startup.cuda_graph_s_each_start"] = list(startup.cuda_graph_s_each_start)
    why = (f"{len(each)} starts in the log compiled for {', '.join(f'{s:.0f}' for s in each)} s" if recurring else
           f"it compiled for {each[-1]:.0f} s and its cache directory is on {storage.hf_cache_fstype}, which a "
           "restart throws away")
    commands, note = knob_fix(ctx, "compile_cache_dir", "/mnt/persistent/compile-cache")
    return Hit(
        title="torch.compile runs in full on every start",
        message=f"The compile cache does not survive a restart: {why}. {note}.",
        evidence=evidence, certainty=Certainty.CONFIRMED if recurring else Certainty.LIKELY, impact=0.15,
        fix=Fix("Point the engine's compile cache at a persistent volume mounted into every replica, so later "
                "starts load the compiled graphs instead of compiling them.", commands),
    )
