"""CONTRIBUTING's "Add a rule" commands run as written: each line of its shell block, in a scratch copy of the
repository (with this checkout's Python), succeeds, and regenerating the docs and fixtures changes nothing
(they are committed in sync). Its pytest lines are collected there, not run again: the suite runs them."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", "out", "build", "dist", ".pytest_cache", ".ruff_cache", ".hypothesis", "__pycache__",
        "engine_sources"}


def _section_commands(title: str) -> list[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        lines += [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return lines


def test_the_add_a_rule_commands_run_in_a_scratch_copy(tmp_path):
    commands = _section_commands("Add a rule in 5 steps")
    assert len(commands) >= 3, commands
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, symlinks=True, ignore=lambda d, names: [n for n in names if n in SKIP
                                                                       or n.endswith(".egg-info")])
    env = {**os.environ, "PYTHONPATH": str(copy), "COLUMNS": "100"}
    for line in commands:
        argv = shlex.split(line.split(">")[0])
        assert argv[0] == "python", f"CONTRIBUTING's commands run with python: {line}"
        target = copy / line.split(">", 1)[1].strip() if ">" in line else None
        pytest_line = argv[1:3] == ["-m", "pytest"]
        out = subprocess.run([sys.executable, *argv[1:], "-p", "no:cacheprovider", "--collect-only"] if pytest_line
                             else [sys.executable, *argv[1:]], cwd=copy, capture_output=True, text=True,
                             timeout=600, env=env)
        assert out.returncode == 0, f"{line}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        if target is not None:
            target.write_text(out.stdout)
    for generated in ("docs/RULES.md", "tests/fixtures/rules"):
        diff = subprocess.run(["diff", "-r", str(ROOT / generated), str(copy / generated)], capture_output=True,
                              text=True)
        assert diff.returncode == 0, f"{generated} is not what its command writes:\n{diff.stdout[:2000]}"
