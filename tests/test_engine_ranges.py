"""Engine facts hold across their whole version range: every boundary the truth tables can answer is derived from
them, every metric name read is tabled or claimed, and each range edge the source audit found wrong stays fixed.

The audit's rows (the "Engine facts true across their whole range" issue) are tested one by one below, each
against what the engine's own source says at both ends of the range (the claims cite those lines)."""
from __future__ import annotations

import dataclasses
import re

import triage.engines.truth as truth
from triage.engines import Knob, NoEquivalent, claim, engines, get, ledger
from triage.engines.vllm import default_max_num_seqs
from triage.rules.engine_flags import render

GIB = 1024 ** 3

# Boundaries that are a behaviour, not a name: the tables accept the later step's flag earlier, and the claims
# cite the behaviour at both ends. (engine, knob) -> why.
_BEHAVIOUR_BOUNDARIES = {
    ("vllm", "quantization_fp8_online"): "whether online FP8 quantizes while loading is a behaviour "
                                         "(claims vllm.quantize-after-full-load-0.10, "
                                         "vllm.fp8-online-quantizes-while-loading)",
}


def _value(spec: Knob) -> str | None:
    return None if spec.value is None or "{v}" in spec.value else spec.value


def _accepts(t: truth.Table, spec: Knob) -> bool:
    if spec.value is not None and _value(spec) is None:      # a number filled in later: the flag must exist
        return t.flag(spec.flag) is not None
    return t.check(spec.flag, _value(spec)) is None


def _boundary_disagreements() -> list[str]:
    """Every tabled release where a knob's hand-written step disagrees with that release's table: a Knob whose flag
    (and value) the table refuses, or a NoEquivalent where the table already accepts a later step's flag."""
    out = []
    for e in engines():
        for knob, steps in e.knobs.items():
            if (e.name, knob) in _BEHAVIOUR_BOUNDARIES:
                continue
            for r in truth.versions(e.name):
                t, spec = truth.table(e.name, r), e.knob(knob, r)
                if isinstance(spec, Knob) and not spec.is_env and not _accepts(t, spec):
                    out.append(f"{e.name} {knob}: {spec.flag} {_value(spec) or ''} from {r} by the module, "
                               f"but {t.check(spec.flag, _value(spec))}")
                elif isinstance(spec, NoEquivalent):
                    later = [s.spec for s in steps if s.version and isinstance(s.spec, Knob) and not s.spec.is_env
                             and truth.version_key(s.version) > truth.version_key(r)]
                    out += [f"{e.name} {knob}: no equivalent at {r} by the module, but the table has "
                            f"{k.flag} {_value(k) or ''}" for k in later if _accepts(t, k)]
    return out


def test_every_knob_boundary_agrees_with_the_tables():
    assert _boundary_disagreements() == []


def test_the_boundary_check_catches_a_boundary_written_one_release_late(monkeypatch):
    vllm = get("vllm")
    steps = vllm.knobs["enable_eplb"]
    late = (steps[0], dataclasses.replace(steps[1], version="0.10.0"))
    monkeypatch.setitem(vllm.knobs, "enable_eplb", late)
    assert any("enable_eplb: no equivalent at 0.9.2" in d for d in _boundary_disagreements())


def test_the_behaviour_boundaries_are_cited_at_both_ends():
    for (engine, knob), why in _BEHAVIOUR_BOUNDARIES.items():
        ids = re.findall(r"[a-z]+\.[a-z0-9.-]+[a-z0-9]", why)
        assert ids and all(i in ledger() for i in ids), why
        assert {s.spec.claims for s in get(engine).knobs[knob]}


# -- every metric name read is tabled or claimed -------------------------------------------------------------

def _strings(obj, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _strings(k, out)
            _strings(v, out)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            _strings(v, out)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if not f.name.endswith("_fn") and f.name != "claims":
                _strings(getattr(obj, f.name), out)


def _names_read(engine) -> set[str]:
    prefixes = {*engine.identity.metric_prefixes, *((engine.metrics.prefix,) if engine.metrics else ())}
    if not prefixes:
        return set()
    pattern = re.compile("(?:" + "|".join(re.escape(p) for p in prefixes) + r")[A-Za-z0-9_:]+")
    text: list[str] = []
    _strings((engine.metrics, engine.topology, engine.history_queries), text)
    return {m for s in text for m in pattern.findall(s)}


def _tabled(name: str, tabled: dict[str, str]) -> bool:
    stem = re.sub(r"_(bucket|sum|count|total)$", "", name)
    return name in tabled or stem in tabled or any(re.sub(r"_total$", "", t) == stem for t in tabled)


def _claimed(engine, name: str) -> bool:
    ids = list((engine.metrics.claims if engine.metrics else {}).get(name, ()))
    tmap = engine.topology
    if tmap is not None:
        ids += [*tmap.claims, *(c for t in tmap.transfers for c in t.claims), *(c for o in tmap.offloads for c in o.claims)]
    stem = re.sub(r"_(bucket|sum|count|total)$", "", name).split(":")[-1]
    return any(stem in claim(i).sentence or name in claim(i).sentence for i in ids)


def test_every_metric_name_read_is_tabled_or_claimed():
    missing = []
    for e in engines():
        tabled = truth.metric_names(e.name)
        missing += [f"{e.name}: {n}" for n in sorted(_names_read(e)) if not _tabled(n, tabled) and not _claimed(e, n)]
    assert missing == []
    assert len(_names_read(get("trtllm"))) >= 10 and len(_names_read(get("llama.cpp"))) >= 9


def test_a_made_up_metric_name_is_caught():
    sglang = get("sglang")
    assert not _tabled("sglang:num_queue_requests_made_up", truth.metric_names("sglang"))
    assert not _claimed(sglang, "sglang:num_queue_requests_made_up")
    assert _tabled("sglang:num_queue_reqs", truth.metric_names("sglang"))


def test_each_signal_is_read_at_every_release_that_exports_one_of_its_names():
    """A release-by-release look: where a release's table has none of a signal's names, the signal is blind
    there. The blind spots that remain are the engines' own (SGLang 0.5.3-0.5.6 count no retractions)."""
    from triage.engines.metrics import First, Given, Plus, Read

    def names(reader) -> tuple[str, ...]:
        if isinstance(reader, Read):
            return reader.names
        if isinstance(reader, (Plus,)):
            return names(reader.a) + names(reader.b)
        if isinstance(reader, First):
            return sum((names(r) for r in reader.readers), ())
        if isinstance(reader, Given):
            return names(reader.reader)
        return ()

    sglang = get("sglang")
    blind = [v for v in truth.versions("sglang")
             if not any(_tabled(n, truth.metric_names("sglang", v))
                        for n in names(sglang.metrics.signals["num_preemptions_total"]))]
    assert blind == ["0.5.3.post3", "0.5.4.post3", "0.5.5.post3", "0.5.6.post2"]


# -- ranged claims ---------------------------------------------------------------------------------------------

def test_a_ranged_claim_runs_forward_and_names_the_release_before_it():
    ranged = [c for c in ledger().values() if c.until is not None or c.absent_before is not None]
    assert len(ranged) >= 40
    for c in ranged:
        first = truth.version_key(c.ref)
        if c.until is not None:
            assert truth.version_key(c.until.ref) >= first, c.id
            assert re.fullmatch(r"[0-9a-f]{64}", c.until.sha256) and c.until.first_line <= c.until.last_line, c.id
        if c.absent_before is not None:
            assert truth.version_key(c.absent_before.ref) < first and c.absent_before.text.strip(), c.id
    assert " .. " in claim("vllm.dp-lb-score").citation and "not in 0.10.0" in claim("vllm.dp-lb-score").citation


# -- the audit's rows, each at the edge it had wrong --------------------------------------------------------------

def _knob(engine: str, knob: str, version: str):
    return get(engine).knob(knob, version)


def test_row1_sglang_balances_on_tokens_only_where_a_method_does():
    assert _knob("sglang", "dp_load_balance", "0.5.2").value == "minimum_tokens"
    for v in ("0.5.3", "0.5.7"):
        spec = _knob("sglang", "dp_load_balance", v)
        assert spec.value == "shortest_queue" and "request count" in spec.note
    assert _knob("sglang", "dp_load_balance", "0.5.8").value == "total_tokens"
    assert claim("sglang.lb-minimum-tokens").until.ref == "0.5.2"
    assert claim("sglang.lb-minimum-tokens-deprecated").absent_before.ref == "0.5.2"


def test_row2_vllm_0_18_and_0_19_compile_lines_are_read():
    vllm = get("vllm")
    for v in ("0.18.0", "0.19.1"):
        assert vllm.log_marker("startup.compile.end", v) == ("torch.compile took %.2f s in total",)
    assert vllm.log_marker("startup.compile.end", "0.17.1") == ("torch.compile takes %.2f s in total",)
    from triage.engines.startup_log import parse_startup
    lines = ["INFO 01-02 03:04:05 [api_server.py:1] vLLM API server version 0.18.0",
             "INFO 01-02 03:04:10 [loader.py:1] Starting to load model m...",
             "INFO 01-02 03:04:20 [gpu_model_runner.py:1] Model loading took 14.9 GiB and 9.5 seconds",
             "INFO 01-02 03:04:50 [monitor.py:34] torch.compile took 25.31 s in total",
             "INFO 01-02 03:04:55 [gpu_worker.py:1] Available KV cache memory: 40.1 GiB"]
    startup = parse_startup([(None, line) for line in lines], vllm, version="0.18.0")
    assert {p.phase for p in startup.phases} >= {"compile"}


def test_row3_topo002_says_how_to_export_the_balance_per_version():
    from triage.rules.catalog.topo002_moe_expert_imbalance import _not_exported
    from triage.rules.engine_info import EngineInfo

    class _Ctx:
        def __init__(self, version: str) -> None:
            self.version = version

        def engine(self) -> EngineInfo:
            return EngineInfo("sglang", self.version)

    old, mid, new = (_not_exported(_Ctx(v)) for v in ("0.5.6", "0.5.10", "0.5.23"))
    assert "came in 0.5.7" in old
    assert "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC=1" in mid and "--enable-expert-distribution-metrics" in mid
    assert "--expert-balancedness-report-mode prometheus" in new and "only when asked" in new


def test_row4_fastsafetensors_only_where_load_format_has_it():
    assert _knob("vllm", "fast_load_format", "0.7.3").value == "runai_streamer"
    assert render("fast_load_format", "vllm", None, "0.7.3").text == "--load-format runai_streamer"
    assert render("fast_load_format", "vllm", None, "0.8.5").text == "--load-format fastsafetensors"
    assert "fastsafetensors" not in truth.table("vllm", "0.8.1").flag("--load-format").choices
    assert "fastsafetensors" in truth.table("vllm", "0.8.2").flag("--load-format").choices


def test_row5_no_tabled_llamacpp_build_exports_kv_usage():
    for v in truth.versions("llama.cpp"):
        metrics = truth.metric_names("llama.cpp", v)
        assert "llamacpp:requests_processing" in metrics and "llamacpp:kv_cache_usage_ratio" not in metrics, v
    assert get("llama.cpp").metrics.claims["llamacpp:kv_cache_usage_ratio"] == ("llamacpp.kv-cache-usage-ratio-last",)
    assert truth.version_key(claim("llamacpp.kv-cache-usage-ratio-last").ref) < (1, 0, 0)   # llama-cpp-python 0.3.9


def test_row6_tgi_caps_an_explicit_max_new_tokens_from_3_1_1():
    note = get("tgi").notes["kv_reservation"][0]
    assert "from 3.1.1" in note and "3.0 and 3.1.0 reserve all of an explicit max_new_tokens" in note
    assert claim("tgi.generation-chunk-1024").ref == "v3.1.1"
    assert claim("tgi.generation-chunk-1024").absent_before.ref == "v3.1.0"
    assert claim("tgi.generation-reserve-explicit-max-new-tokens").until.ref == "v3.1.0"


def test_row7_external_lb_and_the_rank_header_from_0_11_1():
    assert isinstance(_knob("vllm", "dp_external_lb", "0.11.0"), NoEquivalent)
    assert render("dp_external_lb", "vllm", None, "0.11.1").text == "--data-parallel-external-lb"
    text, _ = get("vllm").topology.dp_balance_fix(None, "2", "0.10.2")
    assert "no X-data-parallel-rank header" in text
    text, _ = get("vllm").topology.dp_balance_fix(None, "2", "0.11.1")
    assert "unless the request names a rank (the X-data-parallel-rank header" in text


def test_row8_api_server_count_from_0_9_1_and_eplb_from_0_9_2():
    assert isinstance(_knob("vllm", "api_server_count", "0.9.0"), NoEquivalent)
    assert render("api_server_count", "vllm", 4, "0.9.1").text == "--api-server-count 4"
    assert isinstance(_knob("vllm", "enable_eplb", "0.9.1"), NoEquivalent)
    assert render("enable_eplb", "vllm", None, "0.9.2").text == "--enable-eplb"


def test_row9_sglang_kv_transfer_megabytes_are_mib():
    (transfer,) = get("sglang").topology.transfers
    assert transfer.bytes_unit == 1024 ** 2


def test_row10_vllm_balancer_score_is_the_releases_own():
    fix = get("vllm").topology.dp_balance_fix
    assert "waiting x 4 + running" in fix(None, "1", "0.20.2")[0]
    assert "waiting x 4 + running" in fix(None, "1", "0.26.0")[0]
    later = fix(None, "1", "0.33.0")[0]
    assert "in-flight" in later and "x 4" not in later


def test_row11_tgi_says_which_models_still_obey_max_batch_size():
    reason = _knob("tgi", "max_num_seqs", "3.3.7").reason
    assert "Gemma3, Qwen2-VL, Qwen2.5-VL and Mllama" in reason and "every vision-language model up to 3.2" in reason


def test_row12_sglang_memory_reserve_from_0_5_3():
    assert "from 0.5.3" in get("sglang").notes["mem_fraction_static"][0]
    c = claim("sglang.mem-fraction-static-reserve")
    assert c.ref == "0.5.3.post3" and c.absent_before.ref == "0.5.2"


def test_row13_default_max_num_seqs_per_release():
    assert default_max_num_seqs(80 * GIB, "NVIDIA A100-SXM4-80GB", "0.8.5")[0] == 1024
    assert default_max_num_seqs(80 * GIB, "NVIDIA A100-SXM4-80GB", "0.9.2")[0] == 256
    assert default_max_num_seqs(119 * GIB, "NVIDIA GB10", "0.32.0")[0] == 1024
    assert default_max_num_seqs(119 * GIB, "NVIDIA GB10", "0.33.0")[0] == 256
    assert default_max_num_seqs(80 * GIB, "NVIDIA H100 80GB HBM3")[0] == 1024


def test_row14_the_memory_share_default_is_derived_from_the_tables():
    steps = truth.default_steps("vllm", "gpu_memory_utilization")
    assert [(v, d) for v, d in steps if d is not None][-2:] == [("0.6.6.post1", 0.9), ("0.20.2", 0.92)]
    note = get("vllm").notes["gpu_memory_utilization_default"][0]
    assert note == "vLLM's default gpu_memory_utilization is 0.9 up to 0.19 and 0.92 from 0.20."
    import triage.plan.assumptions as plan
    comment = re.sub(r"\s*\n#\s*", " ", open(plan.__file__).read())
    assert "0.9 up to 0.19, 0.92 from 0.20" in comment


def test_row15_tgi_2_0_counts_requests_with_the_old_macro():
    for v in ("2.0.4", "2.1.1"):
        assert truth.metric_names("tgi", v).get("tgi_request_success") == "counter"


def test_row16_sglang_retractions_are_read_where_they_are_counted():
    reader = get("sglang").metrics.signals["num_preemptions_total"]
    assert reader.names == ("sglang:num_retracted_requests_total", "sglang:total_retracted_reqs")
    assert "sglang:total_retracted_reqs" in truth.metric_names("sglang", "0.5.2")
    assert "sglang:num_retracted_requests_total" in truth.metric_names("sglang", "0.5.7")


def test_smaller_rows():
    # SGLang has no time_per_output_token_seconds in any tabled release: not read.
    assert not any("sglang:time_per_output_token_seconds" in n for n in _names_read(get("sglang")))
    # TGI 2.3 turns prefix caching off with USE_PREFIX_CACHING.
    assert "USE_PREFIX_CACHING" in get("tgi").env_off_switches["enable_prefix_caching"]
    # SGLang 0.5.23 has a faster weight reader, 0.5.6 none.
    assert render("fast_load_format", "sglang", None, "0.5.23").text == "--load-format fastsafetensors"
    assert isinstance(_knob("sglang", "fast_load_format", "0.5.6"), NoEquivalent)


def test_ollama_defaults_come_from_its_tags():
    assert truth.default_steps("ollama", "OLLAMA_NUM_PARALLEL") == [("0.1.48", 1), ("0.2.8", 0), ("0.10.1", 1)]
    assert truth.table("ollama", "0.9.6").defaults["OLLAMA_NUM_PARALLEL"] == 0
    knob = get("ollama").batching_knob
    assert knob.default == "1 since 0.10; 0, auto-select, from 0.2" and "default 512" in knob.meaning
    # The claims cite the same boundary at the source: the default changed in 0.10.0 (the tables hold 0.10.1).
    assert claim("ollama.num-parallel-default-1-0.10").ref == "v0.10.0"


def test_llamacpp_tables_read_flags_and_their_environment_twins():
    t = truth.table("llama.cpp", "11434.0.0")
    spec = t.flag("-np")
    assert spec is not None and spec.name == "--parallel" and "LLAMA_ARG_N_PARALLEL" in spec.env
