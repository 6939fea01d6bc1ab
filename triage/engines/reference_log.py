"""What the reference engine's log (`triage serve`) states: each form is the string at the cited line of this
repository (ledger/reference.json, kind "local": a test checks it against the working tree). It writes vLLM's
KV and stats lines on purpose, so the same rules read both."""
from __future__ import annotations

from triage.engines.base import LogForm

LOG_FACTS = {
    "start": (LogForm(None, "triage-reference %s: %s", "reference.log-start", ("version_text", "argv_text")),),
    "config": (LogForm(None, "model=%s served as %r, dtype=%s, attention=%s, max_model_len=%d", "reference.log-model",
                       ("model_text", "", "dtype_text", "", "max_model_len")),),
    "kv_tokens": (LogForm(None, "KV cache size: %s tokens", "reference.log-kv-tokens", ("kv_tokens",)),),
    "max_concurrency": (LogForm(None, "Maximum concurrency for %s tokens per request: %.2fx",
                                "reference.log-max-concurrency", ("tokens_per_request", "concurrency")),),
    "stats": (LogForm(None, "Running: %d reqs, Waiting: %d reqs", "reference.log-stats", ("running", "waiting")),),
    "stats_kv_usage_pct": (LogForm(None, "KV cache usage: %.1f%%", "reference.log-stats", ("kv_usage_pct",)),),
}
