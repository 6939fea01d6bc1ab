#!/usr/bin/env bash
# Create .venv and install triage (with every extra and the dev tools) into it. Idempotent: a
# second run only re-installs when pyproject.toml's content changed.
#
# torch: on a host without an NVIDIA GPU we install the CPU build (TORCH_SPEC, default
# torch==2.13.0) so pip never pulls the multi-GB CUDA wheels. On a GPU host, bring your own
# CUDA torch: install it into .venv first (or set TORCH_SPEC), and this script keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
stamp="$VENV/.triage-installed"

# pip here warns about every find-links/index location a package is missing from; keep real errors.
pip_install() { "$VENV/bin/python" -m pip install -q "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

# The real Prometheus and promtool (Debian's `prometheus` package) for the alert-rule and `triage watch`
# tests, where apt is usable (root or passwordless sudo). Anywhere else those tests skip with the reason.
install_prometheus() {
  command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || return 0
    sudo="sudo -n"
  fi
  echo "bootstrap: installing Debian's prometheus (promtool) for the alert-rule tests" >&2
  { $sudo apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 ||
    { $sudo apt-get update -q >/dev/null 2>&1 &&
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1; }; } ||
    echo "bootstrap: could not install prometheus; its tests will skip" >&2
  # The package starts a service on :9090 where systemd runs; tests start their own on loopback.
  return 0
}
[ "${TRIAGE_NO_APT:-0}" = 1 ] || DEBIAN_FRONTEND=noninteractive install_prometheus

want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import triage, torch" 2>/dev/null; then
  exit 0
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "triage needs Python >= 3.10 (found $("$PYTHON" --version 2>&1)); set PYTHON=python3.11" >&2
  exit 2
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "bootstrap: installing $TORCH_SPEC (CPU build unless you installed CUDA torch yourself)" >&2
  pip_install "$TORCH_SPEC"
fi
echo "bootstrap: installing triage and its dev tools into $VENV" >&2
pip_install -e ".[dev]"
# The reference engine's bf16-weight and fp8/int4 CPU kernels compile once (~30 s each) and are cached under
# ~/.cache: build them now so that the first `triage baseline` or `serve` does not pay for it. Failure is fine
# (fp32 weights; the quantized layers keep torch's paths and say so).
"$VENV/bin/python" -c "from triage.reference_engine.layers.kernels.bf16_weights import kernel; m, why = kernel(); \
print('bootstrap: bf16-weight kernel', 'ready' if m else f'not built: {why}')" >&2 || true
"$VENV/bin/python" -c "from triage.reference_engine.layers.kernels.quant_weights import kernel; m, why = kernel(); \
print('bootstrap: fp8/int4 weight kernel', 'ready' if m else f'not built: {why}')" >&2 || true
echo "$want" > "$stamp"
