"""Start-up phase markers against log captures: real ones for the reference engine and llama-server, and for
vLLM, SGLang and TGI lines built from the format strings in their source (the files say BUILT)."""
from __future__ import annotations

from pathlib import Path

import pytest

from triage.engines import get, ledger
from triage.engines.startup import startup_markers
from triage.engines.startup_log import compile_marker, guess_engine, parse_startup
from triage.probes.logs import probe_logs

FIXTURES = Path(__file__).parent / "fixtures" / "coldstart"


def _parse(name: str, engine: str, version: str | None = None):
    lines = [(None, line) for line in (FIXTURES / name).read_text().splitlines()]
    return parse_startup(lines, get(engine), version)


def _phases(startup) -> dict[str, float | None]:
    return {p.phase: p.seconds for p in startup.phases}


def test_built_fixtures_say_they_are_built_and_the_real_ones_are_not():
    for path in FIXTURES.glob("*.built.log"):
        assert path.read_text().startswith("# BUILT, not captured")
    for name in ("reference_startup.log", "llamacpp_startup.log"):
        assert "BUILT" not in (FIXTURES / name).read_text()


def test_real_reference_engine_start_is_broken_into_its_phases():
    s = _parse("reference_startup.log", "reference")
    assert [p.phase for p in s.phases] == ["process", "weight_load", "kv_alloc", "warmup", "api_server"]
    load = s.phase("weight_load")
    assert (load.seconds, load.logged, load.bytes) == (2.122, True, 0)   # generated weights: nothing read
    assert load.bandwidth_bytes_per_s is None
    assert s.phase("kv_alloc").bytes == 134217728
    assert s.phase("warmup").seconds == 0.031
    assert s.ready_s == 4.0                                  # to uvicorn's "Started server process"


def test_real_llama_server_start_uses_its_own_clock():
    s = _parse("llamacpp_startup.log", "llama.cpp")
    assert _phases(s) == {"process": 0.007, "weight_load": 0.037, "kv_alloc": 0.005, "api_server": 0.01}
    assert s.ready_s == 0.059 and s.phases_total_s == 0.059


def test_vllm_0_10_takes_the_download_out_of_the_model_load():
    s = _parse("vllm-0.10.2.built.log", "vllm", "0.10.2")
    phases = _phases(s)
    assert phases["download"] == 92.512
    assert phases["weight_load"] == pytest.approx(107.931 - 92.512, abs=1e-3)
    assert phases["compile"] == 25.31 and phases["cuda_graph"] == 16.0
    assert s.phase("kv_alloc").bytes == int(52.31 * 2**30)
    assert s.ready_s == 162.0
    assert s.download_s_each_start == [92.512] and s.compile_s_each_start == [25.31]


def test_vllm_0_33_reads_compile_from_the_init_engine_line_inside_the_memory_profile():
    s = _parse("vllm-0.33.0.built.log", "vllm", "0.33.0")
    phases = _phases(s)
    assert phases["weight_load"] == 15.412 and s.phase("weight_load").bytes == int(15.27 * 2**30)
    assert phases["compile"] == 9.75
    assert phases["kv_alloc"] == pytest.approx(11.0 - 9.75)       # the profile's 11 s less the compile in it
    assert phases["cuda_graph"] == 12.0
    assert s.phases_total_s <= s.ready_s == 46.0


def test_sglang_reads_seconds_and_bytes_from_its_f_strings():
    s = _parse("sglang-0.5.9.built.log", "sglang", "0.5.9")
    assert s.phase("weight_load").seconds == 22.41
    assert s.phase("weight_load").bytes == int(15.30 * 2**30)         # mem usage, not the avail mem before it
    assert s.phase("cuda_graph").seconds == 18.05
    assert s.ready_s == 58.0 and abs(s.phases_total_s - s.ready_s) / s.ready_s < 0.1


def test_tgi_warm_up_inside_the_webserver_phase_is_taken_out_of_it():
    s = _parse("tgi-3.3.7.built.log", "tgi", "3.3.7")
    phases = _phases(s)
    assert phases["download"] == 90.4
    assert phases["weight_load"] == 25.301                          # Rust's Duration, "25.301234567s"
    assert phases["warmup"] == 14.1 and phases["api_server"] == pytest.approx(0.3, abs=1e-3)
    assert s.ready_s == 130.4


def test_tgi_2_0_download_lines_differ_and_follow_the_version():
    old = get("tgi")
    assert startup_markers(old, "2.0.4")[("download", "begin")] == ("Starting download process.",)
    assert startup_markers(old, "3.3.7")[("download", "begin")] == ("Starting check and download process for {model_id}",)
    lines = [(None, "2024-05-01T10:00:00.0Z  INFO download: text_generation_launcher: Starting download process."),
             (None, "2024-05-01T10:00:42.5Z  INFO download: text_generation_launcher: Successfully downloaded weights.")]
    assert _phases(parse_startup(lines, old, "2.0.4"))["download"] == 42.5


def test_every_startup_marker_of_the_tabled_engines_is_cited_in_the_ledger():
    for name in ("vllm", "sglang", "tgi", "llama.cpp"):
        engine = get(name)
        sentence, claims = engine.notes["startup_phases"]
        assert claims and all(c in ledger() for c in claims)
        assert len(startup_markers(engine)) >= 4


def test_a_marker_placeholder_takes_its_unit_from_the_word_after_it():
    m = compile_marker("cuda_graph", "end", "Graph capturing finished in %.0f secs, took %.2f GiB")
    assert m.units == ("s", "bytes:gib")
    assert m.pattern.search("Graph capturing finished in 16 secs, took 0.54 GiB")


def test_the_log_probe_names_the_engine_and_puts_the_startup_in_the_report():
    r = probe_logs(str(FIXTURES / "sglang-0.5.9.built.log"))
    assert r.data.startup.engine == "sglang"
    assert [p.phase for p in r.data.startup.phases][:2] == ["process", "weight_load"]
    lines = [(None, line) for line in (FIXTURES / "tgi-3.3.7.built.log").read_text().splitlines()]
    assert guess_engine(lines, (get("vllm"), get("tgi"), get("sglang"))).name == "tgi"


def test_two_starts_in_one_log_are_counted_and_the_last_is_kept():
    text = (FIXTURES / "vllm-0.10.2.built.log").read_text()
    lines = [(None, line) for line in (text + text.replace("92.512345", "88.0")).splitlines()]
    s = parse_startup(lines, get("vllm"), "0.10.2")
    assert s.num_starts == 2 and s.download_s_each_start == [92.512, 88.0]
    assert s.compile_s_each_start == [25.31, 25.31]


def test_a_long_log_is_filtered_to_candidate_lines_without_changing_the_phases():
    from triage.engines import engines
    from triage.engines.startup_log import candidate_lines

    built = (FIXTURES / "vllm-0.10.2.built.log").read_text().splitlines()
    noise = [f"INFO 11-27 10:00:{i % 60:02d} [loggers.py:123] Avg prompt throughput: 12.5 tokens/s" for i in range(5000)]
    lines = built[:5] + noise[:2500] + built[5:] + noise[2500:]
    kept = candidate_lines(lines, engines())
    assert len(kept) < 30
    full = parse_startup([(None, x) for x in lines], get("vllm"), "0.10.2")
    short = parse_startup([(None, x) for x in kept], get("vllm"), "0.10.2")
    assert _phases(full) == _phases(short) and full.ready_s == short.ready_s == 162.0


def test_vllm_markers_follow_the_version_and_engines_show_lists_them():
    import json

    from typer.testing import CliRunner

    from triage.cli import app

    vllm = get("vllm")
    # Each release's own wording (claims vllm.log-load-took-0.10 and vllm.log-load-took, cited at both ends).
    assert startup_markers(vllm, "0.10.2")[("weight_load", "end")] == ("Model loading took %.4f GiB and %.6f seconds",)
    assert startup_markers(vllm, "0.13.0")[("weight_load", "end")] == (
        "Model loading took %.4f GiB memory and %.6f seconds",)
    assert startup_markers(vllm, "0.8.1")[("weight_load", "end")] == ("Model loading took %.4f GB and %.6f seconds",)
    assert startup_markers(vllm, "0.14.1")[("weight_load", "end")] == (
        "Model loading took %s GiB memory and %.6f seconds", "Model loading took %s GiB and %.6f seconds")
    assert startup_markers(vllm, "0.17.1")[("compile", "end")] == ("torch.compile takes %.2f s in total",)
    assert startup_markers(vllm, "0.20.2")[("compile", "end")] == ("(compilation: %.2f s)",)
    res = CliRunner().invoke(app, ["engines", "show", "vllm", "--version", "0.18.0", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["startup_markers"]["api_server.begin"] == ["Starting vLLM server on %s"]


def test_a_log_with_restarts_gives_how_long_each_replica_ran_and_eng009_weighs_the_warmup():
    """Three vLLM 0.33.0 starts four minutes apart (a built log): each replica ran 240 s and spent 9.75 s
    compiling and 12 s capturing (9% of its life): below ENG009's 10% share, so the rule stays quiet."""
    from triage.core.snapshot import Snapshot
    from triage.probes.logs import probe_logs
    from triage.rules import evaluate

    result = probe_logs(str(Path(__file__).parent / "fixtures" / "coldstart" / "vllm-0.33.0-restarts.built.log"))
    startup = result.data.startup
    assert startup.num_starts == 3 and startup.start_gaps_s == (240.0, 240.0)
    assert "ENG009" not in {f.code for f in evaluate(Snapshot(probes=(result,))).findings}
