"""Fix builders: each tuning knob's flag per engine, rendered and checked against the engine truth tables.

Every flag a rule prints goes through `render()`: the flag must exist in the server's version (or, when
the version is unknown, the newest tabled version, which the fix then names) and the value must be one
the engine's parser accepts. Where an engine has no equivalent knob the fix says so instead of printing
a near-miss. Facts: triage/core/engine_truth/*.json (scripts/extract_engine_truth.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import triage.core.engine_truth as engine_truth

LAUNCHERS = {
    "vllm": "vllm serve",
    "sglang": "python -m sglang.launch_server",
    "tgi": "text-generation-launcher",
}
PRETTY = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI"}


@dataclass(frozen=True, slots=True)
class Knob:
    flag: str
    value: str | None = "{v}"    # None: a switch without a value; "{v}" filled from the rule's number
    note: str = ""               # said next to the flag (e.g. what the engine's default already does)


@dataclass(frozen=True, slots=True)
class NoEquivalent:
    reason: str


_NO_SEQ_CAP_TGI = NoEquivalent("its batch is bounded by `--max-batch-total-tokens` (and `--max-batch-size`); "
                               "`--max-concurrent-requests` refuses clients instead of queueing them")

KNOBS: dict[str, dict[str, Knob | NoEquivalent]] = {
    "gpu_memory_utilization": {
        "vllm": Knob("--gpu-memory-utilization"), "sglang": Knob("--mem-fraction-static"),
        # TGI: the launcher's default is 1.0 and KV is sized from fraction x TGI_WIGGLE_ROOM (0.95), so a
        # vLLM-style 0.92 would shrink it. More room on TGI means 1.0: drop any lower setting.
        "tgi": Knob("--cuda-memory-fraction", "1.0",
                    "TGI's default is 1.0 (launcher/src/main.rs); only a lower setting costs KV room"),
    },
    "max_model_len": {"vllm": Knob("--max-model-len"), "sglang": Knob("--context-length"),
                      "tgi": Knob("--max-total-tokens")},
    "max_num_seqs": {"vllm": Knob("--max-num-seqs"), "sglang": Knob("--max-running-requests"),
                     "tgi": Knob("--max-batch-size")},
    "max_num_batched_tokens": {"vllm": Knob("--max-num-batched-tokens"), "sglang": Knob("--chunked-prefill-size"),
                               "tgi": Knob("--max-batch-prefill-tokens")},
    "max_batch_total_tokens": {"tgi": Knob("--max-batch-total-tokens"),
                               "vllm": NoEquivalent("vLLM sizes the batch's KV from gpu_memory_utilization"),
                               "sglang": NoEquivalent("SGLang sizes the KV pool from --mem-fraction-static")},
    "kv_cache_dtype_fp8": {"vllm": Knob("--kv-cache-dtype", "fp8"), "sglang": Knob("--kv-cache-dtype", "fp8_e4m3"),
                           "tgi": Knob("--kv-cache-dtype", "fp8_e4m3fn")},
    "quantization_fp8": {"vllm": Knob("--quantization", "fp8"), "sglang": Knob("--quantization", "fp8"),
                         "tgi": Knob("--quantize", "fp8")},
    # INT4 (AWQ/GPTQ) needs a checkpoint quantized offline: the flag on a 16-bit model fails to load
    # (vllm issue #1419, "Cannot find the config file for awq"). No engine has a ready command for it.
    "quantization_int4": {e: NoEquivalent("INT4 needs a pre-quantized AWQ or GPTQ checkpoint (the engine reads "
                                          "the method from its config); the flag alone fails on a 16-bit model")
                          for e in LAUNCHERS},
    "tensor_parallel_size": {"vllm": Knob("--tensor-parallel-size"), "sglang": Knob("--tp-size"),
                             "tgi": Knob("--num-shard")},
    "enable_chunked_prefill": {"vllm": Knob("--enable-chunked-prefill", None),
                               "sglang": Knob("--chunked-prefill-size", "8192"),
                               "tgi": NoEquivalent("TGI has no chunked-prefill switch (3.x chunks prefills on its "
                                                   "flash backends; backends/v3/src/main.rs)")},
    "enable_prefix_caching": {"vllm": Knob("--enable-prefix-caching", None),
                              "sglang": NoEquivalent("SGLang caches prefixes unless --disable-radix-cache is set"),
                              "tgi": NoEquivalent("TGI sets prefix caching with the PREFIX_CACHING environment "
                                                  "variable, not a flag")},
    "api_server_count": {"vllm": Knob("--api-server-count")},
    "tokenizer_mode_auto": {"vllm": Knob("--tokenizer-mode", "auto"), "sglang": Knob("--tokenizer-mode", "auto")},
    "numa_bind": {"vllm": Knob("--numa-bind", None)},
    "speculative_config": {"vllm": Knob("--speculative-config")},  # JSON; vLLM < 0.8 has no such flag
    "speculative_num_draft_tokens": {"sglang": Knob("--speculative-num-draft-tokens")},
}

# Flags that turn a default-on feature off: the fix is to remove them. Checked by the conformance test.
DISABLING_FLAGS: dict[str, dict[str, str]] = {
    "prefix_caching": {"vllm": "--no-enable-prefix-caching", "sglang": "--disable-radix-cache"},
    "chunked_prefill": {"vllm": "--no-enable-chunked-prefill"},
    "cuda_graphs": {"vllm": "--enforce-eager", "sglang": "--disable-cuda-graph", "tgi": "--cuda-graphs 0"},
}
# Non-flag forms that also turn a feature off (environment variables, newer spellings).
DISABLING_OTHER: dict[str, dict[str, str]] = {
    "prefix_caching": {"tgi": "PREFIX_CACHING=0 (environment)"},
    "cuda_graphs": {"sglang": "--disable-decode-cuda-graph / --cuda-graph-backend-decode disabled (newer SGLang)"},
}


@dataclass(frozen=True, slots=True)
class Rendered:
    engine: str
    knob: str
    text: str | None          # "--flag value", or None when there is nothing to print
    note: str | None          # why not, or what to know next to it
    version: str | None       # the table version it was checked against
    assumed: bool


def render(knob: str, engine: str, value: object = None, version: str | None = None) -> Rendered:
    """One knob for one engine at one version, checked against that version's flags."""
    spec = KNOBS.get(knob, {}).get(engine)
    t = engine_truth.table(engine, version)
    tv, assumed = (t.version, t.assumed) if t else (None, False)
    if spec is None:
        return Rendered(engine, knob, None, f"{PRETTY.get(engine, engine)} has no equivalent of {knob}", tv, assumed)
    if isinstance(spec, NoEquivalent):
        return Rendered(engine, knob, None, spec.reason, tv, assumed)
    val = None if spec.value is None else spec.value.format(v=value)
    if t is not None:
        problem = t.check(spec.flag, val)
        if problem is not None:
            return Rendered(engine, knob, None, problem, tv, assumed)
    text = spec.flag if val is None else f"{spec.flag} {val}"
    return Rendered(engine, knob, text, spec.note or None, tv, assumed)


def _engine_of(engine: Any) -> tuple[str | None, str | None]:
    if engine is None or isinstance(engine, str):
        return engine, None
    return getattr(engine, "name", None), getattr(engine, "version", None)


def engine_flags(knobs: dict[str, object], engine: Any) -> tuple[tuple[str, ...], str]:
    """Commands plus a sentence with the other engines' equivalents and what was assumed.

    `engine`: an EngineInfo (name and version) or an engine name. A known engine gets its flags as the
    commands, checked against its version (the newest tabled one when unknown, which the note names). An
    unknown engine gets a vLLM, SGLang and TGI line each, checked against each one's newest version.
    """
    name, version = _engine_of(engine)
    if name in LAUNCHERS:
        rendered = [render(k, name, v, version) for k, v in knobs.items()]
        cmds = tuple(r.text for r in rendered if r.text)
        notes = [f"{r.note}" for r in rendered if r.note]
        others = []
        for other in LAUNCHERS:
            if other == name:
                continue
            flags = [r.text for r in (render(k, other, v) for k, v in knobs.items()) if r.text]
            if flags:
                others.append(f"{PRETTY[other]}: {' '.join(flags)}")
        note = ""
        if notes:
            note += f" {PRETTY[name]}: {'; '.join(notes)}."
        if cmds and rendered and rendered[0].assumed and rendered[0].version:
            note += (f" Flags as of {PRETTY[name]} {rendered[0].version}"
                     + (" (server version unknown)." if version is None else f" (nearest to {version})."))
        if others:
            note += f" Equivalents: {'; '.join(others)}."
        return cmds, note
    cmds_list, checked = [], []
    for eng, launcher in LAUNCHERS.items():
        rs = [render(k, eng, v) for k, v in knobs.items()]
        flags = [r.text for r in rs if r.text]
        if flags:
            cmds_list.append(f"{launcher} ... {' '.join(flags)}")
            checked.append(f"{PRETTY[eng]} {rs[0].version}")
    why = "engine unknown" if not name else (
        "triage's reference engine, whose `triage serve` takes vLLM's flag names" if name == "reference"
        else f"no flag table for {name}")
    note = f" Flags as of {', '.join(checked)} ({why})." if checked else ""
    return tuple(cmds_list), note


def checked_versions() -> dict[str, list[str]]:
    """The versions every fix is checked against, per engine (tests/test_engine_conformance.py)."""
    return {e: engine_truth.versions(e) for e in LAUNCHERS}
