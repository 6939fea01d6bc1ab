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

# progress WHAT CMD...: run CMD, saying every 15 s that WHAT is still going and for how long.
progress() {
  local what=$1 start=$SECONDS pid; shift
  "$@" & pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 15); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && echo "bootstrap: $what ... $((SECONDS - start)) s" >&2
  done
  wait "$pid"
  echo "bootstrap: $what done in $((SECONDS - start)) s" >&2
}

# Test tools (`make test` only, TRIAGE_TEST_TOOLS=1; `make demo` needs none of them):
# - Debian's prometheus and promtool for the alert-rule and `triage watch` tests. The package is unpacked into
#   $VENV/opt/prometheus, not installed: nothing runs as a service, nothing is written outside the checkout,
#   and no root is needed where apt's package lists exist.
# - Debian's chromium for the HTML report screenshot test: a real install, so only as root (or passwordless
#   sudo), said before it starts.
# Anywhere these cannot be had, their tests skip with the reason.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"; else return 1; fi
}
unpack_prometheus() {
  local dest="$VENV/opt/prometheus"
  command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && return 0
  [ -x "$dest/usr/bin/promtool" ] && return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  local tmp; tmp=$(mktemp -d)
  echo "bootstrap: unpacking Debian's prometheus into $dest for the alert-rule tests (no service, no root)" >&2
  if ( cd "$tmp" && { apt-get download -q prometheus >/dev/null 2>&1 ||
       { as_root apt-get update -q >/dev/null 2>&1 && apt-get download -q prometheus >/dev/null 2>&1; }; } ); then
    mkdir -p "$dest" && dpkg -x "$tmp"/prometheus_*.deb "$dest"
  else
    echo "bootstrap: could not download prometheus; its tests will skip" >&2
  fi
  rm -rf "$tmp"
}
install_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  echo "bootstrap: installing Debian's chromium (as root) for the HTML report screenshot test" >&2
  { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 ||
    { as_root apt-get update -q >/dev/null 2>&1 &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; } ||
    echo "bootstrap: could not install chromium; the screenshot test will skip" >&2
}
if [ "${TRIAGE_TEST_TOOLS:-0}" = 1 ] && [ "${TRIAGE_NO_APT:-0}" != 1 ]; then
  unpack_prometheus
  install_chromium
fi

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
  echo "bootstrap: installing $TORCH_SPEC (CPU build unless you installed CUDA torch yourself; about a minute)" >&2
  progress "installing torch" pip_install "$TORCH_SPEC"
fi
# Before the rename to triage-llm the distribution was `triage`: drop that editable install of this checkout.
old=$("$VENV/bin/python" -m pip show triage 2>/dev/null || true)
if grep -qx "Editable project location: $(pwd)" <<<"$old"; then
  "$VENV/bin/python" -m pip uninstall -y -q triage >/dev/null 2>&1 || true
fi
echo "bootstrap: installing triage and its dev tools into $VENV (one to two minutes on a fresh machine)" >&2
progress "installing triage's dependencies" pip_install -e ".[dev]"
# The reference engine's CPU kernels (bf16 weights, fp8/int4 weights, decode attention) compile once (~30 s
# each) and are cached under ~/.cache: build them now so that the first `triage baseline` or `serve` does not
# pay for it. Failure is fine (fp32 weights; the quantized layers and attention keep torch's paths and say so).
echo "bootstrap: compiling the reference engine's CPU kernels (about 30 s each, once)" >&2
"$VENV/bin/python" -c "from triage.reference_engine.layers.kernels.bf16_weights import kernel; m, why = kernel(); \
print('bootstrap: bf16-weight kernel', 'ready' if m else f'not built: {why}')" >&2 || true
"$VENV/bin/python" -c "from triage.reference_engine.layers.kernels.quant_weights import kernel; m, why = kernel(); \
print('bootstrap: fp8/int4 weight kernel', 'ready' if m else f'not built: {why}')" >&2 || true
"$VENV/bin/python" -c "from triage.reference_engine.layers.kernels.decode_attention import kernel; m, why = kernel(); \
print('bootstrap: decode-attention kernel', 'ready' if m else f'not built: {why}')" >&2 || true
echo "$want" > "$stamp"
echo "bootstrap: ready. The command is $VENV/bin/triage (or: source $VENV/bin/activate, then triage)" >&2
