#!/usr/bin/env python3
"""Check every claim in triage/engines/ledger/ against the engines' own source, line for line.

    python scripts/verify_engine_claims.py [--cache DIR] [--git ORIGIN=DIR ...] [--update] [--show]

- A "pypi" claim is read from the package archive in --cache (the one scripts/extract_engine_truth.py
  downloads and sha256-checks: `<package>-<version>.tar.gz` or a wheel), at the path inside it.
- A "git" claim is read with `git show TAG:PATH` from a local clone named with --git ORIGIN=DIR; TGI's
  files may instead sit in scripts/engine_sources/tgi/<tag>/ (the extraction inputs). Its ref may be a commit.
- A "local" claim is read from this repository's working tree (the reference engine's own log lines).
- A claim over a range of releases is checked at both ends: its lines at `ref` and its `until` lines at the last
  release; a claim "from X" also checks that its `absent_before` text is not in the release before X.

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


class Verifier:
    """Reads each claim's source (an archive in the cache, a git clone, or this working tree) and counts what
    moved and what could not be found."""

    def __init__(self, cache: Path, clones: dict[str, Path], update: bool, show: bool) -> None:
        self.cache, self.clones, self.update, self.show = cache, clones, update, show
        self.missing = self.moved = 0

    def source(self, row: dict, ref: str, path: str) -> str | None:
        if row["kind"] == "local":
            return (ROOT / path).read_text() if (ROOT / path).is_file() else None
        if row["kind"] == "pypi":
            return _from_archive(self.cache, row["origin"], ref, path)
        return _from_git(row["origin"], ref, path, self.clones)

    def release_present(self, row: dict, ref: str) -> bool:
        if row["kind"] == "pypi":
            stem = row["origin"].replace("-", "_")
            return any(self.cache.glob(f"{row['origin']}-{ref}*")) or any(self.cache.glob(f"{stem}-{ref}*"))
        clone = self.clones.get(row["origin"])
        return clone is not None and subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "-q", ref],
                                                    capture_output=True).returncode == 0

    def check(self, row: dict, end: dict, what: str) -> None:
        """One end of a claim (the claim itself, or its `until`): its lines still hash to the ledger's."""
        text = self.source(row, end["ref"], end["path"])
        if text is None:
            print(f"SOURCE MISSING {row['id']}{what}: {row['origin']} {end['ref']} {end['path']}", file=sys.stderr)
            self.missing += 1
            return
        digest = line_hash(text, end["first_line"], end["last_line"])
        if self.show:
            lines = text.splitlines()[end["first_line"] - 1:end["last_line"]]
            print(f"--- {row['id']}{what} ({end['ref']}): {row['sentence']}\n" + "\n".join(lines))
        if not end["sha256"] and self.update:
            end["sha256"] = digest
        elif end["sha256"] != digest:
            print(f"MOVED {row['id']}{what}: {end['path']} lines {end['first_line']}-{end['last_line']} at "
                  f"{end['ref']} hash {digest[:12]}, ledger {end['sha256'][:12] or 'none'}", file=sys.stderr)
            self.moved += 1

    def check_absent(self, row: dict, absent: dict) -> None:
        """A claim "from X": its text must not be in the release before X (a missing file counts as absent, a
        missing release does not)."""
        text = self.source(row, absent["ref"], absent["path"])
        if text is None and not self.release_present(row, absent["ref"]):
            print(f"SOURCE MISSING {row['id']} (before): {row['origin']} {absent['ref']}", file=sys.stderr)
            self.missing += 1
        elif text is not None and absent["text"] in text:
            print(f"NOT ABSENT {row['id']}: {absent['text']!r} is already in {absent['path']} at {absent['ref']}",
                  file=sys.stderr)
            self.moved += 1

    def claim(self, row: dict) -> None:
        self.check(row, row, "")
        if row.get("until"):
            self.check(row, row["until"], " (until)")
        if row.get("absent_before"):
            self.check_absent(row, row["absent_before"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/tmp/triage-engine-truth"))
    ap.add_argument("--git", action="append", default=[], metavar="ORIGIN=DIR")
    ap.add_argument("--update", action="store_true", help="write the hash of claims that have none")
    ap.add_argument("--show", action="store_true", help="print each claim's lines")
    ap.add_argument("--only", action="append", default=[], metavar="ID_PREFIX", help="check only these claims")
    args = ap.parse_args(argv)
    clones = {o: Path(d) for o, d in (g.split("=", 1) for g in args.git)}
    verifier = Verifier(args.cache, clones, args.update, args.show)
    checked = 0
    for ledger_file in sorted(LEDGER_DIR.glob("*.json")):
        rows = json.loads(ledger_file.read_text())
        for row in rows:
            if not args.only or row["id"].startswith(tuple(args.only)):
                verifier.claim(row)
                checked += 1
        if args.update:
            ledger_file.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    print(f"{checked} claims checked (ranged ones at both ends); {verifier.moved} moved or not absent; "
          f"{verifier.missing} sources missing", file=sys.stderr)
    return 2 if verifier.missing else 1 if verifier.moved else 0

if __name__ == "__main__":
    sys.exit(main())
