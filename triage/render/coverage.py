"""What a diagnosis covered, said briefly at the end of the text view: one line per probe layer ("looked
at: host ok · gpu unsupported (no NVIDIA driver here) · …") and the rules skipped, grouped by the input
that would let them run and the option that gives it."""
from __future__ import annotations

import re
from collections import Counter

from triage.core.report import Report, SkippedRule
from triage.core.snapshot import ProbeResult, ProbeStatus

# Probe layers, in the order a diagnosis reads them; a probe not listed goes under "other".
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("host", ("cpu", "memory", "host_memory", "storage", "kernel_log")),
    ("gpu", ("gpu", "pcie", "hbm", "matmul", "allreduce")),
    ("network", ("network",)),
    ("server", ("server_process", "server_config", "server_metrics", "engine_identity", "logs", "topology",
                "server_peers", "prometheus_history")),
)

# A rule's input -> what supplies it (the option, or where triage must run).
_ACTIVE = "active measurements (--active)"
_SERVER = "a live server (--url URL)"
INPUT_HINTS: dict[str, str] = {
    "bench": "a bench report (--bench FILE)",
    "baseline": "an earlier report (--baseline FILE)",
    "logs": "the server's log (--log FILE)",
    "prometheus_history": "Prometheus history (--prometheus URL)",
    "kernel_log": "the kernel log (--kernel-log FILE)",
    "storage": "the model's files (--model PATH)",
    "gpu": "NVIDIA GPU readings (run on the GPU's host, or --from nvidia-smi -q output)",
    "cpu": "this host's readings (run triage on the server's host)",
    "memory": "this host's readings (run triage on the server's host)",
    **dict.fromkeys(("host_memory", "pcie", "hbm", "matmul", "allreduce"), _ACTIVE),
    **dict.fromkeys(("server_metrics", "server_config", "engine_identity", "server_process", "network",
                     "topology"), _SERVER),
}
SINGLE_INSTANCE = "does not apply to a single instance"
_NEEDS = re.compile(r"needs ([a-z_]+(?: or [a-z_]+)*): ")


def not_applicable(p: ProbeResult) -> str | None:
    """Why a probe that did not run is normal here (no advice to give), or None. `server_peers` runs only
    when --url names more than one instance: for a single server there is nothing for it to do."""
    if p.name == "server_peers" and p.status is ProbeStatus.UNSUPPORTED:
        return "single instance: no other instance named"
    return None


def short_reason(reason: str | None) -> str:
    """The gist of a probe's reason: its first clause ('no NVIDIA driver here' from 'no NVIDIA driver
    here: NVML says …'), without the parenthesised advice."""
    if not reason:
        return ""
    gist = re.split(r": |; | \(", reason, maxsplit=1)[0].strip()
    return gist if len(gist) <= 80 else gist[:80].rsplit(" ", 1)[0] + " …"


def _probe_words(p: ProbeResult) -> str:
    gist = short_reason(p.reason)
    return f"{p.status.value}" + (f" ({gist})" if gist else "")


def _layer_words(name: str, probes: list[ProbeResult]) -> str:
    bad = [p for p in probes if not p.ok]
    if not bad:
        return f"{name} ok"
    gist = short_reason(bad[0].reason)
    if len(bad) == len(probes):
        status = bad[0].status.value if len({p.status for p in bad}) == 1 else "not checked"
        return f"{name} {status}" + (f" ({gist})" if gist else "")
    if len(bad) <= 2:
        return f"{name} ok except " + ", ".join(f"{p.name} {_probe_words(p)}" for p in bad)
    return f"{name} partly checked ({len(bad)} of {len(probes)} probes got no data" + (f": {gist})" if gist else ")")


def layer_words(report: Report) -> list[str]:
    """One phrase per probe layer that ran (probes that do not apply here left out)."""
    layer_of = {probe: layer for layer, probes in LAYERS for probe in probes}
    grouped: dict[str, list[ProbeResult]] = {}
    for p in report.probes:
        if not_applicable(p) is None:
            grouped.setdefault(layer_of.get(p.name, "other"), []).append(p)
    order = [layer for layer, _ in LAYERS] + ["other"]
    return [_layer_words(layer, grouped[layer]) for layer in order if layer in grouped]


def _bucket(rule: SkippedRule, report: Report) -> str | None:
    """What would let a skipped rule run, or None when its inputs were there but not the data it judges."""
    match = _NEEDS.match(rule.reason)
    if match is None:
        return None
    first = match.group(1).split(" or ")[0]
    if first == "server_peers":
        peers = next((p for p in report.probes if p.name == "server_peers"), None)
        return SINGLE_INSTANCE if peers is None or not_applicable(peers) else None
    return INPUT_HINTS.get(first)


def _count(n: int, first: bool, verb: str = "need") -> str:
    if first:
        return f"{n} rule{'s' if n != 1 else ''} {verb if n != 1 else verb + 's'}"
    return f"{n} {verb if n != 1 else verb + 's'}"


def skipped_summary(report: Report) -> str | None:
    """The skipped rules (not the errored ones) by what would let them run, most first, or None."""
    skipped = [r for r in report.skipped_rules if not r.reason.startswith("errored")]
    if not skipped:
        return None
    buckets = Counter(_bucket(r, report) for r in skipped)
    other = buckets.pop(None, 0)
    applies = buckets.pop(SINGLE_INSTANCE, 0)
    parts = [f"{_count(n, i == 0)} {hint}" for i, (hint, n) in enumerate(buckets.most_common())]
    if applies:
        parts.append(f"{applies} {SINGLE_INSTANCE if applies == 1 else 'do not apply to a single instance'}")
    if other:
        parts.append(f"{other} found their inputs but not the data they judge")
    return (f"{len(skipped)} rules skipped: " + ", ".join(parts)
            + " (each rule's reason: the JSON report's skipped_rules).")
