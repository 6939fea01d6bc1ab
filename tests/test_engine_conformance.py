"""Conformance: every flag a rule can print exists in the engine version it is printed for, with a value
that version's parser accepts (triage/engines/truth, extracted from the engines' own source).

Two walks: (1) every knob x engine x tabled version through the fix builder; (2) every rule fixture,
re-run as if the server were each engine at each tabled version (and at an unknown version), with every
`--flag value` in the fix's commands and text checked against that version's table. A planted wrong flag
(or a removed one such as vLLM's --swap-space on 0.18+) fails here.
"""
from __future__ import annotations

import dataclasses
import re
import shlex

import pytest

import triage.engines.truth as et
from tests.factories import fix_lines
from tests.rules_fixtures import FIXTURES, load_case
from triage.engines import get
from triage.engines.truth import version_key
from triage.rules import evaluate
from triage.rules.engine_flags import DISABLING_FLAGS, KNOBS, LAUNCHERS, Knob, NoEquivalent, render

ENGINE_VERSIONS = [(e, v) for e in LAUNCHERS for v in et.versions(e)]
SAMPLE = {"gpu_memory_utilization": "0.92", "max_model_len": 8192, "max_num_seqs": 256,
          "max_num_batched_tokens": 8192, "max_batch_total_tokens": 65536, "tensor_parallel_size": 2,
          "api_server_count": 2, "dtype": "bfloat16"}
_LAUNCHER_OF = {"vllm serve": "vllm", "sglang.launch_server": "sglang", "text-generation-launcher": "tgi"}


def _is_engine_command(text: str) -> bool:
    """Bare flags (`--max-num-seqs 256`) or an engine launcher line; other tools' flags are not ours."""
    return text.startswith("-") or any(m in text.split("...")[0] for m in _LAUNCHER_OF)


def _known_anywhere(name: str) -> bool:
    return any(et.table(e, v).flag(name) is not None for e, v in ENGINE_VERSIONS)


def problems_in(command: str, engine: str, version: str | None) -> list[str]:
    """Every flag in `command` that `engine` at `version` would reject."""
    text = command.strip()
    if not _is_engine_command(text):
        return []
    for marker, eng in _LAUNCHER_OF.items():
        head, found, rest = text.partition(marker)
        if found and "..." not in head:
            if eng != engine:              # another engine's line: checked at that engine's newest table
                engine, version = eng, None
            text = rest                    # the launcher itself (`python -m ...`) is no flag of the engine
    t = et.table(engine, version)
    try:
        tokens = shlex.split(text.replace("...", " "))
    except ValueError:
        tokens = text.split()
    out = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", tok):
            name, eq, inline = tok.partition("=")
            spec = t.flag(name)
            if spec is None:
                out.append(f"{name} does not exist in {engine} {t.version}")
            else:
                value = inline if eq else None
                if spec.takes_value and not eq and i + 1 < len(tokens):
                    value = tokens[i + 1]
                    i += 1
                problem = t.check(name, value)
                if problem:
                    out.append(problem)
        i += 1
    return out


def test_the_tables_cover_the_versions_the_issue_asks_for():
    assert len(et.versions("vllm")) >= 7 and len(et.versions("sglang")) >= 3 and len(et.versions("tgi")) >= 2
    for engine, version in ENGINE_VERSIONS:
        prov = et.table(engine, version).provenance
        assert prov["files"] and all(len(sha) == 64 for sha in prov["files"].values())
        assert prov.get("archive_sha256") or prov.get("commit")


@pytest.mark.parametrize("engine,version", ENGINE_VERSIONS)
def test_every_knob_renders_a_flag_the_version_accepts(engine, version):
    t = et.table(engine, version)
    for knob in KNOBS:
        r = render(knob, engine, SAMPLE.get(knob), version)
        spec = get(engine).knob(knob, version)   # the form this version has (TGI 3.x: no --max-batch-size)
        if r.text is None:
            # No near-miss: the fix says why instead.
            assert r.note, f"{knob} on {engine} {version}: nothing printed and nothing said"
            if isinstance(spec, Knob):
                assert t.flag(spec.flag) is None or t.check(spec.flag, spec.value and spec.value.format(
                    v=SAMPLE.get(knob))) is not None
            continue
        assert not isinstance(spec, NoEquivalent)
        if not spec.is_env:
            assert problems_in(r.text, engine, version) == [], (knob, engine, version)
        else:
            # In the table's environment variables, or (SGLang's tables list none) cited from the source.
            assert r.text.split("=")[0] in t.env or version_key(version) >= (2, 4, 0) or (not t.env and spec.claims), (
                knob, engine, version)


def test_every_knob_flag_exists_in_the_newest_release():
    """A knob's flag may be missing from old releases (the fix then says so), never from the newest."""
    for knob, per_engine in KNOBS.items():
        for engine, spec in per_engine.items():
            if isinstance(spec, Knob) and not spec.is_env:
                t = et.table(engine)
                assert t.flag(spec.flag) is not None, f"{knob}: {spec.flag} is not a {engine} {t.version} flag"
                value = None if spec.value is None else spec.value.format(v=SAMPLE.get(knob, 1))
                assert t.check(spec.flag, value) is None, (knob, engine, t.check(spec.flag, value))


def test_disabling_flags_exist_where_they_are_named():
    for feature, per_engine in DISABLING_FLAGS.items():
        for engine, text in per_engine.items():
            assert any(problems_in(text, engine, v) == [] for v in et.versions(engine)), (feature, engine, text)


FILES = sorted(FIXTURES.glob("*/*.json"))


def _fix_commands(result) -> tuple[list[str], list[str]]:
    """(the fixes' commands, the flag names quoted in their text)."""
    cmds, quoted = [], []
    for f in result.findings:
        if f.fix is None:
            continue
        cmds += list(fix_lines(f.fix))
        quoted += re.findall(r"`(--[a-z0-9-]+)", f.fix.text)
    return cmds, quoted


# Flags of triage's own reference engine (`triage serve`), named in fixes next to the engines' ones.
_REFERENCE_FLAGS = {"--num-kv-blocks"}


def sampled_versions(engine: str) -> list[str | None]:
    """Several versions per engine for the fixture walk: unknown, the oldest, the newest, every third table
    between them, and the releases where a knob changes form (Since steps)."""
    versions = et.versions(engine)
    steps = {s.version for per in get(engine).knobs.values() for s in per if s.version}
    picked = [v for i, v in enumerate(versions) if i % 3 == 0 or i == len(versions) - 1
              or any(version_key(v)[:2] == version_key(s)[:2] for s in steps)]
    return [None, *picked]


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_rule_fixes_conform_for_every_engine_and_version(path):
    snap, bench, baseline, config, _ = load_case(path)
    failures = []
    for engine in LAUNCHERS:
        for version in sampled_versions(engine):
            cfg = dataclasses.replace(config, target_engine=engine, target_engine_version=version)
            result = evaluate(snap, bench=bench, baseline=baseline, config=cfg)
            cmds, quoted = _fix_commands(result)
            for cmd in cmds:  # commands are pasted: strict, for this engine at this version
                failures += [f"{engine} {version or '(unknown)'}: {p}  [{cmd}]"
                             for p in problems_in(cmd, engine, version)]
            # Flags named in the text may be another engine's equivalent: each must exist somewhere.
            failures += [f"text names {q}, which no tabled engine version has" for q in quoted
                         if q not in _REFERENCE_FLAGS and not _known_anywhere(q)]
    assert not failures, "\n".join(sorted(set(failures))[:20])
