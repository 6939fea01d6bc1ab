"""One SGLang release's table: argparse flags, annotated dataclass flags, metrics, defaults."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .annotated_flags import add_annotated_flags
from .archives import file_provenance, read_archive
from .argparse_flags import extract_argparse
from .metrics import extract_metrics
from .releases import SGLANG_FILES
from .symbols import Symbols


def sglang_table(version: str, archive: Path, sha: str) -> dict[str, Any]:
    files = read_archive(archive, SGLANG_FILES)
    sym = Symbols()
    for rel in sorted(files):
        sym.add(rel, files[rel])
    flags, unresolved = extract_argparse(sym, ["sglang/srt/server_args.py"])
    # Annotated dataclass fields: in server_args.py itself (0.5.14 to 0.5.19), then in arg_groups/fields/
    unresolved += add_annotated_flags(sym, ["sglang/srt/server_args.py",
                                            *sorted(r for r in files if "arg_groups/fields/" in r)], flags)
    metrics = extract_metrics(sym, [r for r in files if "metrics" in r or "observability" in r], "sglang:")
    defaults = {
        "gpu_memory_utilization": flags.get("--mem-fraction-static", {}).get("default"),
        "max_num_seqs": flags.get("--max-running-requests", {}).get("default"),
        "max_num_batched_tokens": flags.get("--chunked-prefill-size", {}).get("default"),
        "enable_prefix_caching": not flags.get("--disable-radix-cache", {}).get("default", False),
        "enable_chunked_prefill": True,
        "enforce_eager": flags.get("--disable-cuda-graph", {}).get("default", False),
        "attention_backend_flag": "--attention-backend" in flags,
    }
    return {
        "engine": "sglang", "version": version,
        "provenance": {"package": f"sglang=={version}", "archive": archive.name, "archive_sha256": sha,
                       "files": file_provenance(files, list(files))},
        "flags": dict(sorted(flags.items())), "metrics": metrics, "env": [], "defaults": defaults,
        "unresolved": sorted(set(unresolved)),
    }
