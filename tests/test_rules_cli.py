"""`triage rules list|explain` through typer's CliRunner, fixed width, no colour."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from triage.cli import app
from triage.rules import REGISTRY

ENV = {"COLUMNS": "100", "NO_COLOR": "1"}


def run(*args: str):
    return CliRunner().invoke(app, list(args), env=ENV)


def test_list_json_has_every_rule():
    result = run("rules", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["code"] for r in rows] == REGISTRY.codes()
    kv = next(r for r in rows if r["code"] == "KV001")
    assert kv["name"] == "kv-cache-saturated" and kv["severity"] == "high" and kv["enabled"] is True
    assert kv["thresholds"]["KV001.kv_usage_frac"]["value"] == 0.9


def test_list_table_shows_codes_and_disabled_state(tmp_path):
    cfg = tmp_path / "triage.toml"
    cfg.write_text('[rules]\ndisable = ["GPU007"]\n')
    result = run("rules", "list", "--config", str(cfg), "--disable", "cpu002")
    assert result.exit_code == 0, result.output
    lines = {line.split()[1]: line for line in result.stdout.splitlines()
             if line.startswith("│ ") and line.split()[1] != "│"}
    assert "no" in lines["GPU007"].split("│")[4] and "no" in lines["CPU002"].split("│")[4]
    assert "yes" in lines["KV001"].split("│")[4]
    assert len(lines) == len(REGISTRY)


def test_explain_prints_the_doc_sections_and_thresholds(tmp_path):
    cfg = tmp_path / "triage.toml"
    cfg.write_text("[thresholds]\nKV001.kv_usage_frac = 0.95\n")
    result = run("rules", "explain", "KV001", "--config", str(cfg))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("# KV001 (kv-cache-saturated)")
    for title in ("What it checks", "Why it slows inference", "Example evidence", "Fix", "References", "Thresholds"):
        assert f"## {title}" in out
    assert "KV001.kv_usage_frac = 0.95 fraction (default 0.9" in out


def test_explain_accepts_a_name():
    result = run("rules", "explain", "pcie-link-degraded")
    assert result.exit_code == 0 and result.stdout.startswith("# GPU004 (pcie-link-degraded)")


def test_explain_unknown_code_exits_2_with_close_matches():
    result = run("rules", "explain", "KV01")
    assert result.exit_code == 2
    assert "unknown rule code 'KV01'" in result.stderr
    assert "KV001 (kv-cache-saturated)" in result.stderr
    assert "Traceback" not in result.output


def test_bad_config_exits_2():
    result = run("rules", "list", "--disable", "NOPE001")
    assert result.exit_code == 2
    assert "unknown rule code 'NOPE001'" in result.stderr


def test_list_disable_takes_commas_like_diagnose():
    result = run("rules", "list", "--json", "--disable", "GPU007,cpu002", "--disable", "KV001")
    assert result.exit_code == 0, result.output
    off = {r["code"] for r in json.loads(result.stdout) if not r["enabled"]}
    assert off == {"GPU007", "CPU002", "KV001"}
