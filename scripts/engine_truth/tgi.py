"""One TGI release's table, from its sources at a tag (scripts/engine_sources/tgi/<tag>/): launcher flags,
router metrics, env vars and the memory and feature defaults."""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from .tgi_clap import tgi_flags


def tgi_memory_defaults(launcher: str, server_globals: str) -> dict[str, Any]:
    """Two different wiggle rooms: the launcher's (only its VRAM estimate for --max-total-tokens) and the
    server's (globals.py, the fraction of free memory the KV cache is sized with)."""
    launcher_room = re.search(r'"TGI_WIGGLE_ROOM"\)[^;]*?unwrap_or\(([\d.]+)\)', launcher, re.S)
    kv_room = re.search(r'TGI_WIGGLE_ROOM\s*=\s*float\(os\.getenv\("TGI_WIGGLE_ROOM",\s*"([\d.]+)"\)', server_globals)
    return {"memory_wiggle_room": float(kv_room.group(1)) if kv_room else None,
            "launcher_vram_wiggle_room": float(launcher_room.group(1)) if launcher_room else None}


def tgi_feature_defaults(launcher: str, server_globals: str) -> dict[str, Any]:
    """Prefix caching: the launcher's own default for the variable it exports (absent before 2.3: none).
    Chunked prefill: the server's PREFILL_CHUNKING default (absent before 2.4: none)."""
    env = re.search(r'std::env::var\("((?:USE_)?PREFIX_CACHING)"\)', launcher)
    prefix = re.search(r'prefix_caching\.unwrap_or\("(\w+)"', launcher)
    chunk = re.search(r'PREFILL_CHUNKING\s*=\s*os\.getenv\("PREFILL_CHUNKING",\s*"(\w+)"\)', server_globals)
    return {"enable_prefix_caching": bool(prefix) and prefix.group(1).lower() in ("1", "true"),
            "prefix_caching_env": env.group(1) if env else None,
            "enable_chunked_prefill": bool(chunk) and chunk.group(1).lower() in ("1", "true"),
            "prefill_chunking_env": "PREFILL_CHUNKING" if chunk else None}


# The metrics crate's macros: `counter!`/`gauge!`/`histogram!` (every TGI), and before metrics 0.22 (TGI 2.0 and
# 2.1) also `increment_counter!`, `increment_gauge!` and `decrement_gauge!`.
_METRIC_MACRO = re.compile(r'metrics::(counter|gauge|histogram|increment_counter|increment_gauge|decrement_gauge)!'
                           r'\(\s*"(tgi_\w+)"')
_MACRO_KIND = {"increment_counter": "counter", "increment_gauge": "gauge", "decrement_gauge": "gauge"}


def tgi_table(tag: str, src_dir: Path) -> dict[str, Any]:
    prov = json.loads((src_dir.parent / "PROVENANCE.json").read_text())[tag]
    if not (src_dir / "launcher/src/main.rs").is_file():
        sys.exit(f"extract_engine_truth: TGI {tag}'s sources are not in {src_dir}; fetch them at commit "
                 f"{prov['commit']} as scripts/engine_sources/tgi/README.md shows, or pass --only vllm --only sglang")
    launcher = (src_dir / "launcher/src/main.rs").read_text()
    flags, unresolved = tgi_flags(launcher)
    metrics: dict[str, str] = {}
    rels = sorted(str(p.relative_to(src_dir)) for p in src_dir.rglob("*") if p.suffix in (".rs", ".py"))
    for rel in (r for r in rels if r.endswith(".rs")):
        for m in re.finditer(_METRIC_MACRO, (src_dir / rel).read_text()):
            metrics.setdefault(m.group(2), _MACRO_KIND.get(m.group(1), m.group(1)))
    env_reads = sorted(set(re.findall(r'env::var\("([A-Z_]+)"\)', launcher)))
    globals_py = src_dir / "server/text_generation_server/models/globals.py"
    server_globals = globals_py.read_text() if globals_py.is_file() else ""
    defaults = {
        "gpu_memory_utilization": flags.get("--cuda-memory-fraction", {}).get("default"),
        **tgi_memory_defaults(launcher, server_globals),
        # TGI's batch cap is --max-batch-size (no cap by default); --max-concurrent-requests refuses clients
        "max_num_seqs": flags.get("--max-batch-size", {}).get("default"),
        "max_concurrent_requests": flags.get("--max-concurrent-requests", {}).get("default"),
        "max_num_batched_tokens": flags.get("--max-batch-prefill-tokens", {}).get("default"),
        **tgi_feature_defaults(launcher, server_globals),
        "attention_env": "ATTENTION" if '"ATTENTION"' in launcher else None,
    }
    return {
        "engine": "tgi", "version": tag.lstrip("v"),
        "provenance": {"repository": "huggingface/text-generation-inference", "tag": tag, "commit": prov["commit"],
                       "files": {rel: hashlib.sha256((src_dir / rel).read_bytes()).hexdigest() for rel in rels}},
        "flags": flags, "metrics": dict(sorted(metrics.items())), "env": env_reads, "defaults": defaults,
        "unresolved": unresolved,
    }
