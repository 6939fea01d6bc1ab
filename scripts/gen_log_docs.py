#!/usr/bin/env python3
"""Write docs/LOGS.md from the engine modules' log facts (triage/engines/*_log.py, runtime_log.py): what each
engine's log tells triage, per version, with the claim that cites each format string. tests/test_log_docs.py
fails when the file is stale.

    python scripts/gen_log_docs.py            # rewrite docs/LOGS.md
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.engines import engines  # noqa: E402
from triage.engines.base import Engine  # noqa: E402
from triage.engines.claims import claim  # noqa: E402
from triage.engines.runtime_log import RUNTIME  # noqa: E402

LOGS_MD = ROOT / "docs" / "LOGS.md"

INTRO = """# Logs as evidence

A server's log usually states its problem in the engine's own words. `triage diagnose --from server.log` reads it
as evidence about the machine that wrote it, with no probe of the host triage runs on:

```bash
triage diagnose --from server.log                          # a log alone
triage diagnose --from server.log.1 --from server.log      # a rotated log, oldest part first
triage diagnose --from report.json                         # a saved report, snapshot or --bundle: replayed
triage diagnose --url http://127.0.0.1:8000 --log server.log   # a live server, with its log beside it
```

- **The kind is told by the content**: a saved report or snapshot (JSON), a `--bundle` (.tar.gz), else a text log.
  A file that is none of these (binary, empty, another JSON document) is one line and exit 2.
- **Pasted logs are made plain first** (`triage/core/log_text.py`): ANSI colours, Markdown (fences, quote
  markers, bold), `docker compose` and `kubectl logs --prefix` prefixes, one JSON record per line (docker's
  `{"log": ...}`, `message`, `msg`, `textPayload`), newest-first order (told by the time stamps), CRLF, and lines
  a page wrapped (read joined to the line they came off). `tests/test_log_paste.py` runs every incident through
  each of these and expects the same findings.
- **Which engine, which version**: the engine whose own lines match most; its version from its banner or config
  line (`vllm serve`'s version line, the engine config line `(vX)`, Ollama's `Listening on ... (version X)`,
  llama.cpp's build line). Once the version is known, only the forms that version prints are read.
- **Several starts in one file** (a pod that restarted): the last start is judged; the earlier ones are counted
  and said in each finding ("the log holds 2 earlier starts").
- **Every finding says where it read it**: `logs.<fact>.at = server.log:L120`, the line itself (redacted), and
  the claim of the format string it matched.
- **Beside a live server** (`--log`), the live `/metrics` window decides what is happening now; the log adds what
  only it states (start-up failures, phases, NCCL) and its history never overrides a live measurement (KV002
  reads the log's preemptions only where no live window measured the counter).

## What the rules judge from a log

| rule | from the log |
|---|---|
| KV007 | vLLM's "max seq len ... larger than the KV cache" at start-up: cap `--max-model-len` at what fits; a larger memory share only where the GPU's size says it fits (at most 0.95) |
| ENG010 | CUDA out of memory (torch, llama.cpp), an engine's own memory error (vLLM's "No available memory for the cache blocks", SGLang's "Not enough memory", TGI's prefill warm-up), with the phase it struck in and a fix per phase |
| KV002 | preemptions: vLLM V0's warning with its running total (a rate from the time stamps), SGLang's retractions |
| KV001 | KV saturation and queueing from the periodic stats lines (vLLM's throughput line, SGLang's batch lines) |
| ENG011 | one start dominated by torch.compile and CUDA-graph capture |
| ENG012 | layers left on the CPU (llama.cpp `offloaded N/M layers`, Ollama's `offload` line and its memory estimate) |
| ENG007 | NCCL warnings, errors and timeouts, classed by NCCL's own error string; its INFO lines (the net plugin's `dlerror` among them) are not errors |
| ENG008, ENG009, NET005 | start-up phases (docs/COLDSTART.md) |
| CPU004 | vLLM's "Using a slow tokenizer" |

A fix is checked before it is printed: the flag against the engine's table at the log's version, a memory share
against the GPU's size where the log states it, tensor parallelism against the GPUs the host has (a log alone
cannot say: the fix says "if the host has them"), online FP8 against the version (vLLM 0.10.2 loads the 16-bit
weights before quantizing them; 0.33.0 quantizes layer by layer).

## Real incidents

`tests/incidents/` holds {num_incidents} logs built from the format strings below, each filled with the figures of a
public issue thread whose cause the thread established (the URL and version are in each file's header), and
`tests/test_log_incidents.py` diagnoses each with the log alone. Regenerate them with `python -m tests.incidents`.

## What each engine's log states, per version

A form is the format string at the cited source lines (`triage rules explain` and `triage engines show` print
the citations). "from" is the first version the form is read at (`-`: every version triage knows); a fact's forms
at a version are those of the newest "from" at or below it, every form when the version is unknown. Where a form
is a leading or shared part of the engine's string, it is the part the cited releases share.
"""

LIMITS = {
    "vllm": "V1 logs no line per preemption before its stats line carried them (0.33 cites `Preemptions: N`; the "
            "first release with it was not read). The memory-profile line states the GPU's size only in V0 and, in "
            "V1, after graph capture. V0's weight-load line is read up to 0.10 (its last release not read).",
    "sglang": "SGLang prints no version line: fixes use its newest table. Its decode-batch line is read in parts; "
              "the prefill-batch line shares those parts.",
    "tgi": "TGI prints no version line, and its `Args {...}` print spans a line per field (read as one block).",
    "llama.cpp": "Its build line is logged at trace verbosity, so a default log may not name the build; its "
                 "fixes are said in words (it has no flag table).",
    "ollama": "From 0.32 Ollama no longer logs its offload estimate; the runner's own llama.cpp lines still say "
              "how many layers are on the GPU.",
    "reference": "The reference engine writes vLLM's KV and stats lines on purpose; its claims cite this "
                 "repository and are checked against the working tree by the tests.",
}


def _facts_table(engine: Engine) -> list[str]:
    rows = ["| fact | from | form | claim |", "|---|---|---|---|"]
    for fact, forms in engine.log_facts.items():
        for form in forms:
            text = form.text.replace("|", "\\|")
            rows.append(f"| {fact} | {form.since or '-'} | `` {text} `` | {form.claim} ({claim(form.claim).citation}) |")
    return rows


def render() -> str:
    incidents = len(list((ROOT / "tests" / "fixtures" / "incidents").glob("*.log")))
    out = [INTRO.replace("{num_incidents}", str(incidents))]
    for engine in (*[e for e in engines() if e.log_facts], RUNTIME):
        out += ["", f"### {engine.display}", ""]
        if engine.name in LIMITS:
            out += [f"What it cannot tell: {LIMITS[engine.name]}", ""]
        if engine.startup_order:
            out += [f"Start-up phases in order (a failure struck in the one after the last that ended): "
                    f"{', '.join(engine.startup_order)}.", ""]
        out += _facts_table(engine)
    return "\n".join(out) + "\n"


def main() -> int:
    LOGS_MD.write_text(render(), encoding="utf-8")
    print(f"wrote {LOGS_MD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
