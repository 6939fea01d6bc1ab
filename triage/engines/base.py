"""The shape of what triage knows about one serving engine. Pure data plus small pure functions: no I/O.

Every fact an engine module states about the engine's behaviour carries the ids of the claims that show it
(`claims.py`: a sentence, the engine's repository or package, the tag or version, the path and the line range,
and a hash of those lines).
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triage.engines.truth import version_key

Version = tuple[int, int, int]


class Feature(str, enum.Enum):
    """A default-on engine feature a flag can turn off (`Engine.disabling`), or whose default `default_on_fn`
    decides. A str, so an engine module may key its tables by the plain name."""

    PREFIX_CACHING = "prefix_caching"
    CHUNKED_PREFILL = "chunked_prefill"
    CUDA_GRAPHS = "cuda_graphs"


@dataclass(frozen=True, slots=True)
class Knob:
    """A flag (or environment variable) that sets a tuning knob."""

    flag: str
    value: str | None = "{v}"    # None: a switch without a value; "{v}" filled from the rule's number
    note: str = ""               # said next to the flag (e.g. what the engine's default already does)
    claims: tuple[str, ...] = ()
    is_env: bool = False         # an environment variable of the server process, not a flag


@dataclass(frozen=True, slots=True)
class NoEquivalent:
    """The engine has no such knob, or the flag that looks like it does not do it: the reason, said instead."""

    reason: str
    claims: tuple[str, ...] = ()


Spec = Knob | NoEquivalent


@dataclass(frozen=True, slots=True)
class Since:
    """`spec` applies from `version` on (None: from the first version triage knows) until the next Since."""

    version: str | None
    spec: Spec


@dataclass(frozen=True, slots=True)
class BatchingKnob:
    """The setting that bounds how many requests an engine runs at once (engines without a flag table)."""

    flag: str                     # as typed on the command line, or an environment variable
    is_env: bool                  # True: an environment variable of the server process
    default: str                  # the engine's default, as its source states it
    meaning: str
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EndpointSignal:
    """A JSON answer only this engine gives: GET `path` returns an object with every key of `keys` (and one of
    `any_keys` when given; `equals` pins values). `version_key` names the field that carries its version."""

    path: str
    keys: tuple[str, ...] = ()
    any_keys: tuple[str, ...] = ()
    equals: tuple[tuple[str, str], ...] = ()
    version_key: str | None = None
    what: str = ""

    def matches(self, body: Any) -> bool:
        if not isinstance(body, dict) or not all(k in body for k in self.keys):
            return False
        if self.any_keys and not any(k in body for k in self.any_keys):
            return False
        return all(str(body.get(k)) == v for k, v in self.equals)


@dataclass(frozen=True, slots=True)
class Launch:
    """One way a command line launches the engine: a word (its file name), optionally followed by one of
    `then`; or an argument starting with `prefix` (`python -m vllm.entrypoints.openai.api_server`)."""

    word: str | None = None
    then: tuple[str, ...] | None = None
    prefix: str | None = None

    def matches(self, arg: str, base: str, following: str) -> bool:
        if self.prefix is not None:
            return arg.startswith(self.prefix)
        return base == self.word and (self.then is None or following in self.then)


@dataclass(frozen=True, slots=True)
class Identity:
    """How the engine shows itself on the wire and in `ps`."""

    metric_prefixes: tuple[str, ...] = ()
    server_header: str | None = None          # the exact `Server:` response header value
    version_path: str | None = None           # GET path answering {"version": ...}
    openapi_paths: tuple[str, ...] = ()       # routes in /openapi.json only this engine serves
    owned_by: str | None = None               # `owned_by` of its /v1/models entries
    launches: tuple[Launch, ...] = ()         # the command lines that start it (probes/discovery.py)
    images: tuple[str, ...] = ()              # container images whose entrypoint is its launcher (`docker run IMG ARGS`)
    worker_marks: tuple[str, ...] = ()        # text in a worker process's name or argv (walked up to the server)
    endpoints: tuple[EndpointSignal, ...] = ()
    exports_metrics_of: str | None = None     # it exports another engine's metric names on purpose
    has_slots: bool = False                   # llama-server's /props and /slots describe its slots
    health_path: str = "/health"              # answers 200 once it serves (`triage coldstart` polls it)
    source: str = ""                          # where these were read


@dataclass(frozen=True, slots=True)
class Milestone:
    """A release from which the engine does something better by default: ENG005 names it to a user on an
    older version. `gpu_major`: only on that GPU generation; `needs_choice`: only when the server chose this
    (an --attention-backend value or its environment variable), since the default is something else."""

    version: str                    # the first release (minor) with it
    what: str                       # "FlashAttention 3 on Hopper (SM90)"
    gpu_major: int | None = None
    needs_choice: str | None = None
    major_change: bool = False      # a whole engine generation (vLLM V1): MEDIUM, not LOW
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LogForm:
    """A line the engine logs, as its source writes it (`%d`, `%.2f`, `%s`, `{}`, `{name:.2f}` placeholders), from
    `since` on (None: every version triage knows) until the next form of the same fact. `fields` names the
    placeholders in order (the log fact's typed values); `claim` is the ledger claim citing the source lines."""

    since: str | None
    text: str
    claim: str
    fields: tuple[str, ...] = ()


DefaultOn = Callable[[str, "Version | None", bool, bool], "bool | None"]


def _unknown_default(feature: str, version: Version | None, v0: bool, v1_metrics: bool) -> bool | None:
    return None


@dataclass(frozen=True)
class Engine:
    name: str                                  # triage's engine id
    display: str
    aliases: tuple[str, ...] = ()              # other spellings that mean this engine
    launcher: str | None = None                # the command a fix is written for; None: no flag table
    identity: Identity = Identity()
    batches: bool = True                       # batches concurrent requests with its defaults
    batching_knob: BatchingKnob | None = None
    knobs: dict[str, tuple[Since, ...]] = field(default_factory=dict)
    disabling: dict[str, str] = field(default_factory=dict)        # feature -> the flag that turns it off
    disabling_other: dict[str, str] = field(default_factory=dict)  # feature -> other forms that turn it off
    default_on_fn: DefaultOn = _unknown_default
    # What its memory-share knob measures: "total" (all the GPU memory the engine may take: vLLM, TGI) or
    # "static" (weights + KV only, activations and CUDA graphs reserved apart: SGLang).
    memory_share: str = "total"
    log_markers: dict[str, tuple[tuple[str | None, str], ...]] = field(default_factory=dict)
    # What its log states beyond the start-up phases (triage/engines/log_facts.py): fact -> its forms by version.
    log_facts: dict[str, tuple[LogForm, ...]] = field(default_factory=dict)
    # The start-up phases (startup.PHASES) in the order this engine goes through them: the phase a failure
    # struck in is the one after the last phase the log saw end.
    startup_order: tuple[str, ...] = ()
    # The log's config line (vLLM's engine config, SGLang's server_args, TGI's Args): keys that are not a flag's
    # name with dashes, and the flag they stand for.
    log_config_keys: dict[str, str] = field(default_factory=dict)
    fp8_min_capability: Version | None = None  # smallest compute capability it runs FP8 weights/KV natively on
    notes: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # fact id -> (sentence, claims)
    milestones: tuple[Milestone, ...] = ()
    upgrade: str | None = None                 # the upgrade command, "{v}" the version to reach
    prefix_caching_per_model: bool = False     # its prefix-caching default is decided per model at startup
    flags_like: str | None = None              # its command takes another engine's flag names (reference: vllm)
    # Does this version (and what its /metrics say it is, e.g. "vllm-v0") run a legacy engine generation?
    legacy_fn: Callable[[Version | None, str], bool] | None = None
    # Engines that can be configured to run one request at a time: why this one is (from the identity probe's
    # EngineIdentityData), or None; and the fix, (text, commands), for `slots` parallel requests of `model`.
    one_at_a_time_fn: Callable[[Any], tuple[str, dict[str, Any]] | None] | None = None
    batching_fix_fn: Callable[[Any, int, str], tuple[str, tuple[str, ...]]] | None = None
    # How its command line maps to triage's ServerConfigData fields: flag -> (field, kind), kind one of int,
    # float, str, json, bool (present = True), nobool (present = False), eager_if_disabled.
    config_flags: dict[str, tuple[str, str]] = field(default_factory=dict)
    config_defaults: dict[str, Any] = field(default_factory=dict)     # defaults that held across releases
    versioned_defaults: tuple[str, ...] = ()   # fields whose default the truth table of that version gives
    model_after: str | None = None             # the positional model follows this word (`vllm serve MODEL`)
    config_file_flag: str | None = None        # a YAML file of flags (vLLM --config)
    env_twins: bool = False                    # every flag can be set from an environment variable (TGI, clap)
    # Its argparse parser takes a unique prefix of a flag (`--tp` for `--tp-size`): the claim that shows it.
    abbreviated_flags: str | None = None
    # Environment variables that turn a ServerConfigData switch off when "0" or "false" (TGI's PREFIX_CACHING).
    env_off_switches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Settings its own endpoints report: path -> {JSON key: ServerConfigData field} (TGI /info).
    config_endpoints: dict[str, dict[str, str]] = field(default_factory=dict)
    # Defaults implied by what its /metrics say it is (vLLM V1: chunked prefill and prefix caching on).
    metrics_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A last look at the parsed flags (SGLang: --chunked-prefill-size -1 turns chunking off).
    config_fixup_fn: Callable[[dict[str, Any]], None] | None = None
    metrics: Any = None                        # its MetricMap (triage/engines/metrics.py), or None
    # `diagnose --prometheus`: signal -> PromQL over a window (triage/engines/promql.py), and the metric whose
    # presence says a Prometheus holds this engine.
    history_queries: dict[str, str] = field(default_factory=dict)
    history_marker: str | None = None
    # Its batching settings from argv and environment: {slots, continuous, ctx_tokens, max_queue, evidence}.
    read_batching_fn: Callable[[Any, Any], dict[str, Any]] | None = None
    rank: int = 100                            # listing order: the engines with flag tables first
    # How far to raise the memory-share knob: (current, VRAM bytes, the usual target) -> (value or None, why).
    memory_target_fn: Callable[[float | None, float | None, float], tuple[float | None, str]] | None = None
    # Its deployment's shape in /metrics: data-parallel ranks, disaggregation role, KV transfer and offload
    # (triage/engines/topology_map.py), or None.
    topology: Any = None

    def knob(self, knob: str, version: str | None = None) -> Spec | None:
        """The flag for `knob` at `version` (the newest form when the version is unknown); None: not known."""
        steps = self.knobs.get(knob)
        if not steps:
            return None
        want = version_key(version)
        chosen = steps[-1].spec if want is None else None
        if want is not None:
            for step in steps:
                if step.version is None or (version_key(step.version) or (0, 0, 0)) <= want:
                    chosen = step.spec
        return chosen

    def launch_command(self, model: str) -> str | None:
        """The command that serves `model` with this engine (`vllm serve M`, `text-generation-launcher --model-id
        M`), from its launcher and the flag its command line reads the model from; None without a launcher."""
        if self.launcher is None:
            return None
        if self.model_after is not None:
            return f"{self.launcher} {model}"
        flag = next((f for f, (name, _) in self.config_flags.items() if name == "model" and f.startswith("--")), None)
        return f"{self.launcher} {flag} {model}" if flag else None

    def default_on(self, feature: str, version: str | None, v0: bool = False, v1_metrics: bool = False) -> bool | None:
        """Is `feature` ('chunked_prefill' | 'prefix_caching') on by default here? None: unknown."""
        return self.default_on_fn(feature, version_key(version), v0, v1_metrics)

    def memory_share_target(self, current: float | None, vram_bytes: float | None,
                            usual: float) -> tuple[float | None, str]:
        """The memory-share value to propose, or None with the reason. "total" engines: the usual target (vLLM's
        0.92) when the current share is lower or unknown."""
        if self.memory_target_fn is not None:
            return self.memory_target_fn(current, vram_bytes, usual)
        if current is not None and current >= usual:
            return None, f"the memory share is already {current}"
        return usual, f"raise the memory share for KV to {usual:.2f}" + (f" (now {current})" if current is not None else "")

    def log_marker(self, what: str, version: str | None = None) -> tuple[str, ...]:
        """The log lines that mark `what` (e.g. 'api_server_start'); every known form when the version is
        unknown, else the forms of the newest release at or below that version (a release may log one of
        several forms, e.g. vLLM's logo or its plain line)."""
        return tuple(dict.fromkeys(_at_version(self.log_markers.get(what, ()), version)))

    def log_fact(self, what: str, version: str | None = None) -> tuple[LogForm, ...]:
        """The forms of log fact `what` at `version`, chosen as `log_marker` chooses (every form when unknown)."""
        forms = self.log_facts.get(what, ())
        return tuple(_at_version(tuple((f.since, f) for f in forms), version))

    def cited(self) -> tuple[str, ...]:
        """Every claim id this module cites."""
        ids: list[str] = []
        for steps in self.knobs.values():
            for step in steps:
                ids.extend(step.spec.claims)
        if self.batching_knob is not None:
            ids.extend(self.batching_knob.claims)
        for _, claims in self.notes.values():
            ids.extend(claims)
        for milestone in self.milestones:
            ids.extend(milestone.claims)
        for forms in self.log_facts.values():
            ids.extend(f.claim for f in forms)
        if self.abbreviated_flags:
            ids.append(self.abbreviated_flags)
        return tuple(dict.fromkeys(ids))


def _at_version(forms: tuple[tuple[str | None, Any], ...], version: str | None) -> list[Any]:
    """Of (since, item) steps: every item when `version` is unknown, else the items of the newest `since` at or
    below it (several items may share one `since`)."""
    want = version_key(version)
    if want is None:
        return [item for _, item in forms]
    keyed = [((version_key(v) or (0, 0, 0)) if v is not None else (0, 0, 0), item) for v, item in forms]
    applicable = [(k, item) for k, item in keyed if k <= want]
    if not applicable:
        return []
    newest = max(k for k, _ in applicable)
    return [item for k, item in applicable if k == newest]
