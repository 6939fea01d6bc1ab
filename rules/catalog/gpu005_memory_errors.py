"""GPU005 (memory-errors): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU005/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.registry import rule


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
        gid = gpu_key(g)
        values = (g.ecc_uncorrected_volatile, g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending,
                  g.remapped_rows_pending, g.remapped_rows_failure)
        if all(v is None for v in values):
            continue
        measured = True
        hit = False
        if (g.ecc_uncorrected_volatile or 0) > 0:
            evidence[f"{gid}.ecc_uncorrected_volatile"] = g.ecc_uncorrected_volatile
            bump(Severity.CRITICAL)
            hit = True
        if g.remapped_rows_failure:
            evidence[f"{gid}.remapped_rows_failure"] = True
            bump(Severity.CRITICAL)
            hit = True
        sbe, dbe = g.retired_pages_sbe or 0, g.retired_pages_dbe or 0
        if sbe + dbe >= ctx.th("GPU005.retired_pages_total") or dbe > ctx.th("GPU005.retired_pages_dbe"):
            evidence[f"{gid}.retired_pages_sbe"] = sbe
            evidence[f"{gid}.retired_pages_dbe"] = dbe
            bump(Severity.HIGH)
            hit = True
        for key, pending in (("retired_pages_pending", g.retired_pages_pending),
                             ("remapped_rows_pending", g.remapped_rows_pending)):
            if pending:
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
