"""Deployment topologies (docs/TOPOLOGIES.md): per-rank, transfer and offload signals read from /metrics captures
of the engines' own exposition code, `diagnose --url A --url B` against real loopback servers that replay them,
the topology in the text and JSON reports, and the provenance of every metric and flag used."""
from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from tests.capture_server import CaptureServer
from tests.rules_fixtures_topology import window
from triage.cli import app
from triage.engines import engines
from triage.engines.claims import ledger
from triage.engines.truth import metric_names, table
from triage.probes.server_config import parse_flags

# The probes that read this host, not the server: left out to keep the window about the captures.
SKIP = "storage,gpu,kernel_log,memory,cpu,server_process,network"
# diagnose scrapes /metrics twice before the window (discovery names the engine, then server_config reads
# cache_config_info): the window's first scrape is the third. test_dp4_balanced_is_quiet fails if that changes.
TARGET_BEFORE_SCRAPES = 3


def _diagnose(*urls: str, out=None) -> tuple[int, str]:
    args = ["--no-color", "diagnose", "--window-s", "0.3", "--skip", SKIP, "--no-discover"]
    for u in urls:
        args += ["--url", u]
    if out is not None:
        args += ["--json", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    return result.exit_code, result.output


def _findings(path) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(path.read_text())["findings"]}


def _probe(path, name: str) -> dict:
    return next(p for p in json.loads(path.read_text())["probes"] if p["name"] == name)


# -- reading one window ----------------------------------------------------------------------------

def test_ranks_are_kept_apart_instead_of_summed():
    m = window("vllm_dp4_hot_rank")
    assert [r.rank for r in m.ranks] == ["0", "1", "2", "3"]
    hot = m.ranks[2]
    assert hot.num_requests_waiting_max == 23 and hot.kv_cache_usage_frac_max == pytest.approx(0.97)
    assert hot.ttft.mean_s == pytest.approx(2.4, rel=1e-6) and m.ranks[0].ttft.mean_s == pytest.approx(0.09, rel=1e-6)
    assert m.num_requests_waiting == 23          # the engine-wide sum is still what it was


def test_one_rank_or_no_rank_label_gives_no_ranks():
    assert window("vllm_pd_decode_healthy").ranks == ()


def test_transfer_window_converts_units_per_engine():
    nixl = window("vllm_pd_decode_transfer_bound").kv_transfer
    assert nixl.connector == "NixlConnector" and nixl.side == "decode"
    assert nixl.time_mean_s == pytest.approx(0.9) and nixl.num_transfers_delta == 150
    assert nixl.gbytes_per_s == pytest.approx(2.0e9 / 0.9 / 1e9)
    sg = window("sglang_pd_prefill_saturated").kv_transfer     # milliseconds and MiB (bytes / 1024**2) on the wire
    assert sg.side == "prefill" and sg.time_mean_s == pytest.approx(0.040)
    assert sg.bytes_mean == pytest.approx(400 * 1024 ** 2)     # 400 "MB" are MiB: 4.9% more than 4e8 bytes


def test_offload_window_and_role_label():
    off = window("vllm_offload_low_hit").kv_offload
    assert off.hit_rate == pytest.approx(0.015) and off.gbytes_per_s == pytest.approx(2.42)
    assert window("vllm_dp4_balanced").kv_offload is None      # the series exist, nothing went through them
    assert window("sglang_pd_prefill_saturated").role == "prefill"
    assert window("sglang_dp4_eplb_skewed").role is None       # "unified" names no role
    assert window("sglang_dp4_eplb_skewed").expert_balancedness == pytest.approx(0.42)


def test_topology_flags_parse():
    cfg, bad = parse_flags(["vllm", "serve", "m", "-dp", "4", "--data-parallel-external-lb", "-ep", "--enable-eplb",
                            "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'], "vllm")
    assert not bad
    assert cfg["data_parallel_size"] == 4 and cfg["dp_load_balance"] == "external" and cfg["expert_parallel"]
    assert cfg["kv_connector"] == "NixlConnector" and cfg["disaggregation_role"] == "prefill"
    cfg, _ = parse_flags(["vllm", "serve", "m", "--kv-transfer-config",
                          '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}'], "vllm")
    assert cfg["kv_offload"] == "OffloadingConnector" and "disaggregation_role" not in cfg
    cfg, _ = parse_flags(["python", "-m", "sglang.launch_server", "--disaggregation-mode", "decode",
                          "--dp-size", "2", "--load-balance-method", "round_robin"], "sglang")
    assert cfg["disaggregation_role"] == "decode" and cfg["kv_connector"] == "mooncake"
    cfg, _ = parse_flags(["python", "-m", "sglang.launch_server", "--disaggregation-mode", "null",
                          "--disaggregation-transfer-backend", "nixl"], "sglang")
    assert "disaggregation_role" not in cfg and "kv_connector" not in cfg


# -- diagnose against real servers ----------------------------------------------------------------

def test_dp4_hot_rank_is_named_with_its_knob(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("vllm_dp4_hot_rank", TARGET_BEFORE_SCRAPES) as s:
        code, text = _diagnose(s.url, out=out)
    assert code == 0, text
    assert "topology: data parallel x4 · 4 ranks, internal balancing" in text
    assert "2: 23 waiting, KV 97%" in text
    f = _findings(out)["TOPO001"]
    assert "Rank 2 of 4" in f["message"] and "X-data-parallel-rank" in f["fix"]["text"]
    assert "KV001" not in _findings(out)      # one full rank of four is the imbalance, not a small cache
    assert "SCHED003" in f["explains"]
    topo = _probe(out, "topology")["data"]
    assert topo["data_parallel_size"] == 4 and topo["data_parallel_ranks"] == ["0", "1", "2", "3"]


def test_dp4_balanced_is_quiet(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("vllm_dp4_balanced", TARGET_BEFORE_SCRAPES) as s:
        code, text = _diagnose(s.url, out=out)
    assert code == 0, text
    metrics = _probe(out, "server_metrics")["data"]
    assert metrics["num_requests_finished_delta"] > 0, "the replay served no window: did the scrape order change?"
    assert not [c for c in _findings(out) if c.startswith(("TOPO", "KV", "SCHED"))]


def test_transfer_bound_ttft_names_the_connector_not_prefill(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("vllm_pd_decode_transfer_bound", TARGET_BEFORE_SCRAPES) as s:
        code, text = _diagnose(s.url + "#decode", out=out)
    assert code == 0, text
    assert "this instance: decode · KV connector NixlConnector" in text
    f = _findings(out)["TOPO003"]
    assert f["severity"] == "high"
    assert "NixlConnector" in f["message"] and "900 ms" in f["message"] and "not the prefill" in f["message"]
    assert "SCHED001" not in _findings(out)     # nothing blames prefill chunking


def test_healthy_transfer_is_quiet(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("vllm_pd_decode_healthy", TARGET_BEFORE_SCRAPES) as s:
        code, _ = _diagnose(s.url, out=out)
    assert code == 0 and "TOPO003" not in _findings(out)
    assert _probe(out, "server_metrics")["data"]["kv_transfer"]["time_mean_s"] == pytest.approx(0.02)


def test_prefill_decode_ratio_from_both_sides(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("sglang_pd_decode_idle", TARGET_BEFORE_SCRAPES) as d, \
            CaptureServer("sglang_pd_prefill_saturated") as p:
        code, text = _diagnose(d.url, p.url, out=out)
    assert code == 0, text
    assert f"peer: {p.url}=prefill" in text
    f = _findings(out)["TOPO004"]
    assert f["message"].startswith("The prefill side is saturated")
    peers = _probe(out, "server_peers")["data"]["peers"]
    assert peers[0]["role_source"] == "metrics label" and peers[0]["metrics"]["num_requests_waiting_max"] == 41


def test_matched_prefill_decode_split_is_quiet(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("sglang_pd_decode_busy", TARGET_BEFORE_SCRAPES) as d, \
            CaptureServer("sglang_pd_prefill_ok") as p:
        code, _ = _diagnose(d.url, p.url + "#prefill", out=out)
    assert code == 0 and "TOPO004" not in _findings(out)


def test_a_peer_that_does_not_answer_is_said_not_fatal(tmp_path):
    out = tmp_path / "r.json"
    with CaptureServer("vllm_dp4_balanced", TARGET_BEFORE_SCRAPES) as s:
        code, _ = _diagnose(s.url, "http://127.0.0.1:9#decode", out=out)
    assert code == 0
    peers = _probe(out, "server_peers")
    assert peers["status"] == "error" and "127.0.0.1:9" in peers["reason"]


def test_a_bad_role_fragment_is_a_usage_error():
    code, text = _diagnose("http://127.0.0.1:8000#prefil")
    assert code == 2 and "prefill, decode, both" in text and "Traceback" not in text


# -- provenance -----------------------------------------------------------------------------------

def _tabled_metric(engine: str, name: str) -> bool:
    every = metric_names(engine)      # the union over every tabled version
    return name in every or re.sub(r"_total$", "", name) in every


def test_every_topology_metric_is_tabled_or_cited():
    cited = {c.id: c for c in ledger().values()}
    for engine in engines():
        tmap = engine.topology
        if tmap is None:
            continue
        claims = [cited[c] for c in tmap.claims
                  + sum((t.claims for t in tmap.transfers), ()) + sum((o.claims for o in tmap.offloads), ())]
        for name in tmap.names():
            if _tabled_metric(engine.name, name):
                continue
            stem = re.sub(r"_total$", "", name)
            assert any(c.origin == engine.name for c in claims), (engine.name, name)
            assert stem in " ".join(c.sentence for c in claims), f"{name}: neither tabled nor named by a claim"


def test_every_topology_flag_is_in_the_tables():
    for name, flags in (("vllm", ("--data-parallel-external-lb", "--data-parallel-hybrid-lb", "--enable-expert-parallel",
                                  "--enable-eplb", "--kv-transfer-config", "--kv-offloading-backend",
                                  "--kv-offloading-size")),
                        ("sglang", ("--load-balance-method", "--enable-dp-attention", "--ep-size", "--enable-eplb",
                                    "--disaggregation-mode", "--disaggregation-transfer-backend",
                                    "--enable-hierarchical-cache"))):
        newest = table(name, None)
        for flag in flags:
            assert newest.flag(flag) is not None, f"{flag} is not in {name} {newest.version}'s table"


def test_captures_are_what_the_script_writes():
    from scripts.make_topology_captures import main
    assert main(["--check"]) == 0


# -- bench: each replica's role and the server's own time split ----------------------------------

def test_a_bench_window_carries_the_role_and_the_transfer_time():
    from tests.capture_server import CAPTURES
    from triage.bench.server_scrape import server_summary

    texts = [(CAPTURES / f"sglang_pd_prefill_saturated.{k}.prom").read_text() for k in ("before", "after")]
    server, reason = server_summary([(0.0, texts[0]), (10.0, texts[1])], client_ttft_ms_mean=None)
    assert reason is None and server.role == "prefill"
    assert server.kv_transfer_ms_mean == pytest.approx(40.0) and server.server_queue_time_ms_mean == pytest.approx(3500)


def test_the_replica_line_shows_the_time_split_the_server_exports():
    from triage.core.bench_data import LevelServer, Replica, ReplicaLatency
    from triage.render.bench import _replica_line

    rep = Replica(replica=1, url="http://d:8000", role="decode", requests=24, failed=0,
                  ttft_ms=ReplicaLatency(p99=1300.0),
                  server=LevelServer(server_queue_time_ms_mean=12.0, server_prefill_time_ms_mean=30.0,
                                     kv_transfer_ms_mean=900.0, server_decode_time_ms_mean=410.0))
    line = _replica_line("c=8", rep)
    assert line.startswith("c=8 replica 1 (http://d:8000, decode): 24 requests, TTFT p99 1,300.0 ms")
    assert line.endswith("server time: queue 12.0 ms, prefill 30.0 ms, KV transfer 900.0 ms, decode 410.0 ms")
