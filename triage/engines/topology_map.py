"""How an engine's /metrics show its deployment's shape: which label tells data-parallel ranks apart, which
label names the disaggregation role, which series time the KV transfer between prefill and decode instances,
which count the KV offload tier's traffic and hits, which summarise the MoE experts' balance.

Declared per engine (triage/engines/vllm.py, sglang.py), read by probes/prom_topology.py. Every name here is in
the engine's truth table (triage/engines/truth) or cited by a claim (triage/engines/ledger): a test checks.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Transfer:
    """One KV connector's own transfer metrics."""

    connector: str                   # the name its config gives it: "NixlConnector", "mooncake"
    time_hist: str                   # a histogram of the time of one transfer
    time_unit_s: float               # seconds per unit of time_hist (1 for *_seconds, 0.001 for *_ms)
    bytes_hist: str | None = None    # a histogram of the bytes (or MB) of one transfer
    bytes_unit: float = 1.0          # bytes per unit of bytes_hist
    failures: tuple[str, ...] = ()   # counters of failed transfers (the name as exposed, with _total)
    side: str = "decode"             # the instance that records it: "decode" (it pulls) or "prefill" (it pushes)
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Offload:
    """A KV offload tier's own metrics."""

    tier: str                                   # "vLLM native offload", "SGLang HiCache"
    hits: str | None = None                     # counters: tokens found in the tier, tokens looked up
    queries: str | None = None
    bytes_total: str | None = None              # counters: bytes moved and seconds spent moving them
    time_total_s: str | None = None
    used: str | None = None                     # gauges: the tier's used and total capacity
    capacity: str | None = None
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologyMap:
    rank_label: str | None = None              # the label whose values are data-parallel ranks
    role_label: str | None = None              # the label that names the instance's disaggregation role
    role_values: dict[str, str] = field(default_factory=dict)   # its value -> prefill | decode | both
    running: str | None = None                 # per-rank gauges and histograms
    waiting: str | None = None
    kv_usage: tuple[str, ...] = ()             # the first name present (an engine renamed it once)
    ttft_hist: str | None = None
    queue_hist: str | None = None
    prefill_hist: str | None = None            # the prefill's own time, to set beside the transfer's
    transfers: tuple[Transfer, ...] = ()
    offloads: tuple[Offload, ...] = ()
    expert_balance: str | None = None          # a summary of mean/max expert load (1.0: perfectly even)
    claims: tuple[str, ...] = ()               # what the rank and role labels are, where they are set
    default_dp_balance: str | None = None      # how the ranks are balanced when no flag says
    # (balancing mode or None, the hot rank, the engine's version) -> (what to do, {knob: value} for its flags):
    # rule TOPO001's fix.
    dp_balance_fix: Callable[[str | None, str, str | None], tuple[str, dict[str, object]]] | None = None

    def names(self) -> list[str]:
        """Every metric name this map reads (histograms by base name)."""
        out = [n for n in (self.running, self.waiting, *self.kv_usage, self.ttft_hist, self.queue_hist,
                           self.prefill_hist, self.expert_balance) if n]
        for t in self.transfers:
            out += [t.time_hist, *([t.bytes_hist] if t.bytes_hist else []), *t.failures]
        for o in self.offloads:
            out += [n for n in (o.hits, o.queries, o.bytes_total, o.time_total_s, o.used, o.capacity) if n]
        return out
