"""GPU011 (bad-cuda-env): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU011/."""
from __future__ import annotations

from triage.core.probe_data import ServerProcessData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule

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
    references=("DCGM diagnostic r1 (environment variable checks)", "CUDA environment variables reference",
                "claim:vllm.trace-function"),
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
