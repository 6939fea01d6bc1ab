"""`triage plan` through the CLI: exit codes, the report JSON against the schema, the human view."""
import json

import pytest
from typer.testing import CliRunner

from tests.conftest import REPO
from tests.factories import HOST
from triage.cli import app
from triage.core.report import Report, ReportKind
from triage.core.report_io import read_report, write_report
from triage.core.snapshot import ProbeResult, ProbeStatus


@pytest.fixture
def runner():
    return CliRunner(env={"NO_COLOR": "1", "COLUMNS": "160"})


def test_plan_json_validates_and_carries_the_results(runner, report_validator, tmp_path):
    out = tmp_path / "plan.json"
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--dtype", "fp8",
                                 "--qps", "10", "--price-per-gpu-hour", "2.4", "--api-price-per-mtok", "2",
                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = report_validator(json.loads(out.read_text()))
    assert data["kind"] == "plan"
    assert data["target"]["model"] == "meta-llama/Llama-3.1-70B-Instruct"
    plan = data["plan"]
    assert plan["recommended_tp"] == 2
    assert plan["fleet"]["num_gpus"] == plan["fleet"]["num_replicas"] * 2
    assert plan["cost"]["api_price_per_mtok"] == 2.0
    assert "--quantization fp8" in plan["vllm_command"]
    # The human view shows the tables and where the report went.
    assert "Tensor-parallel options" in result.stdout and "vllm serve" in result.stdout
    assert f"report written to {out}" in result.stdout
    assert read_report(out).plan["memory"]["tp"] == 2


def test_plan_format_json_on_stdout(runner, report_validator):
    result = runner.invoke(app, ["plan", "--model", "qwen3-0.6b", "--gpu", "l4", "--format", "json"])
    assert result.exit_code == 0
    data = report_validator(json.loads(result.stdout))
    assert data["plan"]["model"]["num_params"] == 596_049_920


def test_plan_markdown(runner):
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--format", "markdown"])
    assert result.exit_code == 0
    assert "### Memory per GPU: TP 1 on NVIDIA A100 SXM4 80GB" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "llama-3.1-8b", "--gpu", "tpu-v5"], "unknown GPU 'tpu-v5'; choose one of h100-sxm"),
    (["--model", "nope", "--gpu", "h100"], "unknown model 'nope'"),
    (["--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "fp4"], "unknown --dtype 'fp4'"),
    (["--model", "llama-3.1-8b"], "no GPU given"),
    (["--model", "llama-3.1-8b", "--gpu", "h100", "--from-diagnose", "/nonexistent/d.json"], "no such file"),
])
def test_bad_input_exits_2_with_one_line_and_no_traceback(runner, args, message):
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_config_missing_fields_exits_2(runner, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    result = runner.invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "h100"])
    assert result.exit_code == 2
    assert "missing num_layers" in result.stderr


def test_help_lists_gpus_and_presets(runner):
    result = runner.invoke(app, ["plan", "--help"])
    assert result.exit_code == 0
    assert "rtx-5090" in result.stdout and "deepseek-v3" in result.stdout


def test_from_diagnose_through_the_cli(runner, report_validator, tmp_path):
    diag = Report(
        kind=ReportKind.DIAGNOSE, triage_version="0.1.0", created_at="2026-11-21T12:00:00Z",
        command=("triage", "diagnose"), host=HOST,
        probes=(ProbeResult("gpu", ProbeStatus.OK, 0.2, None, {"gpus": [
                    {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_total_bytes": 40 * 2**30}]}),
                ProbeResult("server_config", ProbeStatus.OK, 0.1, None, {
                    "model": "Qwen/Qwen3-8B", "max_model_len": 16384, "dtype": "bfloat16",
                    "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9})))
    path = write_report(diag, tmp_path / "diag.json")
    result = runner.invoke(app, ["plan", "--from-diagnose", str(path), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    plan = report_validator(json.loads(result.stdout))["plan"]
    assert plan["gpu"]["key"] == "a100-40gb" and plan["inputs"]["model"] == "qwen3-8b"
    assert plan["memory"]["max_model_len"] == 16384
    assert "--max-model-len 16384" in plan["vllm_command"]


def test_checked_in_example_is_a_valid_plan_report(report_validator):
    data = report_validator(json.loads((REPO / "reports" / "examples" / "plan.json").read_text()))
    assert data["kind"] == "plan" and data["plan"]["tables"]


@pytest.mark.parametrize("command", [["plan", "--model", "qwen3-0.6b", "--gpu", "l4"], ["bench"], ["baseline"]])
def test_a_bad_format_is_refused_before_any_work(runner, command):
    result = runner.invoke(app, [*command, "--format", "xml"])
    assert result.exit_code == 2
    assert "'xml' is not one of text, json, markdown" in result.output


def test_compare_still_takes_junit_and_refuses_xml(runner, tmp_path):
    result = runner.invoke(app, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "xml"])
    assert result.exit_code == 2
    assert "'xml' is not one of text, markdown, json, junit" in result.output
