"""The DaemonSet and the Grafana dashboard that ship beside `triage watch`: valid YAML/JSON, the settings
the docs promise, and only metric names that watch (or its recording rules) really produces."""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from triage.watch import alert_rules
from triage.watch.signals import GPU_SIGNALS, SERVER_SIGNALS

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
EXPORTED = ({"triage_finding", "triage_probe_status", "triage_rule_skipped", "triage_ttft_p99_seconds",
             "triage_watch_cycles_total", "triage_watch_cycle_failures_total",
             "triage_watch_last_cycle_timestamp_seconds", "triage_watch_last_cycle_duration_seconds"}
            | {name for name, _, _ in SERVER_SIGNALS} | {name for name, _, _ in GPU_SIGNALS}
            | {r["record"] for r in alert_rules.recording_rules()})


def test_the_daemonset_runs_watch_with_host_pids_nvml_and_an_explicit_bind():
    doc = yaml.safe_load((DEPLOY / "kubernetes" / "triage-watch-daemonset.yaml").read_text())
    assert doc["kind"] == "DaemonSet"
    pod = doc["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    container = pod["containers"][0]
    assert container["args"][0] == "watch" and "--metrics-host=0.0.0.0" in container["args"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    port = next(a for a in container["args"] if a.startswith("--metrics-port=")).split("=")[1]
    annotations = doc["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == port
    assert container["ports"][0]["containerPort"] == int(port)


def test_the_dashboard_only_queries_what_watch_exports():
    dash = json.loads((DEPLOY / "grafana" / "triage-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    used = {m for e in exprs for m in re.findall(r"\btriage[_:][a-z0-9_:]+", e)}
    assert used and used <= EXPORTED, sorted(used - EXPORTED)
    assert {"triage_finding", "triage_kv_cache_usage_ratio", "triage_gpu_sm_clock_mhz"} <= used
