"""A fix runs as printed: every `$` line is a complete command (the server's own, with the fix's flags set on
it; or a whole `triage plan --model M --gpu G`), and flags for a command line triage has not seen are flags,
not commands. The headline finding is the most specific cause: a block-count override before what it causes."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import offers
from tests.rule_cases._build import cfg, metrics, process, snapshot
from tests.rules_fixtures import load_case
from triage.core.report import Fix
from triage.rules import RulesConfig, evaluate
from triage.rules.fix_commands import complete, is_fragment, with_settings

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "rules").glob("*/*.json"))


def test_a_setting_replaces_the_old_value_in_every_spelling():
    argv = ["vllm", "serve", "m", "--max-model-len=8192", "--gpu-memory-utilization", "0.8", "--no-enable-prefix-caching"]
    assert with_settings(argv, ["--max-model-len 4096", "--gpu-memory-utilization 0.92", "--enable-prefix-caching"]) \
        == "vllm serve m --max-model-len 4096 --gpu-memory-utilization 0.92 --enable-prefix-caching"
    assert with_settings(["ollama", "serve"], ["OLLAMA_NUM_PARALLEL=4"]) == "OLLAMA_NUM_PARALLEL=4 ollama serve"
    assert with_settings(["llama-server", "-m", "x.gguf", "-np", "1"], ["-np 4"]) == "llama-server -m x.gguf -np 4"


def test_flags_become_one_command_where_the_command_is_known_and_stay_flags_elsewhere():
    fix = Fix("raise it", ("--max-num-seqs 512", "triage plan --model llama-3.1-8b --gpu h100-sxm"))
    known = complete(fix, ("vllm", "serve", "m", "--max-num-seqs", "256"))
    assert known.commands == ("triage plan --model llama-3.1-8b --gpu h100-sxm", "vllm serve m --max-num-seqs 512")
    unknown = complete(fix, None)
    assert unknown.commands == ("triage plan --model llama-3.1-8b --gpu h100-sxm",)
    assert unknown.flags == ("--max-num-seqs 512",) and offers(unknown, "--max-num-seqs 512")


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.name}/{p.stem}" for p in FIXTURES])
def test_every_printed_command_is_complete(path):
    snap, bench, baseline, config, _ = load_case(path)
    for f in evaluate(snap, bench=bench, baseline=baseline, config=config).findings:
        for command in f.fix.commands:
            assert not is_fragment(command) and " ... " not in command, (f.code, command)
            if command.startswith("triage plan"):
                assert "--model " in command and "--gpu " in command, (f.code, command)
        assert all(is_fragment(flag) for flag in f.fix.flags), (f.code, f.fix.flags)


def test_an_override_that_pins_the_cache_is_the_headline_and_explains_what_it_causes():
    """The demo's undersized server: --num-kv-blocks 40 under max_model_len 1024, preempting. The block-count
    override comes first; "the model does not fit" (QUANT002, whose fix is to quantize) is not said."""
    argv = ("triage", "serve", "--num-kv-blocks", "40", "--max-model-len", "1024", "--no-enable-prefix-caching")
    snap = snapshot(cfg(engine="reference", engine_version="0.1.0", max_model_len=1024, model="tiny"),
                    process(engine="reference", cmdline=argv),
                    metrics("cache_config", num_gpu_blocks=40, num_gpu_blocks_override=40),
                    metrics(num_preemptions_delta=9), drop=("logs",))
    findings = evaluate(snap, config=RulesConfig()).findings
    codes = [f.code for f in findings]
    assert codes[0] == "KV008" and "QUANT002" not in codes, codes
    head = findings[0]
    assert "KV002" in head.explains
    assert head.fix.commands == ("triage serve --max-model-len 1024 --no-enable-prefix-caching",)
    # The reference engine takes vLLM's flag names: its fixes are set on its own command, not `vllm serve`.
    assert not any(c.startswith("vllm serve") for f in findings for c in f.fix.commands)
