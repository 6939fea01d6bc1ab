#!/usr/bin/env python3
"""Check every claim in triage/engines/ledger/ against the engines' own source, line for line.

    python scripts/verify_engine_claims.py [--cache DIR] [--git ORIGIN=DIR ...] [--update] [--show]

- A "pypi" claim is read from the package archive in --cache (the one scripts/extract_engine_truth.py
  downloads and sha256-checks: `<package>-<version>.tar.gz` or a wheel), at the path inside it.
- A "git" claim is read with `git show TAG:PATH` from a local clone named with --git ORIGIN=DIR; TGI's
  files may instead sit in scripts/engine_sources/tgi/<tag>/ (the extraction inputs). Its ref may be a commit.
- A "local" claim is read from this repository's working tree (the reference engine's own log lines).

Exit 1 when a claim's lines no longer hash to its recorded sha256 (the source moved: re-read it and fix the
line range or the sentence), 2 when a source could not be found. `--update` writes the hashes of claims that
have none yet; `--show` prints each claim's lines, to read them against the sentence. Nothing here runs at
test time: tests/test_engine_claims.py checks the ledger's shape and that every cited id exists.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.engines.claims import LEDGER_DIR, line_hash  # noqa: E402

TGI_SOURCES = ROOT / "scripts" / "engine_sources" / "tgi"


def _from_archive(cache: Path, package: str, version: str, path: str) -> str | None:
    stem = package.replace("-", "_")
    for archive in sorted(cache.glob(f"{package}-{version}*")) + sorted(cache.glob(f"{stem}-{version}*")):
        if archive.name.endswith(".tar.gz"):
            with tarfile.open(archive) as tar:
                for m in tar.getmembers():
                    if m.isfile() and (m.name == path or m.name.endswith("/" + path)):
                        return tar.extractfile(m).read().decode("utf-8", "replace")  # type: ignore[union-attr]
        elif archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as z:
                if path in z.namelist():
                    return z.read(path).decode("utf-8", "replace")
    return None


def _from_git(origin: str, ref: str, path: str, clones: dict[str, Path]) -> str | None:
    if origin == "huggingface/text-generation-inference" and (TGI_SOURCES / ref / path).is_file():
        return (TGI_SOURCES / ref / path).read_text()
    clone = clones.get(origin)
    if clone is None:
        return None
    done = subprocess.run(["git", "-C", str(clone), "show", f"{ref}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/tmp/triage-engine-truth"))
    ap.add_argument("--git", action="append", default=[], metavar="ORIGIN=DIR")
    ap.add_argument("--update", action="store_true", help="write the hash of claims that have none")
    ap.add_argument("--show", action="store_true", help="print each claim's lines")
    args = ap.parse_args(argv)
    clones = {o: Path(d) for o, d in (g.split("=", 1) for g in args.git)}
    missing = moved = 0
    for ledger_file in sorted(LEDGER_DIR.glob("*.json")):
        rows = json.loads(ledger_file.read_text())
        for row in rows:
            if row["kind"] == "local":
                text = (ROOT / row["path"]).read_text() if (ROOT / row["path"]).is_file() else None
            elif row["kind"] == "pypi":
                text = _from_archive(args.cache, row["origin"], row["ref"], row["path"])
            else:
                text = _from_git(row["origin"], row["ref"], row["path"], clones)
            if text is None:
                print(f"SOURCE MISSING {row['id']}: {row['origin']} {row['ref']} {row['path']}", file=sys.stderr)
                missing += 1
                continue
            digest = line_hash(text, row["first_line"], row["last_line"])
            if args.show:
                lines = text.splitlines()[row["first_line"] - 1:row["last_line"]]
                print(f"--- {row['id']}: {row['sentence']}\n" + "\n".join(lines))
            if not row["sha256"] and args.update:
                row["sha256"] = digest
            elif row["sha256"] != digest:
                print(f"MOVED {row['id']}: {row['path']} lines {row['first_line']}-{row['last_line']} at "
                      f"{row['ref']} hash {digest[:12]}, ledger {row['sha256'][:12] or 'none'}", file=sys.stderr)
                moved += 1
        if args.update:
            ledger_file.write_text(json.dumps(rows, indent=1) + "\n")
    total = sum(len(json.loads(p.read_text())) for p in LEDGER_DIR.glob("*.json"))
    print(f"{total - missing - moved} of {total} claims verified; {moved} moved; {missing} without a source",
          file=sys.stderr)
    return 2 if missing else 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
