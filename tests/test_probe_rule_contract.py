"""The typed probe -> rule contract: every payload field a rule reads is produced by some probe.

1. *Produced*: each probe is replayed against its fakes (the fake pynvml scenarios, the captured /proc
   and /sys trees, the captured /metrics texts served in sequence, a real reference server for
   server_config and network, a real child process for server_process, the captured logs, a model
   directory for storage). A field counts as produced when some replay filled it (not None, not empty).
2. *Read*: every rule runs over every rule fixture and golden scenario with payloads that record each
   attribute read (a recording subclass of each payload and record type, so `isinstance` still holds).
3. Every read (Type.field) must be produced. A rule reading a field no probe fills, or a field the type
   no longer has (a rename), fails here with the rule-side name.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.nvml.fake_pynvml import FakeNvml
from tests.fixtures.nvml.fake_pynvml import load as load_nvml
from tests.golden.scenarios import SCENARIOS
from tests.rules_fixtures import load_case
from triage.core.probe_data import PAYLOAD_TYPES, Payload
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot
from triage.probes.cpu_numa import probe_cpu
from triage.probes.gpu import probe_gpu
from triage.probes.http import HttpResponse
from triage.probes.kernel_log import probe_kernel_log
from triage.probes.logs import probe_logs
from triage.probes.memory import probe_memory
from triage.probes.network import probe_network
from triage.probes.prometheus_history import probe_history
from triage.probes.server_config import probe_server_config
from triage.probes.server_metrics import probe_server_metrics
from triage.probes.server_process import probe_server_process
from triage.probes.storage import probe_storage
from triage.rules import evaluate

FIX = Path(__file__).resolve().parent / "fixtures"
RULE_FIXTURES = sorted((FIX / "rules").glob("*/*.json"))


# -- 1. what the probes produce ------------------------------------------------------------------

def _produced(value: Any, out: set[str]) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is not None and v != () and v != {}:
                out.add(f"{type(value).__name__}.{f.name}")
            _produced(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _produced(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _produced(v, out)


def _served(*texts: str):
    """An injected HTTP GET that answers /metrics with `texts` in turn (the last one repeats)."""
    answers = [HttpResponse(200, t) for t in texts]

    def get(url: str, timeout_s: float) -> HttpResponse:
        return answers.pop(0) if len(answers) > 1 else answers[0]
    return get


def _grown(text: str) -> str:
    """The same exposition earlier in time: every counter, histogram bucket, sum and count halved, so
    the replayed window sees them grow."""
    out = []
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if line and not line.startswith("#") and name.endswith(("_total", "_bucket", "_sum", "_count")):
            head, _, value = line.rpartition(" ")
            try:
                line = f"{head} {float(value) / 2}"
            except ValueError:
                pass
        out.append(line)
    return "\n".join(out) + "\n"


def _advance(root: Path):
    def sleep(_s: float) -> None:
        for name in ("stat", "vmstat"):
            shutil.copy(root / f"{name}.after", root / name)
    return sleep


def _replays(tmp: Path, reference_url: str) -> list[ProbeResult]:
    from triage.probes.engine_identity import probe_engine_identity
    from triage.probes.http import HttpFailure, HttpResponse

    results = []
    for scenario in sorted((FIX / "nvml").glob("*.json")):
        results.append(probe_gpu(nvml=load_nvml(scenario.name), window_s=0.0,
                                 sys_root=str(FIX / "sysfs" / "two_node_powersave"), sleep=lambda s: None))
    visible = json.loads((FIX / "nvml" / "h100_x2_healthy_nvlink.json").read_text())
    visible["gpus"][0]["processes"][0]["pid"] = os.getpid()       # a process this host can name
    results.append(probe_gpu(nvml=FakeNvml(visible), window_s=0.0, sleep=lambda s: None))
    proc = tmp / "proc"
    shutil.copytree(FIX / "procfs" / "swapping_host", proc)
    sys_root = str(FIX / "sysfs" / "two_node_powersave")
    results.append(probe_cpu(window_s=1.0, proc_root=str(proc), sys_root=sys_root, sleep=_advance(proc)))
    shutil.rmtree(proc)
    shutil.copytree(FIX / "procfs" / "swapping_host", proc)
    results.append(probe_memory(window_s=2.0, proc_root=str(proc), sleep=_advance(proc), bandwidth=lambda s: 12.5))
    prom = FIX / "prom"
    pairs = [(prom / "vllm_v1_two_engines_before.txt").read_text(), (prom / "vllm_v1_two_engines_after.txt").read_text()]
    results.append(probe_server_metrics("http://10.0.0.5:8000", window_s=2.0, num_intermediate=1,
                                         get=_served(pairs[0], pairs[0], pairs[1]), sleep=lambda s: None))
    for capture in sorted(prom.glob("*.txt")):
        text = capture.read_text()
        results.append(probe_server_metrics("http://10.0.0.5:8000", window_s=2.0, num_intermediate=1,
                                             get=_served(_grown(text), text, text), sleep=lambda s: None))
    results.append(probe_server_config(reference_url))
    argvs = {"vllm": ["vllm", "serve", "/models/llama", "--max-num-seqs", "64", "--max-model-len", "8192",
                      "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--enforce-eager",
                      "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}',
                      "--tensor-parallel-size", "2", "--api-server-count", "2", "--swap-space", "4",
                      "--max-num-batched-tokens", "8192", "--no-enable-chunked-prefill", "--block-size", "16",
                      "--gpu-memory-utilization", "0.85", "--dtype", "bfloat16", "--served-model-name", "llama",
                      "--pipeline-parallel-size", "1", "--data-parallel-size", "1", "--bogus-flag", "x"],
             "sglang": ["python", "-m", "sglang.launch_server", "--model-path", "m", "--mem-fraction-static", "0.8"],
             "tgi": ["text-generation-launcher", "--model-id", "m", "--max-total-tokens", "4096"]}
    v1 = (prom / "vllm_v1_two_engines_after.txt").read_text()
    for engine, argv in argvs.items():
        results.append(probe_server_config("http://10.0.0.5:8000", cmdline=argv, engine=engine, get=_served(v1)))
    results.append(probe_network(reference_url, num_samples=2))
    results.append(probe_kernel_log(path=str(FIX / "logs" / "dmesg_xid79.txt")))
    # A ticket read offline (tests/tickets): the artifacts list and every payload the ticket readers fill.
    from triage.diagnose.from_ticket import read_ticket
    results.extend(read_ticket([FIX / "tickets" / "planted_issue.md"]).probes)
    (tmp / "uptime").write_text("4834.57 9000.00\n")          # live dmesg: the events get an age
    lines = (FIX / "logs" / "dmesg_xid79.txt").read_text().splitlines()
    results.append(probe_kernel_log(run_dmesg=lambda: (lines, None), proc_root=str(tmp)))
    results.append(probe_logs(str(FIX / "logs" / "vllm_v0_preempting_slow_tokenizer.log")))
    model = tmp / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 2**20)
    results.append(probe_storage(str(model), env={"HF_HOME": str(tmp / "hf")}, proc_root="/proc"))
    results.append(probe_storage("org/some-model", env={}, proc_root="/proc"))
    # The server's own view, as a containerised server's /proc shows it (pid 4242, HF_HOME on tmpfs).
    cproc = tmp / "cproc"
    snap = cproc / "4242" / "root" / "data" / "hf" / "hub" / "models--org--tiny" / "snapshots" / "s1"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").write_bytes(b"\0" * 4096)
    (cproc / "4242" / "mounts").write_text("overlay / overlay rw 0 0\ntmpfs /data tmpfs rw 0 0\n")
    results.append(probe_storage("org/tiny", env={"HF_HOME": "/data/hf"}, proc_root=str(cproc), pid=4242))
    results.append(probe_logs(str(FIX / "logs" / "vllm_v1_downloading_weights.log")))
    # Start-up phases: a log with two starts built from vLLM 0.10.2's format strings, and a real reference one.
    two = (FIX / "coldstart" / "vllm-0.10.2.built.log").read_text() * 2
    (tmp / "vllm_two_starts.log").write_text(two)
    results.append(probe_logs(str(tmp / "vllm_two_starts.log")))
    results.append(probe_logs(str(FIX / "coldstart" / "reference_startup.log")))
    results.append(probe_logs(str(FIX / "coldstart" / "vllm-0.33.0-restarts.built.log")))   # three starts
    # Real incidents as logs (tests/incidents/): failures by phase, stats series, preemptions, offload, NCCL.
    for name in ("vllm-v1-graph-oom-57475", "vllm-v0-kv-below-max-len-10517", "vllm-v0-preemption-swap-546",
                 "sglang-kv-saturated-14972", "ollama-partial-offload-9181", "vllm-nccl-shm-minimax42",
                 "vllm-v1-kv-below-max-len-tpu223", "tgi-prefill-oom-1067", "vllm-v1-sampler-warmup-oom-14452",
                 "ollama-partial-offload-8393"):
        results.append(probe_logs(str(FIX / "incidents" / f"{name}.log"), source="--from"))
    # Engine identity: the live reference server; llama-server's real captures (one slot); argv and env forms.
    results.append(probe_engine_identity(reference_url))
    lcpp = FIX / "llamacpp"
    lcpp_routes = {"/props": (lcpp / "props_parallel1.json").read_text(),
                   "/v1/models": (lcpp / "v1_models.json").read_text(),
                   "/metrics": (lcpp / "metrics_parallel1_idle.txt").read_text()}

    def lcpp_get(url: str, timeout_s: float) -> HttpResponse:
        path = "/" + url.split("/", 3)[3]
        if path not in lcpp_routes:
            raise HttpFailure(f"{url}: 404")
        return HttpResponse(200, lcpp_routes[path], {"server": "llama.cpp"})

    results.append(probe_engine_identity("http://10.0.0.5:8104", None, ["llama-server", "-m", "x.gguf", "-np", "1"],
                                         {}, get=lcpp_get))
    results.append(probe_engine_identity(None, "transformers", ["transformers", "serve", "m"], {}))
    results.append(probe_engine_identity(None, "ollama", ["ollama", "serve"], {"OLLAMA_NUM_PARALLEL": "1"}))
    # `diagnose --prometheus`: the history probe over canned instant-query answers (a query -> number table).
    results.extend(probe_history("http://prometheus:9090", 3600.0, 7 * 86400.0, 1_795_000_000.0,
                                 query=_canned_prometheus))
    results.extend(_topology_replays())
    results.extend(_active_replays(sys_root))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "vllm", "serve", "m"],
                             env={"NCCL_DEBUG": "INFO", "HF_HOME": "/data/hf", "PATH": "/usr/bin:/bin"})
    try:
        _wait_until_exec_shows(child.pid)
        results.append(probe_server_process(child.pid, "vllm", window_s=0.3))
    finally:
        child.kill()
        child.wait(5)
    return results


def _active_replays(sys_root: str) -> list[ProbeResult]:
    """The `diagnose --active` probes: host memory and the gloo all-reduce for real on this host; PCIe, GPU
    memory and matmul through their own code over CPU torch with CUDA answered for an NVML scenario's GPUs
    (tests/fake_cuda.py: made-up timings, the payload's every field filled the way a GPU host fills it)."""
    from tests.fake_cuda import fake_cuda
    from triage.probes.active.allreduce import probe_allreduce
    from triage.probes.active.hbm import probe_hbm
    from triage.probes.active.host_memory import probe_host_memory
    from triage.probes.active.matmul import probe_matmul
    from triage.probes.active.pcie import probe_pcie

    out = [probe_host_memory(0.4, sys_root, buffer_bytes=4 * 2**20), probe_allreduce(2.0, gloo_bytes=2**20)]
    with fake_cuda(failing=(1,)):      # GPU 1 falls over: its rows carry the error
        out += [probe_pcie(0.2, buffer_bytes=2**20), probe_hbm(0.2, buffer_bytes=2**20), probe_matmul(0.2, n=64)]
    return out


# Fields a CPU-only host cannot produce even through tests/fake_cuda.py, each checked where it is produced.
GPU_ONLY = {
    "AllreduceData.nccl": "NCCL needs two CUDA GPUs: tests/test_active.py::test_nccl_allreduce_when_two_gpus (gpu)",
}


def _topology_replays() -> list[ProbeResult]:
    """The deployment topologies (docs/TOPOLOGIES.md): each capture of tests/fixtures/topologies/ through
    server_metrics, topology flags through server_config, a prefill peer served by a real loopback server
    through server_peers, and the topology probe over what they produced."""
    from tests.capture_server import CAPTURES, CaptureServer
    from triage.probes.server_peers import probe_server_peers
    from triage.probes.topology import derive_topology

    out = []
    for before in sorted(CAPTURES.glob("*.before.prom")):
        after = before.with_name(before.name.replace(".before.", ".after."))
        out.append(probe_server_metrics("http://10.0.0.5:8000", window_s=2.0, num_intermediate=1,
                                        get=_served(before.read_text(), after.read_text(), after.read_text()),
                                        sleep=lambda s: None))
    argvs = {"vllm": ["vllm", "serve", "m", "-dp", "4", "--data-parallel-hybrid-lb", "--enable-expert-parallel",
                      "--enable-eplb", "--kv-offloading-size", "64",
                      "--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}'],
             "sglang": ["python", "-m", "sglang.launch_server", "--model-path", "m", "--dp-size", "4",
                        "--enable-dp-attention", "--ep-size", "4", "--enable-eplb", "--load-balance-method",
                        "round_robin", "--disaggregation-mode", "decode", "--enable-hierarchical-cache"]}
    for engine, argv in argvs.items():
        out.append(probe_server_config("http://10.0.0.5:8000", cmdline=argv, engine=engine,
                                       get=_served((CAPTURES / "vllm_dp4_balanced.after.prom").read_text())))
    with CaptureServer("sglang_pd_prefill_saturated") as prefill:
        peers = probe_server_peers((prefill.url, prefill.url + "#prefill"), 0.05)
    out.append(peers)
    configs = [r.data for r in out if r.name == "server_config"]
    metrics = [r.data for r in out if r.name == "server_metrics"]
    for cfg, m in zip(configs, metrics, strict=False):
        out.append(ProbeResult("topology", ProbeStatus.OK, 0.0, None, derive_topology(cfg, m, peers.data, "decode")))
    return out


def _wait_until_exec_shows(pid: int, timeout_s: float = 10.0) -> None:
    """Until the child's /proc cmdline is its own: just after Popen returns, a loaded host can still show an
    empty one, and the replay then lacks ServerProcessData.cmdline (seen once in a fresh clone's run)."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while "vllm" not in psutil.Process(pid).cmdline():
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} never showed its command line")
        time.sleep(0.01)


def _canned_prometheus(expr: str, at_epoch_s: float) -> float | None:
    """Prometheus answers: a count for the vLLM marker, a plausible number for every other query; the
    comparison window (7 days earlier) answers 20% lower so that the rule sees a change."""
    if expr.startswith("count("):
        return 1.0 if "vllm:" in expr else None
    value = 0.9 if "histogram_quantile" in expr else 1980.0 if "DCGM_FI_DEV_SM_CLOCK" in expr else 12.0
    return value if at_epoch_s >= 1_795_000_000.0 else value / 1.2


@pytest.fixture(scope="module")
def produced(tmp_path_factory, reference_server) -> set[str]:
    out: set[str] = set()
    for r in _replays(tmp_path_factory.mktemp("replay"), reference_server.url):
        _produced(r.data, out)
    return out


# -- 2. what the rules read ----------------------------------------------------------------------

_RECORDERS: dict[type, type] = {}
_HELPERS = {name for name in dir(Payload) if not name.startswith("__")}
_SINK: dict[int, set[str]] = {}       # id(recording object) -> the set its reads go to
_KEEP: list[Any] = []


def _recorder(cls: type) -> type:
    if cls not in _RECORDERS:
        def __getattribute__(self, name, _cls=cls):   # noqa: N807
            if not name.startswith("_") and name not in _HELPERS:
                _SINK[id(self)].add(f"{_cls.__name__}.{name}")
            return object.__getattribute__(self, name)
        _RECORDERS[cls] = type(f"Recording{cls.__name__}", (cls,), {"__slots__": (),
                                                                  "__getattribute__": __getattribute__})
    return _RECORDERS[cls]


def _recording(value: Any, reads: set[str]) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kwargs = {f.name: _recording(getattr(value, f.name), reads) for f in dataclasses.fields(value)}
        obj = _recorder(type(value))(**kwargs)
        _SINK[id(obj)] = reads
        _KEEP.append(obj)             # keeps ids unique while the sink table refers to them
        return obj
    if isinstance(value, tuple):
        return tuple(_recording(v, reads) for v in value)
    if isinstance(value, list):
        return [_recording(v, reads) for v in value]
    if isinstance(value, dict):
        return {k: _recording(v, reads) for k, v in value.items()}
    return value


def _snapshots():
    for path in RULE_FIXTURES:
        snap, bench, baseline, config, _ = load_case(path)
        yield path.parent.name + "/" + path.stem, snap, bench, baseline, config
    for name, make in SCENARIOS.items():
        snap, bench, config = make()
        yield f"golden/{name}", snap, bench, None, config


def rule_reads() -> tuple[set[str], list[str]]:
    reads: set[str] = set()
    errors = []
    for case, snap, bench, baseline, config in _snapshots():
        probes = tuple(dataclasses.replace(p, data=_recording(p.data, reads)) for p in snap.probes)
        result = evaluate(Snapshot(probes=probes, window_s=snap.window_s), bench=bench, baseline=baseline,
                          config=config)
        errors += [f"{case}: {s.code} {s.reason}" for s in result.skipped if "internal error" in s.reason]
    return reads, errors


# -- 3. the contract -----------------------------------------------------------------------------

def test_the_recorder_sees_reads():
    reads: set[str] = set()
    data = _recording(PAYLOAD_TYPES["server_metrics"](num_requests_waiting_max=3.0), reads)
    assert data.num_requests_waiting_max == 3.0 and isinstance(data, PAYLOAD_TYPES["server_metrics"])
    assert reads == {"ServerMetricsData.num_requests_waiting_max"}


def test_every_field_a_rule_reads_is_produced_by_a_probe(produced):
    reads, errors = rule_reads()
    assert not errors, "rules failed on the typed payloads:\n" + "\n".join(errors[:20])
    assert len(reads) > 100, f"the recorder saw only {len(reads)} reads; is it wired?"
    missing = sorted(reads - produced - set(GPU_ONLY))
    assert not missing, ("rules read fields that no probe replay produces (renamed, removed, or never "
                         "filled):\n  " + "\n  ".join(missing))


def test_every_registered_probe_has_a_payload_type_and_a_replay(produced):
    from triage.probes.registry import active_probes, probes

    names = [e.name for e in probes()]
    names += [e.name for e in active_probes()]
    history_only = {"prometheus_history"}   # runs under `diagnose --prometheus`, not in the live registry
    history_only |= {"artifacts"}           # `diagnose --from` on a ticket lists what it read (from_ticket.py)
    assert sorted(names) == sorted(set(PAYLOAD_TYPES) - history_only), \
        "a registered probe without a payload type, or the reverse"
    for name, cls in PAYLOAD_TYPES.items():
        assert any(p.startswith(f"{cls.__name__}.") for p in produced), f"probe {name} is never replayed here"
