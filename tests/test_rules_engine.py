"""evaluate(): ranking, causal chains, skipping, config, version awareness, schema validity."""
from __future__ import annotations

import json

import pytest

from tests.factories import HOST, fix_lines, offers
from tests.rule_cases._build import bench, cfg, cpu, gpu0, level, levels, metrics, process, snapshot
from tests.rules_fixtures import FIXTURES, load_case
from triage.core.errors import UsageError
from triage.core.probe_data import ServerConfigData
from triage.core.report import Report, ReportKind, Severity
from triage.core.report_io import from_dict
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot
from triage.rules import REGISTRY, RulesConfig, bench_rule_codes, evaluate, load_rules_config
from triage.rules.engine_info import EngineInfo, engine_flags, parse_version


def test_healthy_host_gives_nothing_above_low():
    result = evaluate(snapshot(), bench=bench())
    loud = [(f.code, f.severity.value, f.message) for f in result.findings if f.severity.rank < Severity.LOW.rank]
    assert not loud
    assert not any("internal error" in s.reason for s in result.skipped)
    # Everything is measured except an earlier report, the weight bytes, spec decoding, a context sweep,
    # long prompts (the bench used 512-token prompts), the `diagnose --active` measurements and the idle
    # connect time (a bench report from before connections were measured), a Prometheus history, a
    # bench over several replicas, and a deployment topology (one instance: no ranks, no connector, no peers).
    assert {s.code for s in result.skipped} == {"ENG002", "ENG003", "ENG006", "SCHED006", "SCHED001",
                                                "GPU014", "GPU015", "MEM003", "NET004", "HIST001", "FLEET001",
                                                "ENG008", "NET005", "ENG009", "ENG011", "NET006",   # the healthy log shows no server start
                                                "ENG012",                      # nor layers offloaded (a vLLM log)
                                                "TOPO001", "TOPO002", "TOPO003", "TOPO004", "TOPO005"}


def test_healthy_snapshot_without_bench_skips_bench_rules_with_reasons():
    result = evaluate(snapshot())
    skipped = {s.code: s.reason for s in result.skipped}
    for code in ("SCHED004", "BENCH001", "BENCH002", "BENCH003", "ENG002", "KV003"):
        assert "bench" in skipped[code]
    assert not [f for f in result.findings if f.severity.rank < Severity.LOW.rank]


def test_empty_snapshot_skips_everything_and_never_passes():
    result = evaluate(Snapshot())
    assert result.findings == ()
    assert len(result.skipped) == len(REGISTRY)


def test_unsupported_probe_reason_reaches_the_skip():
    snap = Snapshot(probes=(ProbeResult("gpu", ProbeStatus.UNSUPPORTED, 0.0, "libnvidia-ml.so.1 not found"),))
    skipped = {s.code: s.reason for s in evaluate(snap).skipped}
    assert skipped["GPU003"] == "needs gpu: probe gpu is unsupported: libnvidia-ml.so.1 not found"
    assert "no bench report" in skipped["GPU002"]  # gpu|bench: both alternatives named


def test_ranking_by_severity_then_certainty_then_impact():
    snap = snapshot(gpu0(ecc_uncorrected_volatile=2, persistence_mode_enabled=False),
                    metrics(kv_cache_usage_frac_max=0.99, num_requests_waiting=9),
                    process(debug_env={"CUDA_LAUNCH_BLOCKING": "1"}),
                    cpu(governor="powersave", governors={"powersave": 112}), cfg(quantization=None))
    findings = evaluate(snap).findings
    codes = [f.code for f in findings]
    assert codes[0] == "GPU005" and codes[-1] == "GPU007"
    keys = [(f.severity.rank, f.certainty.rank) for f in findings]
    assert keys == sorted(keys)
    # Two HIGH/CONFIRMED findings: the bigger estimated impact (KV001 0.8 vs GPU011 0.7) comes first.
    assert codes.index("KV001") < codes.index("GPU011")


def test_kv_saturation_explains_queueing_and_slo():
    b = bench(level(3, "server", kv_cache_usage_frac_max=0.99, num_requests_waiting_max=40,
                    server_queue_time_ms_mean=900.0, server_ttft_ms_mean=1100.0),
              level(3, "ttft_ms", p99=2500.0))
    result = evaluate(snapshot(), bench=b)
    by_code = {f.code: f for f in result.findings}
    assert {"KV001", "SCHED003", "BENCH003"} <= set(by_code)
    assert by_code["KV001"].explains == ("SCHED003", "BENCH003")
    assert "explains SCHED003, BENCH003" in by_code["KV001"].message
    assert by_code["SCHED003"].explains == ("BENCH003",)
    assert by_code["BENCH003"].explains == ()


def test_small_kv_cache_below_90pct_explains_queueing_not_seq_cap():
    """The real undersized run: 40 blocks x 16 = 640 tokens at 62-77% usage, 15 waiting, one running.
    KV001 fires on the free room, SCHED002 stays quiet (one running of 256), and KV001 explains SCHED003."""
    load = bench(level(2, input_tokens_mean=400.0, output_tokens_mean=64.0),
                 level(2, "server", kv_cache_usage_frac_max=0.66, kv_cache_usage_frac_mean=0.62,
                       num_requests_waiting_max=15, num_requests_waiting_mean=12.5, num_requests_running_max=1,
                       num_requests_running_mean=1.0, server_queue_time_ms_mean=1660.0,
                       server_ttft_ms_mean=1670.0))
    snap = snapshot(metrics("cache_config", num_gpu_blocks=40), drop=("logs",))
    by_code = {f.code: f for f in evaluate(snap, bench=load).findings}
    assert {"KV001", "SCHED003"} <= set(by_code) and "SCHED002" not in by_code
    kv = by_code["KV001"]
    assert kv.certainty.value == "confirmed"   # at the mean (62%) 243 free tokens cannot hold a 400-token prompt
    assert kv.evidence["derived.bench.c16.kv_free_tokens"] == round(0.34 * 640, 1)
    assert kv.evidence["server_metrics.cache_config.num_gpu_blocks*block_size"] == 640.0
    assert kv.evidence["bench.c16.input_tokens_mean+output_tokens_mean"] == 464.0
    assert "SCHED003" in kv.explains and "This likely explains SCHED003" in kv.message
    assert offers(kv.fix, "--gpu-memory-utilization 0.92")   # 0.9 in the snapshot: the share sizes the cache
    # With the block count pinned by hand, the memory share changes nothing: the fix says to lift the pin.
    pinned = snapshot(metrics("cache_config", num_gpu_blocks=40, num_gpu_blocks_override=40), drop=("logs",))
    kv = {f.code: f for f in evaluate(pinned, bench=load).findings}["KV001"]
    assert "pins the cache at 40 blocks" in kv.fix.text
    assert not any("gpu-memory-utilization" in c for c in fix_lines(kv.fix))
    assert kv.evidence["server_metrics.cache_config.num_gpu_blocks_override"] == 40
    # The same load on a cache ten times larger leaves room for the next request: no KV001.
    roomy = snapshot(metrics("cache_config", num_gpu_blocks=400), drop=("logs",))
    assert "KV001" not in evaluate(roomy, bench=load).codes()


def test_free_room_trigger_reads_the_snapshot_metrics_with_a_bench():
    """diagnose on a loaded server: the scrape's usage and queue, and the bench's smallest typical request."""
    snap = snapshot(metrics("cache_config", num_gpu_blocks=40),
                    metrics(kv_cache_usage_frac=0.7, kv_cache_usage_frac_max=0.75, num_requests_waiting=6,
                            num_requests_waiting_max=8), drop=("logs",))
    small = bench(levels(input_tokens_mean=400.0, output_tokens_mean=64.0))
    kv = {f.code: f for f in evaluate(snap, bench=small).findings}["KV001"]
    assert kv.certainty.value == "confirmed"
    assert kv.evidence["derived.server_metrics.kv_free_tokens"] == 160.0
    assert kv.evidence["derived.server_metrics.kv_free_tokens_typical"] == 192.0
    assert kv.evidence["server_metrics.num_requests_waiting_max"] == 8
    # Without a bench the request size is unknown: only the >= 90% trigger can judge, and 75% is below it.
    assert "KV001" not in evaluate(snap).codes()


def test_disable_and_enable_only():
    snap = snapshot(gpu0(persistence_mode_enabled=False))
    assert "GPU007" in [f.code for f in evaluate(snap).findings]
    off = evaluate(snap, config=RulesConfig().with_disabled(["gpu007"]))
    assert "GPU007" not in [f.code for f in off.findings] + [s.code for s in off.skipped]
    only = evaluate(snap, config=RulesConfig(enabled_only=frozenset({"GPU007"})))
    assert [f.code for f in only.findings] == ["GPU007"] and only.skipped == ()


def test_unknown_disabled_code_is_a_usage_error_with_close_matches():
    with pytest.raises(UsageError, match=r"unknown rule code 'KV01'.*did you mean KV001"):
        evaluate(Snapshot(), config=RulesConfig(disabled=frozenset({"KV01"})))


def test_malformed_probe_data_is_skipped_not_raised():
    bad = {"probes": [{"name": "gpu", "status": "ok", "duration_s": 0.1, "reason": None,
                       "data": {"gpus": [{"index": 0, "power_limit_enforced_w": "300W", "power_limit_default_w": 700}]}}]}
    skipped = {s.code: s.reason for s in evaluate(Snapshot(probes=tuple(from_dict(ProbeResult, p)
                                                                         for p in bad["probes"]))).skipped}
    assert "internal error" in skipped["GPU003"] and "TypeError" in skipped["GPU003"]


def test_threshold_override_changes_the_verdict():
    snap, b, base, config, _ = load_case(FIXTURES / "KV001" / "positive_saturated_with_queue.json")
    assert evaluate(snap, b, base, config).findings
    stricter = RulesConfig(enabled_only=config.enabled_only, thresholds={"KV001.kv_usage_frac": 0.995})
    assert not evaluate(snap, b, base, stricter).findings


def _positive_fixtures():
    return sorted(p for p in FIXTURES.glob("*/positive*.json"))


def test_every_positive_finding_validates_against_the_report_schema(report_validator):
    findings = []
    for path in _positive_fixtures():
        snap, b, base, config, _ = load_case(path)
        findings += evaluate(snap, b, base, config).findings
    assert len(findings) == len(_positive_fixtures())
    report = Report(kind=ReportKind.DIAGNOSE, triage_version="0.1.0", created_at="2026-11-21T12:00:00Z",
                    command=("triage", "diagnose"), host=HOST, findings=tuple(findings))
    data = report_validator(report)
    assert len(data["findings"]) == len(findings)
    for f in data["findings"]:
        json.dumps(f["evidence"], allow_nan=False)


def test_never_advise_enabling_what_the_version_already_enables():
    """With all rules on: on vLLM V1 (>= 0.8) no fix says --enable-chunked-prefill / --enable-prefix-caching."""
    checked = 0
    for path in sorted(FIXTURES.glob("*/*.json")):
        snap, b, base, config, _ = load_case(path)
        cfg = snap.payload(ServerConfigData) or ServerConfigData()
        if EngineInfo(cfg.engine, cfg.engine_version).default_on("chunked_prefill") is not True:
            continue
        checked += 1
        result = evaluate(snap, b, base, RulesConfig(model_weight_bytes=config.model_weight_bytes))
        for f in result.findings:
            for text in fix_lines(f.fix) + (f.fix.text,):
                assert "--enable-chunked-prefill" not in text and "--enable-prefix-caching" not in text, \
                    (path.name, f.code, text)
    assert checked >= 80


def test_v0_engine_is_told_to_enable_them():
    snap = snapshot(cfg(engine_version="0.6.3", enable_chunked_prefill=False, enable_prefix_caching=False))
    fixes = [f.fix for f in evaluate(snap, bench()).findings]
    assert any(offers(fix, "--enable-chunked-prefill") for fix in fixes)
    assert any(offers(fix, "--enable-prefix-caching") for fix in fixes)


def test_version_parsing_and_defaults():
    assert parse_version("0.8.5.post1") == (0, 8, 5)
    assert parse_version("v3.0") == (3, 0, 0)
    assert parse_version("nightly") is None
    assert EngineInfo("vllm", "0.8.0").default_on("prefix_caching") is True
    assert EngineInfo("vllm", "0.7.3").default_on("prefix_caching") is False
    assert EngineInfo("vllm", "0.9.0", v0=True).default_on("chunked_prefill") is False
    assert EngineInfo("vllm", None).default_on("chunked_prefill") is None
    # No /version, but V1 metric names: the V1 engine, so both are on by default.
    assert EngineInfo("vllm", None, v1_metrics=True).default_on("prefix_caching") is True
    # TGI's launcher turns prefix caching on from 2.3 (claim tgi.prefix-caching-default-on-2.3), and prefill
    # chunking from 3.0 (PREFILL_CHUNKING defaulted to 0 in 2.4).
    assert EngineInfo("tgi", "2.4.1").default_on("prefix_caching") is True
    assert EngineInfo("tgi", "2.2.0").default_on("prefix_caching") is False
    assert EngineInfo("tgi", "2.4.1").default_on("chunked_prefill") is False
    assert EngineInfo("tgi", "3.0.2").default_on("chunked_prefill") is True
    assert EngineInfo("sglang", "0.4").default_on("prefix_caching") is True


def test_an_unidentified_engine_gets_no_flag_only_the_equivalents_in_words():
    """An unknown OpenAI-compatible server: no engine's flag is offered as its fix (a `vllm serve ...` line
    would be a guess), and the note names each engine's equivalent."""
    for engine in (None, "openai-compatible"):
        cmds, note = engine_flags({"max_model_len": 5120}, engine)
        assert cmds == ()
        assert note.startswith(" No flag is offered: the engine is not identified.")
        assert "vLLM --max-model-len 5120; SGLang --context-length 5120; TGI --max-total-tokens 5120" in note
    cmds, note = engine_flags({"max_model_len": 5120}, "tgi")
    assert cmds == ("--max-total-tokens 5120",) and "vLLM: --max-model-len 5120" in note


# --- triage.toml ------------------------------------------------------------------------------------
def test_load_rules_config_reads_every_table(tmp_path):
    path = tmp_path / "triage.toml"
    path.write_text('[rules]\ndisable = ["gpu007", "CPU002"]\n\n[thresholds]\nKV001.kv_usage_frac = 0.95\n'
                    '"BENCH003.ttft_p99_ms" = 800\n\n[thresholds.GPU008]\nlow_util_pct = 30\n\n'
                    '[target]\nengine = "vllm"\nengine_version = "0.9.2"\n\n[model]\nweight_bytes = 16_000_000_000\n')
    config = load_rules_config(path)
    assert config.disabled == {"GPU007", "CPU002"}
    assert config.threshold("KV001.kv_usage_frac") == 0.95
    assert config.threshold("BENCH003.ttft_p99_ms") == 800
    assert config.threshold("GPU008.low_util_pct") == 30
    assert config.threshold("KV001.min_waiting") == 1.0  # untouched default
    assert (config.target_engine, config.target_engine_version) == ("vllm", "0.9.2")
    assert config.model_weight_bytes == 16e9
    assert load_rules_config(None) == RulesConfig()


@pytest.mark.parametrize("text, message", [
    ("[thresholds]\nKV001.kv_usage = 0.9\n", r"unknown threshold 'KV001.kv_usage'.*did you mean KV001.kv_usage_frac"),
    ("[rules]\ndisable = [\"KV999\"]\n", r"unknown rule code 'KV999'"),
    ("[rules]\ndisable = \"KV001\"\n", r"must be a list of rule codes"),
    ("[rules]\nturn_off = []\n", r"unknown key 'turn_off' in \[rules\]"),
    ("[thresholdz]\n", r"unknown table \[thresholdz\]"),
    ("[thresholds]\nKV001.kv_usage_frac = \"high\"\n", r"must be a number"),
    ("[target]\nengine = \"vlm\"\n", r"unknown engine 'vlm'.*vllm"),
    ("[model]\nweight_bytes = -1\n", r"weight_bytes must be a positive number"),
    ("[rules\n", r"not valid TOML"),
])
def test_bad_config_is_a_usage_error(tmp_path, text, message):
    path = tmp_path / "triage.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_rules_config(path)


def test_missing_config_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such config file"):
        load_rules_config(tmp_path / "nope.toml")


def test_bench_only_evaluation_runs_the_bench_rules_without_probes():
    codes = bench_rule_codes()
    assert {"SCHED003", "SCHED004", "SCHED006", "BENCH001", "BENCH002", "BENCH003", "ENG002", "KV001",
            "KV002"} <= codes
    assert not codes & {"GPU004", "KV003", "ENG006"}
    b = bench(level(0, output_tokens_per_s=41.0), level(2, output_tokens_per_s=55.0),
              level(3, output_tokens_per_s=56.0))
    result = evaluate(Snapshot(), bench=b, config=RulesConfig(enabled_only=codes))
    assert "SCHED004" in [f.code for f in result.findings]
    assert {s.code for s in result.skipped} <= codes


def test_a_rule_that_raises_anything_is_reported_as_errored_and_the_others_still_run():
    """Issue: an infinite running-requests peak crashed KV002 with OverflowError, and the bench ended with no
    report. Every rule now runs behind a guard that catches any exception."""
    from triage.rules import RulesConfig, evaluate
    from triage.rules.registry import REGISTRY

    snap = snapshot()
    rule_ = REGISTRY.get("KV002")
    original = rule_.check

    def boom(ctx):
        raise OverflowError("cannot convert float infinity to integer")

    object.__setattr__(rule_, "check", boom)
    try:
        result = evaluate(snap, config=RulesConfig(enabled_only=frozenset({"KV002", "MEM001"})))
    finally:
        object.__setattr__(rule_, "check", original)
    reasons = {s.code: s.reason for s in result.skipped}
    assert reasons["KV002"].startswith("errored:") and "OverflowError" in reasons["KV002"]
    assert not reasons.get("MEM001", "").startswith("errored")       # MEM001 still ran
