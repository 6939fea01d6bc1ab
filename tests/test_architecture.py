"""The layout's promises: the import layers hold (import-linter), and the CLI and the core install
stay lean (no torch, web server or plotting unless a command needs them)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "fastapi", "uvicorn", "matplotlib", "tokenizers", "safetensors")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(__import__('json').dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode in (0,), out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(mods: set[str]) -> set[str]:
    return {m for m in mods if m.split(".")[0] in HEAVY}


def test_import_layers_hold():
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        exe = shutil.which("lint-imports")
    assert exe, "import-linter is a dev dependency; run make test"
    out = subprocess.run([str(exe), "--no-cache"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_import_cli_loads_nothing_heavy():
    assert _heavy(_loaded_after("import triage.cli")) == set()


@pytest.mark.parametrize("argv", [["--version"], ["rules", "list"]])
def test_light_commands_load_nothing_heavy(argv):
    code = ("import sys\nfrom triage.cli import app\n"
            f"try:\n    app(args={argv!r}, prog_name='triage', standalone_mode=False)\n"
            "except SystemExit:\n    pass\n")
    assert _heavy(_loaded_after(code)) == set()


def test_core_install_resolves_without_torch(tmp_path):
    """pip's own resolver, dry-run, on the core install (no extras): no torch in what it would install."""
    report = tmp_path / "resolve.json"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                          "--report", str(report), str(REPO)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and not report.exists():
        pytest.skip(f"pip could not resolve (no package index reachable?): {out.stderr.strip()[-300:]}")
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "typer" in names, "the resolution did not include triage's own dependencies"
    assert not names & {"torch", "fastapi", "uvicorn", "matplotlib", "tokenizers", "safetensors"}, sorted(names)


def test_missing_extra_names_the_pip_line(torch_not_installed):
    """The message names the missing package and installs the extra from this checkout (pyproject's list)."""
    from triage.core.errors import MissingExtra, require_extra
    from triage.core.extras import requirements

    root = str(Path(__file__).resolve().parents[1])
    with pytest.raises(MissingExtra, match=r"\(torch not installed\): pip install (-e )?'" + re.escape(root) + r"\[engine\]'"):
        require_extra("engine", "triage serve")
    assert any(r.startswith("torch") for r in requirements("engine"))


def test_one_registry_type_serves_rules_probes_formats_and_engines():
    """Each plug-in registers by being a module in its folder; one Registry type finds them and refuses a
    second item under one key (the 'registered twice' check is written once)."""
    from triage.core.registry import Registry, RegistryError
    from triage.engines.registry import ENGINES
    from triage.formats import FORMATS
    from triage.probes.registry import PROBES
    from triage.rules import REGISTRY

    for registry, some in ((REGISTRY, "KV001"), (PROBES, "gpu"), (FORMATS, "json"), (ENGINES, "vllm")):
        assert isinstance(registry, Registry) and some in registry, registry.what
    root = Path(__file__).resolve().parents[1]
    by_hand = [str(p.relative_to(root)) for folder in ("triage", "probes", "rules") for p in (root / folder).rglob("*.py")
               if "pkgutil" in p.read_text() and p.name != "registry.py" or "registered twice" in p.read_text()
               and p.relative_to(root) != Path("triage/core/registry.py")]
    assert by_hand == [], by_hand
    with pytest.raises(RegistryError, match="format json is registered twice"):
        FORMATS.add(FORMATS["json"])
