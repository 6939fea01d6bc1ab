"""NET001 (slow-model-storage): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/NET001/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import StorageData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("NET001", "slow-model-storage", Severity.MEDIUM, ("storage",), RuleDoc(
    what="The model directory reads sequentially at < 1 GB/s, or it sits on NFS or another network "
         "filesystem.",
    why="Weights are read at every (re)start and scale-out: at 200 MB/s a 140 GB model takes 12 minutes "
        "before the first token ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Network Bottleneck'). Lazy-loading engines also read during serving.",
    example="storage.model_dir_fstype = 'nfs4', storage.read_gbps = 0.18",
    fix="Cache the weights on local NVMe or a persistent volume and point the server (or HF_HOME) at it.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Network Bottleneck' (network bottleneck: model download latency)", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Network Layer' (dd test, SSD vs NFS)"),
), thresholds=("NET001.read_gbps",))
def net001(ctx: Context) -> Hit | None:
    data = ctx.need(StorageData)
    network_fs, rate = data.model_dir_is_network_fs, data.read_gbps
    warm = data.page_cache_warm
    if network_fs is None and rate is None:
        raise MissingInput("storage.model_dir_is_network_fs and storage.read_gbps were not measured")
    evidence: dict[str, Any] = {"storage.model_dir": data.model_dir}
    reasons = []
    if network_fs:
        evidence["storage.model_dir_fstype"] = data.model_dir_fstype
        reasons.append(f"it is on a network filesystem ({data.model_dir_fstype})")
    if rate is not None and not warm and rate < ctx.th("NET001.read_gbps"):
        evidence["storage.read_gbps"] = rate
        reasons.append(f"it reads at {rate:.2f} GB/s")
    if not reasons:
        if rate is not None and warm and not network_fs:
            raise MissingInput("the read rate came from a warm page cache and says nothing about the disk")
        return None
    return Hit(
        title="The model is stored on slow or network storage",
        message=f"The model directory is slow to load: {' and '.join(reasons)}.",
        evidence=evidence, certainty=Certainty.CONFIRMED if rate is not None else Certainty.LIKELY, impact=0.2,
        fix=Fix("Copy the weights to local NVMe (or a fast persistent volume) and serve from there; set HF_HOME "
                "to that disk for hub models.",
                (f"rsync -a {data.model_dir or '<model dir>'}/ /local/nvme/models/<name>/",)),
    )
