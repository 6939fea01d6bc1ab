"""`triage diagnose`'s text view at 100 columns: the verdict first, then the findings, then what was looked at;
wrapped lines hang under the text they continue; evidence values read by their meaning; skipped rules say
which option would let them run; a single server gets no advice to name other instances."""
from __future__ import annotations

import dataclasses
import io
import json
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.golden.scenarios import SCENARIOS, build
from triage import render
from triage.cli import app
from triage.core.convert import to_dict
from triage.core.report import Certainty, Finding, Fix, Report, Severity, SkippedRule
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.formats import Output, write

WIDTH = 100
SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW", "INFO")
PEERS_ADVICE = "give --url again"


def _text(report: Report, monkeypatch, verbose: bool = False) -> str:
    """The report as `--format text` writes it on a 100-column terminal (COLUMNS=100)."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    buf = io.StringIO()
    screen = Console(file=buf, no_color=True, force_terminal=False, highlight=False, soft_wrap=False)
    assert screen.width == WIDTH
    detail = render.ViewOptions(verbose=True) if verbose else None
    write("text", Output(report, screen, detail))
    return buf.getvalue()


def _single_server(report: Report) -> Report:
    """The report of a healthy single server: its peers probe had nothing to do (one --url)."""
    peers = ProbeResult("server_peers", ProbeStatus.UNSUPPORTED, 0.0,
                        "one --url: give --url again for the deployment's other instances")
    return dataclasses.replace(report, probes=(*report.probes, peers))


def _finding(evidence: dict, message: str) -> Finding:
    return Finding(code="KV001", name="kv-cache-saturated", severity=Severity.HIGH, certainty=Certainty.CONFIRMED,
                   title="The KV cache is full and requests are queueing", message=message, evidence=evidence,
                   fix=Fix("Give the KV cache more room."))


def test_the_verdict_comes_first_then_the_findings_then_the_probes(monkeypatch):
    report = build("kv_saturated_vllm")
    text = _text(report, monkeypatch)
    lines = [line for line in text.splitlines() if line.strip()]
    verdict = next(i for i, line in enumerate(lines) if "problems found" in line)
    first_finding = next(i for i, line in enumerate(lines) if line.startswith(SEVERITIES))
    assert lines[verdict].startswith("7 problems found, most severe HIGH: KV002")
    assert verdict == 2 < first_finding                                  # right under the header's two lines
    assert "What triage looked at" not in text                           # the probe table waits for --verbose
    assert lines[-1].startswith("looked at: ") or lines[-2].startswith("looked at: ")
    assert text.index("looked at: ") > text.index("KV004")               # after the last finding
    verbose = _text(report, monkeypatch, verbose=True)
    assert verbose.index("7 problems found") < verbose.index("HIGH KV002") < verbose.index("What triage looked at")
    assert "looked at: " not in verbose


def test_markdown_puts_the_verdict_before_the_findings_and_the_tables():
    md = render.markdown(build("kv_saturated_vllm"))
    assert md.index("7 problems found, most severe HIGH") < md.index("### Findings") < md.index("### Load levels")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_line_is_wider_than_the_terminal_and_wrapped_lines_hang(name, monkeypatch):
    text = _text(build(name), monkeypatch)
    assert max(len(line) for line in text.splitlines() if not line.startswith("    $ ")) <= WIDTH  # a command stays whole
    # Every line of a finding block is its heading or indented under it: nothing wraps back to column 0.
    findings = text[text.index("problems found"):text.index("Load levels")].splitlines()[1:]
    loose = [line for line in findings if line.strip() and not line.startswith(("  ", *SEVERITIES, "Opportunities"))]
    assert not loose, loose
    fix_lines = text[text.index("  fix: "):].splitlines()
    assert fix_lines[1].startswith(" " * 7)                                # the fix text continues under itself
    ends = text[text.index("rules skipped"):].splitlines()
    assert ends[1].startswith("  ")


def test_evidence_shows_counts_as_integers_and_shares_as_percentages(monkeypatch):
    finding = _finding({"server_metrics.num_preemptions_delta": 11.0, "bench.c16.server.kv_cache_usage_frac_max": 0.93,
                        "gpu.gpus.0.utilization_gpu_pct": 24.0, "server_metrics.preemptions_per_s": 7.4},
                       "KV cache usage reached 93% with requests waiting.")
    report = dataclasses.replace(build("kv_saturated_vllm"), findings=(finding,))
    text = _text(report, monkeypatch)
    assert "server_metrics.num_preemptions_delta = 11\n" in text
    assert "bench.c16.server.kv_cache_usage_frac_max = 93%\n" in text  # as the message says it: reached 93%
    assert "gpu.gpus.0.utilization_gpu_pct = 24%\n" in text
    assert "server_metrics.preemptions_per_s = 7.4\n" in text
    assert "11.00" not in text and "= 0.93" not in text
    golden = _text(build("kv_saturated_vllm"), monkeypatch)
    assert "input_tokens_mean+output_tokens_mean = 4,096\n" in golden and "4,096.00" not in golden


def test_the_evidence_formatter_reads_the_key():
    from triage.render.fmt import evidence_value

    assert evidence_value("a.kv_cache_usage_frac", 0.5) == "50%"
    assert evidence_value("a.prefix_hit_fraction", 0.004) == "0.4%"
    assert evidence_value("a.queue_share", 1.0) == "100%"
    assert evidence_value("a.slo_attainment_pct", 87.5) == "88%"
    assert evidence_value("a.num_requests_waiting", 3.0) == "3"
    assert evidence_value("a.max_model_len", 32768) == "32,768"
    assert evidence_value("a.mean_s", 0.9) == "0.9"
    assert evidence_value("a.gpu_memory_utilization", 0.8) == "0.8"   # a flag's value, as the fix writes it
    assert evidence_value("a.flag", True) == "yes" and evidence_value("a.x", None) == "n/a"


def test_the_html_report_formats_evidence_the_same_way():
    from triage.render.html_bench import findings

    finding = _finding({"bench.c64.server.kv_cache_usage_frac_max": 0.98, "bench.c64.num_waiting": 11.0}, "m")
    page = findings(dataclasses.replace(build("kv_saturated_vllm"), findings=(finding,)))
    assert "<td>98%</td>" in page and "<td>11</td>" in page


def test_skipped_rules_name_the_option_that_would_run_them(monkeypatch):
    text = _text(build("kv_saturated_vllm"), monkeypatch)
    hint = " ".join(text[text.index("21 rules skipped: "):].split())
    for option in ("(--active)", "(--baseline FILE)", "(--prometheus URL)"):
        assert option in hint
    report = dataclasses.replace(build("kv_saturated_vllm"), skipped_rules=(
        SkippedRule("BENCH001", "needs bench: no bench report"), SkippedRule("BENCH002", "needs bench: no bench report"),
        SkippedRule("CPU004", "needs logs: probe logs did not run")))
    hint = " ".join(_text(report, monkeypatch).split())
    assert "3 rules skipped: 2 rules need a bench report (--bench FILE), 1 needs the server's log (--log FILE)" in hint


def test_a_single_server_gets_no_advice_to_name_other_instances(monkeypatch):
    report = _single_server(build("kv_saturated_vllm"))
    text = _text(report, monkeypatch)
    assert PEERS_ADVICE not in text
    looked_at = " ".join(text[text.index("looked at: "):].split())
    assert "server ok" in looked_at and "server_peers" not in looked_at
    verbose = _text(report, monkeypatch, verbose=True)
    assert PEERS_ADVICE not in verbose
    assert re.search(r"server_peers\s+│ n/a", verbose)
    assert PEERS_ADVICE not in render.markdown(report)


def test_the_command_prints_the_probe_table_only_with_verbose(tmp_path):
    snap, _, _ = SCENARIOS["kv_saturated_vllm"]()
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"probes": [to_dict(p) for p in snap.probes]}))
    runner = CliRunner()
    short = runner.invoke(app, ["--no-color", "diagnose", "--from", str(path)], env={"COLUMNS": str(WIDTH)})
    assert short.exit_code == 0, short.output
    assert "What triage looked at" not in short.output and "By layer:" not in short.output
    assert "looked at: " in short.output
    assert max(len(line) for line in short.output.splitlines() if not line.startswith("    $ ")) <= WIDTH
    long = runner.invoke(app, ["--no-color", "diagnose", "--from", str(path), "-v"], env={"COLUMNS": str(WIDTH)})
    assert long.exit_code == 0, long.output
    assert "What triage looked at" in long.output and "By layer:" in long.output
    assert long.output.index("problems found") < long.output.index("What triage looked at")
