"""Install triage as a user does: build a wheel from this checkout, install it into a fresh venv with no
extras, and run `triage --version` and every command's `--help`. Then follow each missing-extra message to
the letter (its own pip line), which must install from this project, never from the unrelated `triage` on
PyPI, and run every help again. Needs the package registry for the core dependencies; torch comes from the
local CPU wheel (`torch==2.13.0`), as the bootstrap installs it."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
import typer

from triage.cli import app
from triage.core.extras import DISTRIBUTION

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")
# Added to every pip install here: quiet, and no byte-compiling of what it installs (that is half of torch's
# install time, 34 s against 17 s on the 2-vCPU Xeon, and changes nothing that is installed).
QUIET = ("-q", "--no-compile")
SKIP_PARTS = {".git", ".venv", "out", "build", "dist", ".pytest_cache", ".ruff_cache", ".hypothesis",
              "__pycache__", "engine_sources"}


def _command_paths(cmd=None, path=()) -> list[tuple[str, ...]]:
    cmd = cmd or typer.main.get_command(app)
    paths = [path]
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        paths += _command_paths(sub, (*path, name))
    return paths


def _run(argv: list[str], timeout_s: float = 600, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "COLUMNS": "100", "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, **kw)


def _ok(out: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert out.returncode == 0, f"{what} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _pip_line(stderr: str) -> list[str]:
    """The `pip install ...` that a missing-extra message ends with, as argv."""
    found = re.search(r"(pip install .+)$", stderr.strip().splitlines()[-1])
    assert found, f"no pip line in: {stderr!r}"
    return shlex.split(found.group(1))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of this working tree (the checkout itself is not written to)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=lambda d, names: [n for n in names if n in SKIP_PARTS
                                                                         or n.endswith(".egg-info")])
    _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
              str(tmp / "dist"), str(src)]), "pip wheel")
    (built,) = (tmp / "dist").glob("*.whl")
    return built


# Every command's --help, run inside the installed package by one process (a process per command took 17 s a pass
# on the 2-vCPU Xeon): each must exit 0 with a usage text and no traceback.
_HELPS = """
import json, sys
from typer.testing import CliRunner
from triage.cli import app
bad = []
for path in json.loads(sys.argv[1]):
    out = CliRunner().invoke(app, [*path, "--help"])
    text = out.output + (repr(out.exception) if out.exception and not isinstance(out.exception, SystemExit) else "")
    if out.exit_code != 0 or "Usage" not in text or "Traceback" in text:
        bad.append(f"triage {' '.join(path)} --help exited {out.exit_code}: {text[-2000:]}")
print("\\n".join(bad) or f"{len(json.loads(sys.argv[1]))} helps")
sys.exit(1 if bad else 0)
"""


def _helps_pass(bin_dir: Path) -> None:
    triage = str(bin_dir / "triage")
    version = _ok(_run([triage, "--version"]), "triage --version")        # the console script itself
    assert re.search(r"\d+\.\d+\.\d+", version.stdout)
    _ok(_run([triage, "bench", "--help"]), "triage bench --help")
    paths = _command_paths()
    out = _ok(_run([str(bin_dir / "python"), "-c", _HELPS, json.dumps(paths)]), "every command's --help")
    assert out.stdout.strip() == f"{len(paths)} helps", out.stdout


def test_the_wheel_installs_and_every_command_runs_and_every_extra_installs_from_this_project(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py, bin_dir = str(env_dir / "bin" / "python"), env_dir / "bin"
    _ok(_run([py, "-m", "pip", "install", *QUIET, str(wheel)]), "pip install the wheel")
    _ok(_run([py, "-m", "pip", "check"]), "pip check")
    _helps_pass(bin_dir)

    # --html without matplotlib: the message's own pip line installs the html extra from the wheel.
    html = _run([str(bin_dir / "triage"), "bench", "--url", "http://127.0.0.1:9", "--model", "m",
                 "--html", str(tmp_path / "r.html")])
    assert html.returncode == 2, html.stderr
    line = _pip_line(html.stderr)
    assert f"{wheel}[html]" in line, line
    _ok(_run([py, "-m", *line[:2], *QUIET, *line[2:]]), "the html extra's pip line")
    _ok(_run([py, "-c", "import matplotlib"]), "matplotlib after the html extra")

    # serve without torch: its pip line installs the engine extra from the wheel (torch from the local
    # CPU wheel first, as a GPU host brings its own CUDA torch).
    serve = _run([str(bin_dir / "triage"), "serve", "--model", "tiny"])
    assert serve.returncode == 2 and "'engine' extra" in serve.stderr, serve.stderr
    line = _pip_line(serve.stderr)
    assert f"{wheel}[engine]" in line, line
    _ok(_run([py, "-m", "pip", "install", *QUIET, TORCH_SPEC]), f"pip install {TORCH_SPEC}")
    _ok(_run([py, "-m", *line[:2], *QUIET, *line[2:]]), "the engine extra's pip line")
    _ok(_run([py, "-m", "pip", "check"]), "pip check with every extra")
    _helps_pass(bin_dir)
    _ok(_run([py, "-c", "import torch, fastapi, uvicorn, triage.reference_engine"]), "the engine imports")


def test_the_wheel_carries_every_kernel_source_and_header(wheel):
    """The engine compiles its C++ kernels on the user's host from the installed package: every source and every
    header they include must be in the wheel."""
    kernels = ROOT / "reference_engine" / "layers" / "kernels"
    wanted = {f"triage/reference_engine/layers/kernels/{p.name}" for p in kernels.iterdir() if p.suffix in {".cpp", ".h"}}
    assert any(name.endswith(".h") for name in wanted)
    with zipfile.ZipFile(wheel) as whl:
        assert wanted <= set(whl.namelist()), sorted(wanted - set(whl.namelist()))


def test_no_message_or_doc_installs_the_unrelated_pypi_triage():
    """`pip install triage...` installs "Risk modeling and prediction" from PyPI: no text may say it."""
    bad = re.compile(r"pip install\s+['\"]?triage(\[|['\"\s]|$)")
    hits = []
    for path in [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("triage/**/*.py"),
                 *ROOT.glob("probes/**/*.py"), *ROOT.glob("scripts/*.sh")]:
        for n, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if bad.search(text):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {text.strip()}")
    assert not hits, "\n".join(hits)
    assert DISTRIBUTION != "triage"
