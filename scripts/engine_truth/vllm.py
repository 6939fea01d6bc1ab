"""One vLLM release's table: flags (argparse and frontend dataclasses), metrics, env vars, defaults."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from .archives import file_provenance, read_archive
from .argparse_flags import add_dataclass_flags, extract_argparse
from .ast_util import call_name
from .metrics import extract_metrics
from .releases import VLLM_FILES
from .symbols import Symbols


def vllm_table(version: str, archive: Path, sha: str) -> dict[str, Any]:
    files = read_archive(archive, VLLM_FILES)
    sym = Symbols()
    order = sorted(files, key=lambda r: (not r.startswith("vllm/config"), r))  # config classes first
    for rel in order:
        sym.add(rel, files[rel])
    parser_files = [r for r in ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py",
                                "vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
                                "vllm/entrypoints/cli/serve.py") if r in files]
    flags, unresolved = extract_argparse(sym, parser_files)
    for cls in ("BaseFrontendArgs", "FrontendArgs"):
        add_dataclass_flags(sym, cls, flags)
    metric_files = [r for r in files if "metrics" in r]
    metrics = extract_metrics(sym, metric_files, "vllm:")
    env = vllm_env_vars(sym)
    fa_src = next((files[r].decode() for r in ("vllm/v1/attention/backends/fa_utils.py",
                                               "vllm/attention/utils/fa_utils.py") if r in files), "")
    defaults = {
        "gpu_memory_utilization": flags.get("--gpu-memory-utilization", {}).get("default"),
        "max_num_seqs": flags.get("--max-num-seqs", {}).get("default"),
        "max_num_batched_tokens": flags.get("--max-num-batched-tokens", {}).get("default"),
        "enable_prefix_caching": flags.get("--enable-prefix-caching", {}).get("default"),
        "enable_chunked_prefill": flags.get("--enable-chunked-prefill", {}).get("default"),
        "enforce_eager": flags.get("--enforce-eager", {}).get("default", False),
        "v1_engine_default": (env.get("VLLM_USE_V1") == "1") if "VLLM_USE_V1" in env else
        ("VLLM_USE_V1" not in env and version.split(".")[:2] != ["0", "6"]),
        "flash_attn_3_on_sm90": bool(re.search(r"major\s*==\s*9", fa_src)),
        "flash_attn_4_on_sm100": bool(re.search(r"major\s*==\s*10\s*and\s*is_fa_version_supported\(4\)", fa_src)),
        "attention_backend_flag": "--attention-backend" in flags,
        "attention_backend_env": "VLLM_ATTENTION_BACKEND" in env,
    }
    used = parser_files + metric_files + [r for r in files if r.startswith("vllm/config") or r.endswith(
        ("envs.py", "fa_utils.py", "quantization/__init__.py"))]
    return {
        "engine": "vllm", "version": version,
        "provenance": {"package": f"vllm=={version}", "archive": archive.name, "archive_sha256": sha,
                       "files": file_provenance(files, used)},
        "flags": dict(sorted(flags.items())), "metrics": metrics,
        "env": sorted(env), "defaults": defaults, "unresolved": sorted(set(unresolved)),
    }


def vllm_env_vars(sym: Symbols) -> dict[str, str | None]:
    """envs.py's `environment_variables` keys -> the default os.getenv gives (a string) or None."""
    tree = sym.trees.get("vllm/envs.py")
    out: dict[str, str | None] = {}
    if tree is None:
        return out
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        if target != "environment_variables" or not isinstance(node.value, ast.Dict):
            continue
        for k, v in zip(node.value.keys, node.value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                continue
            default = None
            for call in ast.walk(v):
                if isinstance(call, ast.Call) and call_name(call) in ("getenv", "get") and len(call.args) >= 2 \
                        and isinstance(call.args[0], ast.Constant) and call.args[0].value == k.value \
                        and isinstance(call.args[1], ast.Constant):
                    default = call.args[1].value if isinstance(call.args[1].value, str) else str(call.args[1].value)
                    break
            out[k.value] = default
    return out
