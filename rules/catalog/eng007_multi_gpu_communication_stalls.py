"""ENG007 (multi-gpu-communication-stalls): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG007/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogsData
from triage.core.report import Certainty, Fix, Severity
from triage.engines.runtime_log import nccl_error_class
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("ENG007", "multi-gpu-communication-stalls", Severity.HIGH, ("logs",), RuleDoc(
    what="The server log shows NCCL warnings, errors or collective timeouts (never its INFO lines, whose net-plugin "
         "'dlerror' is not an error), classed by NCCL's own error string, or vLLM's 'No available shared memory "
         "broadcast block found' "
         "warnings while serving: the workers of a multi-GPU (TP/PP) server stall waiting for each other. "
         "Warnings between vLLM's startup line and its ready line are left out: vLLM itself says they "
         "typically happen during compilation or quantization.",
    why="Each engine step waits for every worker; a worker stuck on a collective (a slow or failing link, an "
        "oversubscribed CPU, a hung GPU) stalls all requests, which shows as long TTFT/ITL gaps and timeouts.",
    example="logs.num_shm_broadcast_stalls = 14, logs.num_nccl_errors = 0",
    fix="Check the GPUs' links and health (GPU004, GPU006, GPU010), give the workers CPU headroom, and set "
        "NCCL_DEBUG=INFO to find the failing collective.",
    references=("claim:vllm.shm-broadcast-warning", "claim:vllm.api-server-version-log-0.14",
                "claim:vllm.startup-logo", "claim:vllm.server-version-log-0.15", "claim:vllm.server-version-log",
                "claim:vllm.starting-api-server-log-0.17", "claim:vllm.starting-server-log",
                "NCCL troubleshooting (NCCL_DEBUG=INFO)", "a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Step 6: Tensor Parallelism and GPU Selection' (interconnect)",
                "claim:runtime.nccl-warn", "claim:runtime.nccl-info", "claim:runtime.nccl-error-strings",
                "claim:runtime.torch-nccl-error", "claim:runtime.torch-nccl-watchdog-timeout"),
))
def eng007(ctx: Context) -> Hit | None:
    logs = ctx.seen(LogsData)
    nccl, stalls = logs.num_nccl_errors, logs.num_shm_broadcast_stalls
    if nccl is None and stalls is None:
        raise MissingInput("logs.num_nccl_errors and logs.num_shm_broadcast_stalls were not measured")
    startup = logs.num_shm_broadcast_stalls_startup or 0
    if stalls is not None:
        stalls -= startup  # warnings while compiling or quantizing at startup are not serving stalls
    if not (nccl or 0) and not (stalls or 0):
        return None
    evidence = {"logs.num_nccl_errors": nccl, "logs.num_shm_broadcast_stalls": logs.num_shm_broadcast_stalls,
                "logs.num_shm_broadcast_stalls_startup": startup, "logs.path": logs.path}
    first_check, classes = _nccl_classes(logs, evidence)
    return Hit(
        title="Multi-GPU workers stall on communication" + (f" (NCCL: {', '.join(classes)})" if classes else ""),
        message="The server log has " + " and ".join(
            part for part in (f"{nccl} NCCL error line(s)" if nccl is not None else "",
                              f"{stalls} shared-memory broadcast stall warning(s)" if stalls is not None else "")
            if part) + ": workers wait for each other.",
        evidence=evidence,
        severity=Severity.HIGH if nccl else Severity.MEDIUM, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix(first_check + "Check the GPU links and health, give the worker processes CPU headroom, and rerun "
                "with NCCL_DEBUG=INFO to see which collective fails.", ("export NCCL_DEBUG=INFO",)),
    )


def _nccl_classes(logs: LogsData, evidence: dict[str, Any]) -> tuple[str, list[str]]:
    """('First: <what to check for the first error's class>. ', [classes]) from the log's NCCL events: a
    collective that timed out, or NCCL's own error string (claims runtime.nccl-error-strings,
    runtime.torch-nccl-error, runtime.torch-nccl-watchdog-timeout). Its INFO lines are never counted."""
    found = [e for e in logs.events if e.fact in ("nccl_error", "nccl_timeout", "nccl_warn")]
    if not found:
        return "", []
    classes: list[str] = []
    checks: list[str] = []
    for e in found:
        if e.fact == "nccl_timeout":
            kind, check = "timeout", ("a collective ran past its timeout: one rank stopped answering; its log's "
                                      "first error, or an Xid in dmesg, says why")
        else:
            kind, check = nccl_error_class(" ".join((e.texts or {}).values()) + " " + (e.line or ""))
        if kind not in classes:
            classes.append(kind)
            checks.append(check)
    first = found[0]
    evidence.update({"logs.nccl.classes": classes, "logs.nccl.first_at": f"{first.path or logs.path}:L{first.line_no}",
                     "logs.nccl.first_line": first.line})
    return f"First: {checks[0]}. ", classes
