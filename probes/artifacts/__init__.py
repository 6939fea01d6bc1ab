"""What a ticket carries, read as evidence: a `/metrics` dump, `nvidia-smi` (the table, `-q` or `-q -x`), vLLM's
`collect_env` output, a launch command line, and a Markdown issue body holding any of them (and logs).

Each reader turns text into the payload the live probe fills (`server_metrics`, `gpu`, `cpu`, `server_config`,
`server_process`) and says what it could not give; `classify` tells the kinds apart by content. Nothing here
reads this host: the text is all there is (docs/TICKETS.md).
"""
from __future__ import annotations

import re

# The kinds a block of text can be, in the order `classify` tries them.
KINDS = ("nvidia-smi-xml", "nvidia-smi-q", "nvidia-smi", "collect-env", "metrics", "command", "log")

_METRIC_LINE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?\s+[-+0-9.eEinfINFNa]+(\s+\d+)?\s*$")
_COMMENT = re.compile(r"^# (HELP|TYPE) [a-zA-Z_:]")


def classify(text: str) -> str:
    """One of KINDS for a block of text (a log when nothing else fits)."""
    head = text[:20000]
    if "<nvidia_smi_log" in head:
        return "nvidia-smi-xml"
    if "NVSMI LOG" in head or (re.search(r"^Attached GPUs\s*:", head, re.M) and "Product Name" in head):
        return "nvidia-smi-q"
    if "NVIDIA-SMI" in head and "Driver Version" in head and "|" in head:
        return "nvidia-smi"
    if "Collecting environment information" in head or (
            re.search(r"^PyTorch version\s*:", head, re.M) and re.search(r"^(vLLM Version|OS)\s*:", head, re.M)):
        return "collect-env"
    if _looks_like_metrics(head):
        return "metrics"
    from triage.probes.artifacts.launch import find_command

    if find_command(text) is not None:
        return "command"
    return "log"


def _looks_like_metrics(text: str) -> bool:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return False
    typed = sum(1 for ln in lines if _COMMENT.match(ln))
    samples = sum(1 for ln in lines if _METRIC_LINE.match(ln))
    return typed > 0 and (typed + samples) >= 0.8 * len(lines)
