"""A command imports only what it runs: `triage --version` and `triage --help` load no command module, no
engine table, no report model, no plan, rules or probes (benchmarks/diagnose_runtime.py times the start-up)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

FORBIDDEN = ("triage.commands", "triage.engines", "triage.core.report", "triage.plan", "triage.rules",
             "triage.probes", "triage.bench", "triage.diagnose", "triage.render", "triage.formats",
             "triage.cli_support", "pandas", "numpy", "scipy", "httpx", "torch")


def _imported(tmp_path, *argv: str) -> set[str]:
    """Every module a fresh `triage ARGV` process has imported when it exits."""
    record = tmp_path / "modules.json"
    code = ("import atexit, json, sys\n"
            f"atexit.register(lambda: open({str(record)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
            f"sys.argv = ['triage', *{list(argv)!r}]\n"
            "from triage.cli import main\nmain()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "100"})
    assert out.returncode in (0, 2) and "Traceback" not in out.stderr, out.stderr[-2000:]
    return set(json.loads(record.read_text()))


@pytest.mark.parametrize("argv", [("--version",), ("--help",), ()], ids=["version", "help", "no-args"])
def test_the_root_loads_no_command(argv, tmp_path):
    loaded = _imported(tmp_path, *argv)
    assert "triage.cli" in loaded
    heavy = sorted(m for m in loaded if m.startswith(FORBIDDEN))
    assert not heavy, heavy


def test_a_command_loads_its_own_module_and_not_the_others(tmp_path):
    loaded = _imported(tmp_path, "plan", "--help")
    assert "triage.commands.plan" in loaded
    others = sorted(m for m in loaded if m.startswith("triage.commands.") and m != "triage.commands.plan")
    assert not others, others
