"""The engines registry (triage/engines/): one module per engine, every tabled release, the server's version in
every fix, a claims ledger for what triage says an engine does, and no engine-name comparison elsewhere."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import triage.engines.truth as truth
from tests.factories import fix_lines, offers
from tests.rule_cases._build import bench, cfg, identity, level, process, snapshot
from triage.cli import app
from triage.core.errors import UsageError
from triage.core.snapshot import Snapshot
from triage.engines import claim, engines, get, known_names, ledger, with_flag_tables
from triage.engines.claims import line_hash
from triage.engines.runtime_log import RUNTIME
from triage.probes.http import HttpResponse
from triage.probes.prom import EngineMetrics
from triage.probes.server_metrics import probe_server_metrics
from triage.rules import REGISTRY, RulesConfig, evaluate
from triage.rules.engine_flags import engine_flags
from triage.rules.engine_info import EngineInfo

REPO = Path(__file__).resolve().parent.parent
PROM = Path(__file__).parent / "fixtures" / "prom"

ROOT = Path(__file__).resolve().parent.parent


# -- the ledger ----------------------------------------------------------------------------------------------

def test_every_claim_cited_anywhere_is_in_the_ledger_with_its_source_lines_hashed():
    cited = {c for e in (*engines(), RUNTIME) for c in e.cited()}
    cited |= {r.split(":", 1)[1] for rule in REGISTRY for r in rule.doc.references if r.startswith("claim:")}
    assert len(cited) >= 20
    assert cited <= set(ledger()), sorted(cited - set(ledger()))
    for c in ledger().values():
        assert re.fullmatch(r"[a-z0-9.]+(-[a-z0-9.]+)*", c.id.split(".", 1)[1]), c.id
        assert c.kind in ("git", "pypi", "local") and c.path and c.ref and c.sentence.endswith(".")
        assert 1 <= c.first_line <= c.last_line and re.fullmatch(r"[0-9a-f]{64}", c.sha256), c.id
    assert "backends/v3/src/backend.rs:L175-184" in claim("tgi.chunking-ignores-max-batch-size").citation


def test_this_repositorys_claims_still_hash_to_their_lines():
    """A "local" claim cites the reference engine's own source: checked here, against the working tree."""
    local = [c for c in ledger().values() if c.kind == "local"]
    assert len(local) >= 5
    for c in local:
        text = (ROOT / c.path).read_text(encoding="utf-8")
        assert line_hash(text, c.first_line, c.last_line) == c.sha256, (
            f"{c.id}: {c.path}:L{c.first_line}-{c.last_line} changed; re-point the claim "
            "(python scripts/verify_engine_claims.py --show)")


def test_rules_explain_prints_the_citations():
    out = CliRunner().invoke(app, ["rules", "explain", "SCHED003"], env={"COLUMNS": "200"}).output
    assert "What the engines' source says" in out and "tgi_request_queue_duration" in out
    assert "huggingface/text-generation-inference@v3.3.7 router/src/server.rs:L418" in out


# -- one home for engine knowledge ---------------------------------------------------------------------------

# A string equal to an engine's name or alias outside triage/engines/ is engine knowledge in the wrong home. These
# are not: each is allow-listed with its reason (file, the constant).
_ALLOWED = {
    ("triage/importers/__init__.py", "vllm"): "the name of a result-file format (vLLM's benchmark JSON), not an engine",
    ("triage/importers/common.py", "vllm"): "a workload endpoint spelling in AIPerf/GuideLLM files, not an engine",
    ("probes/engine_identity.py", "llamacpp"): "a payload key (EngineIdentityData.llamacpp), not an engine name",
}


def _engine_name_constants(source: str) -> list[tuple[int, str]]:
    spellings = set(known_names()) | {"vllm-v0"}
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in spellings]


def test_no_engine_name_constant_outside_the_engines_package():
    found, used = [], set()
    for root in ("triage", "probes", "rules"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith("triage/engines/") or path.is_symlink() or any(p.is_symlink() for p in path.parents):
                continue
            for line, value in _engine_name_constants(path.read_text()):
                if (rel, value) in _ALLOWED:
                    used.add((rel, value))
                else:
                    found.append(f"{rel}:{line}: {value!r}")
    assert not found, "engine names outside triage/engines/ (ask the registry):\n" + "\n".join(found)
    assert used == set(_ALLOWED), f"allow-list entries that match nothing: {set(_ALLOWED) - used}"


def test_the_engine_name_scan_catches_a_planted_one():
    assert _engine_name_constants('if engine.name == "tgi" and v < (3, 0, 0):\n    pass')
    assert _engine_name_constants('x = ("vllm", "sglang")')
    assert _engine_name_constants('parse_flags(argv, engine or "vLLM")')
    assert not _engine_name_constants('module = get(engine)')


def test_triage_toml_accepts_every_registered_engine():
    for name in known_names():
        RulesConfig(target_engine=name).validate([])
    with pytest.raises(UsageError, match="unknown engine 'vlm'.*vllm"):
        RulesConfig(target_engine="vlm").validate([])


def test_no_fix_names_an_engine_launcher_by_hand():
    """ENG001 lists each batching engine's own launcher (from the registry), TGI's too."""
    from triage.rules.catalog.eng001_non_batching_engine_in_production import _fix
    from triage.rules.context import Context

    fix = _fix(None, Context(Snapshot(probes=()), None, None, RulesConfig()), 4)
    assert fix.commands == tuple(e.launch_command("<model>") for e in with_flag_tables())
    assert any(c.startswith("text-generation-launcher --model-id") for c in fix.commands)


def test_every_metric_map_names_real_engine_metrics_fields():
    known = {f.name for f in fields(EngineMetrics)}
    for e in engines():
        if e.metrics is not None:
            assert set(e.metrics.signals) <= known, (e.name, set(e.metrics.signals) - known)
            assert set(e.metrics.histograms) <= {"ttft_s", "itl_s", "e2e_s", "queue_time_s", "prefill_time_s",
                                                 "decode_time_s"}


# -- every release people run ---------------------------------------------------------------------------------

def _minors(engine: str) -> set[tuple[int, int]]:
    return {truth.version_key(v)[:2] for v in truth.versions(engine)}


def test_every_release_is_tabled_with_its_provenance():
    newest_vllm = truth.version_key(truth.newest("vllm"))
    assert {(0, m) for m in range(6, newest_vllm[1] + 1)} <= _minors("vllm")
    sglang = {truth.version_key(v) for v in truth.versions("sglang")}
    assert {(0, 5, n) for n in range(1, truth.version_key(truth.newest("sglang"))[2] + 1)} <= {v for v in sglang}
    assert any(v[:2] == (0, 4) for v in sglang)                    # the last 0.4 release
    assert {(2, 0), (2, 1), (2, 2), (2, 3), (2, 4), (3, 0), (3, 1), (3, 2), (3, 3)} <= _minors("tgi")
    listed = json.loads(CliRunner().invoke(app, ["engines", "list", "--format", "json"]).stdout)
    by_name = {e["name"]: e for e in listed}
    assert len(by_name["vllm"]["versions"]) == len(truth.versions("vllm"))
    assert all(v["sha256"] and v["files"] for v in by_name["tgi"]["versions"])


def test_a_version_between_tables_is_a_gap_not_a_silent_match():
    assert truth.table("vllm", "0.20.1").match == "patch" and truth.table("vllm", "0.20.1").version == "0.20.2"
    assert truth.table("sglang", "0.5.4").match == "exact" and truth.table("sglang", "0.5.4").version == "0.5.4.post3"
    assert truth.table("vllm", "0.5.4").match == "gap"             # older than every table
    assert truth.table("vllm", None).match == "unknown"
    cmds, note = engine_flags({"max_num_seqs": 512}, EngineInfo("vllm", "0.5.4"))
    assert "0.5.4 is not tabled" in note
    cmds, note = engine_flags({"max_num_seqs": 512}, EngineInfo("vllm", None))
    assert "server version unknown" in note


def test_an_sglang_0_5_4_server_is_checked_against_0_5_4_never_an_unknown_version():
    snap = snapshot(cfg(engine="sglang", engine_version="0.5.4", gpu_memory_utilization=0.8),
                    drop=("server_metrics",))
    b = bench(level(3, "server", kv_cache_usage_frac_max=0.98, num_requests_waiting_max=30))
    result = evaluate(snap, bench=b)
    kv = next(f for f in result.findings if f.code == "KV001")
    assert "server version unknown" not in kv.fix.text and offers(kv.fix, "--mem-fraction-static 0.84")
    assert "--mem-fraction-static 0.92" not in " ".join(fix_lines(kv.fix))


# -- TGI saturation, seen and fixed in TGI's own terms --------------------------------------------------------

def _earlier(text: str) -> str:
    """The same server a window earlier: every histogram's count and sum halved (gauges as they are), so the
    window's histogram means are the capture's."""
    def half(m: re.Match) -> str:
        return f"{m.group(1)} {float(m.group(2)) / 2:g}"
    return re.sub(r"^(tgi_\w+_(?:bucket\{[^}]*\}|sum|count)) ([\d.]+)$", half, text, flags=re.M)


def _tgi_snapshot(capture: str, version: str = "3.3.7") -> Snapshot:
    text = (PROM / capture).read_text()
    answers = [_earlier(text), text]
    metrics = probe_server_metrics("http://10.0.0.7:8080", window_s=5.0, num_intermediate=0,
                                   get=lambda url, timeout_s: HttpResponse(200, answers.pop(0) if len(answers) > 1
                                                                           else answers[0]),
                                   sleep=lambda s: None)
    base = snapshot(cfg(engine="tgi", engine_version=version, gpu_memory_utilization=1.0, enable_prefix_caching=None,
                        enable_chunked_prefill=None, max_num_seqs=None, kv_cache_dtype="fp8_e4m3fn"),
                    identity(engine="tgi", version=version), process(engine="tgi"), drop=("server_metrics",))
    return Snapshot(probes=(*base.probes, metrics))


def test_a_saturated_tgi_is_named_with_tgis_own_flags_only():
    snap = _tgi_snapshot("tgi_3_3_7_saturated.txt")
    assert snap.get("server_metrics").data.kv_cache_usage_frac == pytest.approx(160524 / 163800)
    result = evaluate(snap, config=RulesConfig())
    codes = {f.code: f for f in result.findings}
    assert {"KV001", "SCHED003"} <= set(codes), sorted(codes)
    assert codes["SCHED003"].evidence["server_metrics.histograms.queue_time_s.mean_s"] == pytest.approx(3.0)
    for f in result.findings:
        text = " ".join(fix_lines(f.fix)) + " " + f.fix.text if f.fix else ""
        assert "--max-batch-size" not in " ".join(fix_lines(f.fix) if f.fix else ()), (f.code, text)
        assert "--gpu-memory-utilization" not in " ".join(fix_lines(f.fix) if f.fix else ()), f.code
    skipped = {s.code for s in result.skipped}
    assert "KV001" not in skipped


def test_a_healthy_tgi_stays_quiet():
    result = evaluate(_tgi_snapshot("tgi_3_3_7_healthy.txt"), config=RulesConfig(model_weight_bytes=16.06e9))
    loud = [f.code for f in result.findings if f.severity.rank < 3 and f.kind.value == "problem"]
    assert not {"KV001", "SCHED003"} & set(loud), loud


def test_tgi_max_batch_size_is_advised_only_where_tgi_honours_it():
    assert engine_flags({"max_num_seqs": 256}, EngineInfo("tgi", "2.4.1"))[0] == ("--max-batch-size 256",)
    cmds, note = engine_flags({"max_num_seqs": 256}, EngineInfo("tgi", "3.3.6"))
    assert cmds == () and "ignores --max-batch-size while prefill chunking is on" in note


# -- the audit's defects, each against what the source says ------------------------------------------------------

def test_ollama_runs_one_request_at_a_time_by_default_since_0_10():
    knob = get("ollama").batching_knob
    assert knob.default.startswith("1 ") and "ollama.num-parallel-default-1" in knob.claims


def test_vllm_0_20_to_0_30_default_to_0_92():
    for v in ("0.20.0", "0.22.0", "0.27.1", "0.30.0"):
        assert truth.default("vllm", "gpu_memory_utilization", v)[0] == 0.92, v
    assert truth.default("vllm", "gpu_memory_utilization", "0.19.1")[0] == 0.9


def test_tgi_tables_say_what_tgi_does():
    t = truth.table("tgi", "3.3.7")
    assert t.defaults["max_num_seqs"] is None and t.defaults["max_concurrent_requests"] == 128
    assert t.defaults["memory_wiggle_room"] == 0.9 and t.defaults["launcher_vram_wiggle_room"] == 0.95
    assert t.defaults["enable_chunked_prefill"] is True
    assert truth.table("tgi", "2.4.1").defaults["enable_chunked_prefill"] is False
    assert truth.table("tgi", "2.3.1").defaults["enable_prefix_caching"] is True
    assert truth.table("tgi", "2.2.0").defaults["enable_prefix_caching"] is False


def test_vllm_0_33_table_has_the_cache_config_and_spec_decode_metrics():
    metrics = truth.table("vllm", "0.33.0").metrics
    for name in ("vllm:cache_config_info", "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens"):
        assert name in metrics, name


def test_vllm_startup_marker_follows_the_version():
    vllm = get("vllm")
    # The startup line changed in 0.15: a logo by default, the plain line with VLLM_DISABLE_LOG_LOGO (claims
    # vllm.api-server-version-log-0.14, vllm.startup-logo-0.15, vllm.server-version-log-0.15).
    assert vllm.log_marker("api_server_start", "0.14.1") == ("vLLM API server version",)
    assert vllm.log_marker("api_server_start", "0.15.1") == ("vLLM server version", "█ ▀▄▀ █")
    assert vllm.log_marker("api_server_start", "0.18.0") == ("vLLM server version", "█ ▀▄▀ █")
    assert vllm.log_marker("ready", "0.17.1") == ("Application startup complete", "Starting vLLM API server")
    assert vllm.log_marker("ready", "0.33.0") == ("Application startup complete", "Starting vLLM server on")
    from triage.probes.logs import scan_lines

    # vLLM's default logging prints the logo (claim vllm.startup-logo): its middle line opens the startup.
    logo = scan_lines(["INFO 11-27 10:00:00 [startup.py:38]        █     █     █▄   ▄█",
                       "INFO 11-27 10:00:00 [startup.py:38]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.33.0",
                       "WARNING No available shared memory broadcast block found in 60 seconds",
                       "INFO Application startup complete."])
    assert logo["num_shm_broadcast_stalls_startup"] == 1

    out = scan_lines(["INFO vLLM server version 0.33.0, serving model m",
                      "WARNING No available shared memory broadcast block found in 60 seconds",
                      "INFO Application startup complete."])
    assert out["num_shm_broadcast_stalls_startup"] == 1


def test_tgi_prefill_chunking_switch_is_its_environment_variable():
    assert engine_flags({"enable_chunked_prefill": None}, EngineInfo("tgi", "2.4.1"))[0] == ("PREFILL_CHUNKING=1",)
    cmds, note = engine_flags({"enable_chunked_prefill": None}, EngineInfo("tgi", "3.3.7"))
    assert cmds == () and "chunks prefills by default" in note


def test_eng006_and_mem001_say_only_what_the_source_supports():
    assert "vLLM fixed such leaks" not in REGISTRY.get("ENG006").doc.fix
    mem001 = (REPO / "rules" / "catalog" / "mem001_swap_active.py").read_text()
    assert "lower the engine's CPU swap" not in mem001 and "gone since 0.18" in REGISTRY.get("MEM001").doc.fix


# -- one copy of each package ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rules", "probes", "reference_engine"])
def test_a_top_level_import_is_refused_with_the_right_name(name):
    done = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and f"import triage.{name}, not {name}" in done.stderr


def test_engines_show_gives_knobs_at_a_version_and_the_claims():
    out = json.loads(CliRunner().invoke(app, ["engines", "show", "tgi", "--version", "3.3.6", "--format",
                                              "json"]).stdout)
    assert out["knobs"]["max_num_seqs"]["flag"] is None and "tgi.chunking-ignores-max-batch-size" in \
        out["knobs"]["max_num_seqs"]["claims"]
    assert any("backend.rs:L175-184" in line for line in out["claims"])
    bad = CliRunner().invoke(app, ["engines", "show", "nope"])
    assert bad.exit_code == 2 and "unknown engine 'nope'" in bad.output


def test_a_module_knob_change_between_versions_is_respected():
    tgi = get("tgi")
    changed = replace(tgi, knobs={**tgi.knobs})
    assert changed.knob("max_num_seqs", "2.0.4").flag == "--max-batch-size"
    assert changed.knob("max_num_seqs", None).reason.startswith("TGI 3.x ignores")


def test_engines_show_refuses_a_name_it_only_prefixes():
    """`vllm2` is a typo, not vLLM: refused with the close names (it used to show vLLM silently)."""
    res = CliRunner().invoke(app, ["engines", "show", "vllm2"], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "unknown engine 'vllm2'" in res.output and "did you mean vllm" in res.output
    assert CliRunner().invoke(app, ["engines", "show", "llama-server"]).exit_code == 0     # an alias is a name


def test_every_metric_map_keys_its_histograms_by_the_typed_record():
    """ServerMetricsData.histograms is a Histograms record: an engine's map may only name its fields."""
    from triage.core.probe_data import Histograms

    mapped = [e for e in engines() if e.metrics is not None and e.metrics.histograms]
    assert len(mapped) >= 3
    for e in mapped:
        assert set(e.metrics.histograms) <= set(Histograms.names()), (e.name, sorted(e.metrics.histograms))
