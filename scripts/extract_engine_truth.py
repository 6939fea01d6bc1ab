#!/usr/bin/env python3
"""Build triage's engine truth tables from the engines' own source.

    python scripts/extract_engine_truth.py [--cache DIR] [--out triage/engines/truth]

vLLM and SGLang: the published source distributions are downloaded from PyPI (never installed; a wheel
when a release has no sdist), checked against the index's sha256, and the argument parser, config
dataclasses, env-var table and metrics modules are read with `ast`. TGI has no registry package: its
launcher (`launcher/src/main.rs`, clap arguments) and router metric files are read from
scripts/engine_sources/tgi/<tag>/ (fetched from huggingface/text-generation-inference at that tag, as the
README there shows; PROVENANCE.json names the commit; the files are not kept in this repository).

One JSON file per engine version lands in --out, each with its provenance (package and version or
repository and tag, every file read, its sha256). Then every claim of triage/engines/ledger/ is checked against the
fresh sources (scripts/verify_engine_claims.py): the exit code is its verdict. Re-running is safe: downloads are cached in --cache.
Nothing here runs at test time; tests read the committed JSON.

The work is done by the package scripts/engine_truth/ (one module per job; its __init__ gives the order).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # engine_truth/ and verify_engine_claims.py sit here

from engine_truth.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
