"""NET003, high client rtt (rules/catalog/net003_high_client_rtt.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    metrics,
    network,
    snapshot,
)

CODE = "NET003"


def cases() -> list[Case]:
    return [
        case("positive_slow_loopback", "3.4 ms TCP connect on the same host",
             {**FIRES, "severity": "medium", "evidence_keys": ["network.tcp_connect_ms_p50"]},
             snapshot(network(tcp_connect_ms_p50=3.4, health_ttfb_ms_p50=6.1))),
        case("positive_remote_share_of_ttft", "Remote server: 25 ms RTT on a 60 ms TTFT",
             {**FIRES, "evidence_keys": ["server_metrics.histograms.ttft_s.p50_s"]},
             snapshot(network(same_host=False, url="http://10.0.0.7:8000", tcp_connect_ms_p50=25.0,
                              health_ttfb_ms_p50=26.0),
                      metrics("histograms.ttft_s", p50_s=0.06))),
        case("positive_slow_front_end", "Loopback connects in 0.1 ms but /health takes 17 ms (real run on a "
             "busy 2-core host): the server, not the network", {**FIRES, "severity": "low", "certainty": "possible",
                                                                "text_contains": ["not the network"]},
             snapshot(network(tcp_connect_ms_p50=0.1, health_ttfb_ms_p50=17.2))),
        case("negative_fast_loopback", "Sub-millisecond loopback", PASSES, snapshot()),
    ]
