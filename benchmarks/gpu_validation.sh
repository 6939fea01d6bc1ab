#!/usr/bin/env bash
# One command for a GPU host: the @pytest.mark.gpu tests, `triage diagnose --active`, a redacted NVML capture
# saved as a test fixture, Triton attention against SDPA, and the CUDA reference engine's decode roofline.
#   benchmarks/gpu_validation.sh OUT_DIR [--dry-run] [--steps a,b]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" benchmarks/gpu_validation.py "$@"
