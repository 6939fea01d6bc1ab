"""A ticket as input: `/metrics` dumps, nvidia-smi (table, -q, -q -x), vLLM's collect_env, a launch command and a
Markdown issue body holding them, read offline by `triage diagnose --from` (tests/tickets builds the fixtures)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.tickets import FIXTURES, HEALTHY_GPUS, PLANTED_GPUS, tickets
from tests.tickets.build import (
    Host,
    collect_env,
    nvidia_smi_q,
    nvidia_smi_table,
    nvidia_smi_xml,
    vllm_v0_metrics,
)
from triage.cli import app
from triage.core.errors import ReportError
from triage.core.probe_data import ArtifactsData
from triage.diagnose.from_ticket import read_ticket
from triage.probes.artifacts import blocks, classify, metrics_dump, nvidia_smi
from triage.probes.artifacts import collect_env as collect_env_reader
from triage.probes.artifacts.launch import find_command

FAST = settings(max_examples=int(os.environ.get("TRIAGE_FUZZ_EXAMPLES", "150")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _diagnose(*paths: Path, extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    args = ["diagnose", *[a for p in paths for a in ("--from", str(p))], "--format", "json", *extra]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    return res.exit_code, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else {"output": res.output})


def test_the_fixtures_are_current():
    for name, text in tickets().items():
        assert (FIXTURES / name).read_text(encoding="utf-8") == text, f"{name} is stale: run python -m tests.tickets"


def test_an_issue_body_names_every_planted_cause_and_lists_its_blocks():
    code, report = _diagnose(FIXTURES / "planted_issue.md")
    assert code == 0
    found = {f["code"]: f for f in report["findings"]}
    # a throttled GPU, a degraded PCIe link, KV saturation, NUMA misalignment and an outdated engine
    for planted in ("GPU002", "GPU004", "KV001", "CPU001", "ENG005"):
        assert planted in found and found[planted]["severity"] in ("critical", "high", "medium"), planted
    assert found["GPU004"]["evidence"]["gpu.gpus[1].pcie_link_width_current"] == 8
    assert found["CPU001"]["evidence"]["server_process.affinity_numa_nodes"] == [0]
    items = next(p for p in report["probes"] if p["name"] == "artifacts")["data"]["items"]
    assert [i["kind"] for i in items] == ["collect-env", "command", "log", "metrics", "nvidia-smi-q"]
    assert all(i["supplied"] for i in items) and items[0]["source"].startswith("planted_issue.md block 1 (lines ")
    assert report["host"]["hostname"].startswith("unknown")          # nothing of this host


def test_the_same_body_without_the_problems_gives_nothing_above_low():
    code, report = _diagnose(FIXTURES / "healthy_issue.md")
    assert code == 0 and report["findings"]
    assert {f["severity"] for f in report["findings"]} <= {"low", "info"}, [
        (f["code"], f["severity"]) for f in report["findings"]]


def test_one_scrape_says_so_in_the_certainty_and_two_scrapes_give_rates():
    _, one = _diagnose(FIXTURES / "kv_saturated_metrics.txt")
    kv002 = next(f for f in one["findings"] if f["code"] == "KV002")
    assert kv002["certainty"] == "likely" and "one /metrics scrape" in kv002["message"]
    before = vllm_v0_metrics(0.99, 23, 48, 312, (0.8, 1.9))
    after = vllm_v0_metrics(0.99, 20, 48, 372, (0.8, 1.9, 3.0))
    data, how = metrics_dump.read_dumps([("a", before), ("b", after)], 30.0)
    assert data.num_preemptions_delta == 60 and data.preemptions_per_s == pytest.approx(2.0) and "30 s" in how
    data, how = metrics_dump.read_dumps([("a", before), ("b", after)])
    assert data.preemptions_per_s is None and "no time between them" in how
    stamped = [(n, "\n".join(ln + f" {ms}" if ln and not ln.startswith("#") else ln for ln in t.splitlines()))
               for (n, t), ms in ((("a", before), 1700000000000), (("b", after), 1700000015000))]
    data, how = metrics_dump.read_dumps(stamped)
    assert data.window_s == pytest.approx(15.0) and "timestamps" in how


def test_nvidia_smi_text_and_xml_read_the_same_fields():
    text = nvidia_smi.read_q(nvidia_smi.parse_q_text(nvidia_smi_q(PLANTED_GPUS)))
    xml = nvidia_smi.read_q(nvidia_smi.parse_q_xml(nvidia_smi_xml(PLANTED_GPUS)))
    keys = ("index", "name", "pcie_link_gen_current", "pcie_link_gen_max", "pcie_link_width_current",
            "pcie_link_width_max", "clock_event_reasons", "utilization_gpu_pct", "sm_clock_mhz", "sm_clock_max_mhz",
            "temperature_c", "memory_total_bytes", "memory_used_bytes", "power_usage_w", "persistence_mode_enabled")
    for a, b in zip(text["gpus"], xml["gpus"], strict=True):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    g0 = text["gpus"][0]
    assert g0["clock_event_reasons"] == ("sw_thermal_slowdown",) and g0["temperature_c"] == 81
    assert g0["compute_processes"][0]["pid"] == 4242 and text["driver_version"] == "580.95.05"
    assert g0["ecc_uncorrected_volatile"] == 0 and g0["remapped_rows_pending"] is False


def test_the_nvidia_smi_table_gives_what_it_shows():
    table = nvidia_smi.read_table((FIXTURES / "shared_nvidia_smi.txt").read_text())
    (g,) = table["gpus"]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["utilization_gpu_pct"] == 97
    assert [p["name"] for p in g["compute_processes"]] == ["python3", "jupyter-lab"]
    assert "sm_clock_mhz" not in g and "pcie_link_gen_current" not in g


def test_collect_env_gives_versions_topology_numa_and_the_environment():
    env = collect_env_reader.read(collect_env(Host(vllm="0.7.3", gpus=tuple(PLANTED_GPUS))))
    assert env["engine_version"] == "0.7.3" and env["torch_version"] == "2.5.1+cu124"
    assert [(g["index"], g["name"], g["numa_node"]) for g in env["gpu"]["gpus"]] == [
        (0, "NVIDIA H100 80GB HBM3", 1), (1, "NVIDIA H100 80GB HBM3", 1)]
    assert env["gpu"]["topology"] == [{"gpu_a": 0, "gpu_b": 1, "nvlink": True, "common_ancestor": None}]
    assert [n["node"] for n in env["cpu"]["numa_nodes"]] == [0, 1] and env["cpu"]["num_logical_cpus"] == 224
    assert env["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}          # what the rules read, from DEBUG_ENV


@pytest.mark.parametrize("text, engine, argv0", [
    ("numactl -N 1 -m 1 vllm serve m --max-num-seqs 64", "vllm", "vllm"),
    ("$ docker run --gpus all -e HF_TOKEN=hf_secret123 vllm/vllm-openai:v0.8.5 --model m -tp 2", "vllm", "vllm"),
    ("docker run ghcr.io/huggingface/text-generation-inference:3.3.6 --model-id m", "tgi", "text-generation-launcher"),
    ("containers:\n- image: lmsysorg/sglang:latest\n  command: [python3, -m, sglang.launch_server]\n"
     "  args: [--model-path, m, --tp, '2']", "sglang", "python3"),
    ("python -m sglang.launch_server --model-path m \\\n  --mem-fraction-static 0.85", "sglang", "python"),
])
def test_launch_commands_in_their_forms(text, engine, argv0):
    cmd = find_command(text)
    assert cmd is not None and cmd.engine.name == engine and cmd.argv[0] == argv0
    assert "hf_secret123" not in json.dumps(cmd.env)
    assert find_command("the server is slow, any idea?") is None


def test_a_markdown_body_splits_into_fences_details_and_inline_commands():
    body = ("Hi, slow server.\n\n<details><summary>smi</summary>\n\n" + nvidia_smi_table(HEALTHY_GPUS)
            + "\n</details>\n\nI run `vllm serve m --max-num-seqs 8` and\n\n```\nsome words that are nothing\n```\n")
    parts = blocks.split(body)
    assert [classify(b.text) for b in parts] == ["nvidia-smi", "command", "log"]


def test_an_unreadable_block_is_listed_with_its_first_line(tmp_path):
    body = tmp_path / "issue.md"
    body.write_text("```\nINFO 01-04 04:40:02 api_server.py:712] vLLM API server version 0.7.3\n```\n\n"
                    "```\n# HELP x\n# TYPE x gauge\nx 1\n```\n")
    snapshot = read_ticket([body])
    items = snapshot.payload(ArtifactsData).items
    assert [(i.kind, i.note is not None) for i in items] == [("log", False), ("unread", True)]
    assert "no metric name of an engine" in items[1].note


def test_a_folder_is_read_as_one_deployment_and_secrets_stay_out(tmp_path):
    for name in ("throttled_nvidia_smi_q.xml", "collect_env_0.7.3.txt", "kv_saturated_metrics.txt", "launch_command.sh"):
        (tmp_path / name).write_text((FIXTURES / name).read_text())
    code, report = _diagnose(tmp_path)
    assert code == 0 and {"GPU002", "GPU004", "KV001", "CPU001", "ENG005"} <= {f["code"] for f in report["findings"]}
    assert "sk-live-abcdef123456" not in json.dumps(report)


def test_a_ticket_with_nothing_readable_is_one_line_and_exit_2(tmp_path):
    junk = tmp_path / "notes.md"
    junk.write_text("```\n\n```\n")
    res = CliRunner().invoke(app, ["diagnose", "--from", str(junk)])
    assert res.exit_code == 2 and "nothing in it" in res.output and "Traceback" not in res.output


_pieces = st.sampled_from([nvidia_smi_q(PLANTED_GPUS), nvidia_smi_xml(PLANTED_GPUS), nvidia_smi_table(HEALTHY_GPUS),
                           collect_env(Host(gpus=tuple(PLANTED_GPUS))), vllm_v0_metrics(0.5, 1, 2, 3, (0.1,)),
                           (FIXTURES / "launch_command.sh").read_text(), (FIXTURES / "planted_issue.md").read_text()])


@FAST
@given(_pieces, st.integers(min_value=0, max_value=20000), st.integers(min_value=0, max_value=400),
       st.text(max_size=40))
def test_every_reader_is_total_on_cut_and_spliced_text(piece, at, cut, junk):
    """A piece cut short, or with junk spliced in, is read or refused with a ReportError, never a traceback."""
    text = piece[:at] + junk + piece[at + cut:]
    kind = classify(text)
    try:
        if kind == "nvidia-smi-q":
            nvidia_smi.read_q(nvidia_smi.parse_q_text(text))
        elif kind == "nvidia-smi-xml":
            nvidia_smi.read_q(nvidia_smi.parse_q_xml(text))
        elif kind == "nvidia-smi":
            nvidia_smi.read_table(text)
        elif kind == "collect-env":
            collect_env_reader.read(text)
        elif kind == "metrics":
            metrics_dump.read_dumps([("dump", text)])
        elif kind == "command":
            assert find_command(text) is not None
        blocks.split(text)
    except ReportError:
        pass


def test_redact_hosts_replaces_host_names_and_addresses_consistently(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text("gpu-node-17:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.12.0.7<0>\n"
                   "gpu-node-17:4242:4250 [0] NCCL WARN NET/Socket : peer 10.12.0.8 closed the connection\n")
    cmd = tmp_path / "cmd.sh"
    cmd.write_text("vllm serve m --host 10.12.0.7 --port 8000\n")
    _, report = _diagnose(log, cmd, extra=("--redact-hosts",))
    text = json.dumps(report)
    assert "gpu-node-17" not in text and "10.12.0.7" not in text and "10.12.0.8" not in text
    assert "host-1" in text
    _, plain = _diagnose(log)
    assert "gpu-node-17" in json.dumps(plain)        # without the flag, the log is kept as it was


@FAST
@given(st.lists(st.sampled_from(["```", "~~~", "<details>", "</details>", "<summary>x</summary>", "    indented",
                                 "`vllm serve m`", "# TYPE vllm:num_requests_waiting gauge", "NVIDIA-SMI", "|",
                                 "vllm:num_requests_waiting 3", "GPU 0: NVIDIA H100", "text"]) | st.text(max_size=30),
                max_size=30))
def test_a_ticket_of_any_lines_is_read_or_refused_in_one_line(parts):
    """Any mix of Markdown, artifact fragments and junk: a snapshot, or a ReportError (exit 2), never a traceback."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "issue.md"
        path.write_text("\n".join(parts), encoding="utf-8")
        try:
            snapshot = read_ticket([path])
        except ReportError:
            return
        assert snapshot.payload(ArtifactsData).items


def test_an_sglang_ticket_is_read_with_sglangs_own_names(tmp_path):
    """SGLang's bug template (Describe the bug / Reproduction / Environment): its launch command, a /metrics dump
    under its own names (sglang:token_usage, sglang:num_queue_reqs) and the nvidia-smi table."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    reg = CollectorRegistry()
    for name, value in (("sglang:token_usage", 0.97), ("sglang:num_queue_reqs", 14), ("sglang:num_running_reqs", 40)):
        Gauge(name, name, ["model_name"], registry=reg).labels("Qwen/Qwen2.5-72B-Instruct").set(value)
    body = tmp_path / "sglang_issue.md"
    body.write_text("\n".join([
        "### Describe the bug", "", "Requests queue for seconds.", "", "### Reproduction", "", "```",
        "python -m sglang.launch_server --model-path Qwen/Qwen2.5-72B-Instruct --tp 2 --mem-fraction-static 0.8",
        "```", "", "```", generate_latest(reg).decode().rstrip(), "```", "", "### Environment", "", "```",
        nvidia_smi_table(HEALTHY_GPUS), "```", ""]))
    code, report = _diagnose(body)
    assert code == 0
    items = next(p for p in report["probes"] if p["name"] == "artifacts")["data"]["items"]
    assert [i["kind"] for i in items] == ["command", "metrics", "nvidia-smi"]
    config = next(p for p in report["probes"] if p["name"] == "server_config")["data"]
    assert config["engine"] == "sglang" and config["tensor_parallel_size"] == 2
    kv001 = next(f for f in report["findings"] if f["code"] == "KV001")
    assert kv001["evidence"]["server_metrics.kv_cache_usage_frac_max"] == pytest.approx(0.97)
    assert "--mem-fraction-static" in json.dumps(kv001["fix"])          # SGLang's own knob, not vLLM's


def test_a_llamacpp_command_gives_its_slots(tmp_path):
    """llama-server's `-np 1`: the engine's own reading of its command line (engine_identity.batching), so ENG001
    names the one slot; with no symptom in the ticket it stays LOW."""
    body = tmp_path / "issue.md"
    body.write_text("Slow with 8 users:\n\n```\n./llama-server -m /models/q.gguf -ngl 99 -np 1 -c 16384 --port 8080\n```\n")
    code, report = _diagnose(body)
    identity = next(p for p in report["probes"] if p["name"] == "engine_identity")["data"]
    assert identity["engine"] == "llama.cpp" and identity["batching"]["slots"] == 1
    eng001 = next(f for f in report["findings"] if f["code"] == "ENG001")
    assert code == 0 and eng001["severity"] == "low"
