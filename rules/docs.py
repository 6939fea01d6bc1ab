"""The rule reference as Markdown (docs/RULES.md is this output; a test keeps them in sync)."""
from __future__ import annotations

from triage.rules.base import DOC_SECTIONS, DOC_TITLES
from triage.rules.registry import REGISTRY
from triage.rules.thresholds import THRESHOLDS


def _fmt(value: float) -> str:
    return f"{value:g}" if value < 1e6 else f"{value:.3g}"


def render_markdown() -> str:
    lines = ["# triage rules", "",
             "Generated from the registry by `python -m triage.rules.docs > docs/RULES.md`; "
             "`triage rules explain CODE` prints one rule. Codes never change meaning and are never reused.",
             "", "## Severity policy", "",
             "A finding above LOW needs evidence of a symptom on this deployment: latency or throughput "
             "(from a bench or the server's histograms), queueing (waiting or deferred requests), memory "
             "pressure (KV usage, preemptions, OOM), errors, or a hardware fault. A better configuration "
             "with no symptom (FP8 on Hopper, one llama.cpp slot on an idle server) is an *opportunity*: "
             "the finding carries `kind: opportunity`, its severity is capped at LOW by the rules engine "
             "(`rules/evaluate.py`), and the renderers list it in its own section. A healthy deployment "
             "shows nothing above LOW; `tests/test_severity_policy.py` checks both.",
             "", "| code | name | default severity | inputs | what it checks |", "|---|---|---|---|---|"]
    for r in REGISTRY:
        lines.append(f"| [{r.code}](#{r.code.lower()}) | {r.name} | {r.severity.value} | "
                     f"{', '.join(i.replace('|', ' or ') for i in r.inputs)} | {r.summary} |")
    for r in REGISTRY:
        lines += ["", f"## {r.code}", "", f"`{r.name}`, default severity **{r.severity.value}**, inputs: "
                  f"{', '.join('`' + i.replace('|', '` or `') + '`' for i in r.inputs)}."]
        for key in DOC_SECTIONS:
            lines += ["", f"**{DOC_TITLES[key]}.**", "", r.doc.section(key)]
        if r.thresholds:
            lines += ["", "**Thresholds** (override in `triage.toml` under `[thresholds]`):", ""]
            for key in r.thresholds:
                t = THRESHOLDS[key]
                lines.append(f"- `{key}` = {_fmt(t.value)} {t.unit}: {t.meaning} (source: {t.source})")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    import triage.rules  # noqa: F401  (registers every rule)

    sys.stdout.write(render_markdown())
