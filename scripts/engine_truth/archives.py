"""Published source distributions from PyPI: the index, a sha256-checked download into the cache, and
the wanted files read out of the archive (never installed)."""
from __future__ import annotations

import hashlib
import json
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Any


def pypi_index(pkg: str) -> dict[str, Any]:
    req = urllib.request.Request(f"https://pypi.org/simple/{pkg}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def download(pkg: str, version: str, cache: Path, index: dict[str, Any]) -> tuple[Path, str]:
    """The sdist (or a py3.11 or abi3 x86_64 / pure wheel) of pkg==version, sha256-checked. -> (path, sha256)."""
    files = {f["filename"]: f for f in index["files"]}
    wanted = [f"{pkg}-{version}.tar.gz"]
    wanted += sorted(n for n in files if n.startswith(f"{pkg}-{version}-") and n.endswith(".whl")
                     and ("py3-none-any" in n or ("cp311-cp311-manylinux" in n or "cp38-abi3-manylinux" in n)
                                               and "x86_64" in n))
    for name in wanted:
        if name not in files:
            continue
        entry = files[name]
        dest = cache / name
        if not dest.exists():
            with urllib.request.urlopen(entry["url"], timeout=600) as resp:
                dest.write_bytes(resp.read())
        digest = hashlib.sha256(dest.read_bytes()).hexdigest()
        if digest != entry["hashes"]["sha256"]:
            dest.unlink()
            raise SystemExit(f"sha256 mismatch for {name}")
        return dest, digest
    raise SystemExit(f"no sdist or usable wheel for {pkg}=={version}")


def read_archive(path: Path, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """{path inside the package (from the package dir on): bytes} for the wanted files."""
    out: dict[str, bytes] = {}

    def keep(name: str) -> str | None:
        for w in wanted:
            i = name.find(w)
            if i >= 0 and name.endswith(".py") and (not w.endswith("/") or "/" not in name[i + len(w):]):
                return name[i:]
        return None

    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                rel = keep(m.name) if m.isfile() else None
                if rel and rel not in out:
                    out[rel] = tar.extractfile(m).read()  # type: ignore[union-attr]
    else:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                rel = keep(name)
                if rel and rel not in out:
                    out[rel] = z.read(name)
    return out


def file_provenance(files: dict[str, bytes], used: list[str]) -> dict[str, str]:
    return {rel: hashlib.sha256(files[rel]).hexdigest() for rel in sorted(used) if rel in files}
