"""GPU005 (memory-errors): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU005/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import GpuDevice
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
    measured = [(g, _memory_errors(ctx, g)) for g in ctx.gpus() if _counts_errors(g)]
    if not measured:
        raise MissingInput("no ECC, page retirement or row remapping counters (ECC off or unsupported on this GPU)")
    evidence: dict[str, Any] = {}
    severity = None
    cmds = []
    for g, errors in measured:
        for key, value, sev in errors:
            evidence[key] = value
            severity = sev if severity is None or sev.rank < severity.rank else severity
        if errors:
            cmds.append(f"sudo nvidia-smi -r -i {g.index}")
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


def _counts_errors(g: GpuDevice) -> bool:
    """Does the GPU report any ECC, page retirement or row remapping counter?"""
    values = (g.ecc_uncorrected_volatile, g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending,
              g.remapped_rows_pending, g.remapped_rows_failure)
    return any(v is not None for v in values)


def _memory_errors(ctx: Context, g: GpuDevice) -> list[tuple[str, Any, Severity]]:
    """(evidence key, value, severity) of each memory error the GPU reports."""
    gid = gpu_key(g)
    errors: list[tuple[str, Any, Severity]] = []
    if (g.ecc_uncorrected_volatile or 0) > 0:
        errors.append((f"{gid}.ecc_uncorrected_volatile", g.ecc_uncorrected_volatile, Severity.CRITICAL))
    if g.remapped_rows_failure:
        errors.append((f"{gid}.remapped_rows_failure", True, Severity.CRITICAL))
    sbe, dbe = g.retired_pages_sbe or 0, g.retired_pages_dbe or 0
    if sbe + dbe >= ctx.th("GPU005.retired_pages_total") or dbe > ctx.th("GPU005.retired_pages_dbe"):
        errors.append((f"{gid}.retired_pages_sbe", sbe, Severity.HIGH))
        errors.append((f"{gid}.retired_pages_dbe", dbe, Severity.HIGH))
    for key, pending in (("retired_pages_pending", g.retired_pages_pending),
                         ("remapped_rows_pending", g.remapped_rows_pending)):
        if pending:
            errors.append((f"{gid}.{key}", True, Severity.HIGH))
    return errors
