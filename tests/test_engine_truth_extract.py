"""scripts/engine_truth/ (behind scripts/extract_engine_truth.py) on small made-up sources: no network,
no engine archives. The committed tables in triage/engines/truth/ are tested elsewhere."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scripts.engine_truth.annotated_flags import add_annotated_flags
from scripts.engine_truth.argparse_flags import add_dataclass_flags, extract_argparse
from scripts.engine_truth.ast_util import UNRESOLVED
from scripts.engine_truth.metrics import extract_metrics
from scripts.engine_truth.symbols import Symbols
from scripts.engine_truth.tgi_clap import tgi_flags

ROOT = Path(__file__).resolve().parent.parent

CONFIG = b'''
from typing import Literal, Optional
BlockSize = Literal[8, 16, 32]
BASE = ["a", "b"]
ALL = BASE + ["c"]

class CacheConfig:
    block_size: BlockSize = 16
    gpu_memory_utilization: float = 0.9
    dtype: Optional[Literal["auto", "fp8"]] = "auto"
    sizes: list[int] = field(default_factory=list)
    swap: int = Field(default=4)

class Child(CacheConfig):
    extra: "dict[str, int] | None" = None
'''

PARSER = b'''
cache_kwargs = get_kwargs(CacheConfig)
parser.add_argument("--block-size", **cache_kwargs["block_size"])
parser.add_argument("--gpu-memory-utilization", **cache_kwargs["gpu_memory_utilization"], default=0.8)
parser.add_argument("--enforce-eager", "-e", action="store_true")
parser.add_argument("--prefix", action=argparse.BooleanOptionalAction, default=True)
parser.add_argument("--max-len", type=optional_type(int))
parser.add_argument("--mode", choices=["x", "y"], default="x")
parser.add_argument("--old", action=DeprecatedAction, new_flag="--new")
parser.add_argument("--names", nargs="+", choices=ALL)
parser.add_argument("positional")
'''


def _symbols() -> Symbols:
    sym = Symbols()
    sym.add("config.py", CONFIG)
    sym.add("args.py", PARSER)
    return sym


def test_names_classes_and_annotations_resolve():
    sym = _symbols()
    fields = sym.classes["CacheConfig"]
    assert sym.value(fields["block_size"][1], cls="CacheConfig") == 16
    assert sym.value(fields["swap"][1]) == 4                       # Field(default=...)
    assert sym.value(sym.names["ALL"]) == ["a", "b", "c"]          # a sum of lists behind names
    assert sym.literal_choices(fields["block_size"][0]) == [8, 16, 32]
    assert sym.literal_choices(fields["dtype"][0]) == ["auto", "fp8"]
    assert sym.type_of(fields["block_size"][0]) == "choice"
    assert sym.type_of(fields["gpu_memory_utilization"][0]) == "float"
    assert sym.type_of(fields["sizes"][0]) == "list"
    assert "extra" in sym.classes["Child"] and "swap" in sym.classes["Child"]   # inherited fields
    assert sym.type_of(sym.classes["Child"]["extra"][0]) == "json"
    assert sym.value(None) is UNRESOLVED


def test_argparse_flags_take_type_choices_and_defaults_from_the_call_or_the_config_field():
    flags, unresolved = extract_argparse(_symbols(), ["args.py"])
    assert flags["--block-size"] == {"field": "CacheConfig.block_size", "type": "choice",
                                     "choices": [8, 16, 32], "default": 16}
    assert flags["--gpu-memory-utilization"] == {"field": "CacheConfig.gpu_memory_utilization", "type": "float",
                                                 "default": 0.8, "config_default": 0.9}
    assert flags["--enforce-eager"] == {"type": "bool", "action": "store_true", "default": False, "aliases": ["-e"]}
    assert flags["--prefix"] == {"type": "bool", "action": "bool_optional", "default": True,
                                 "aliases": ["--no-prefix"]}
    assert flags["--max-len"] == {"type": "int"}
    assert flags["--mode"] == {"type": "choice", "choices": ["x", "y"], "default": "x"}
    assert flags["--old"]["deprecated"] is True and flags["--old"]["replacement"] == "--new"
    assert flags["--names"] == {"type": "choice", "choices": ["a", "b", "c"], "nargs": "+"}
    assert "positional" not in flags and unresolved == []


def test_frontend_dataclass_fields_become_flags():
    sym = _symbols()
    flags: dict = {}
    add_dataclass_flags(sym, "CacheConfig", flags)
    assert flags["--dtype"] == {"type": "choice", "field": "CacheConfig.dtype", "choices": ["auto", "fp8"],
                                "default": "auto"}


def test_annotated_dataclass_fields_become_flags():
    sym = Symbols()
    sym.add("fields.py", b'''
class ServerFields:
    port: A[int, "the port"] = 30000
    trust_remote_code: A[bool, "help"] = False
    mode: A[str, Arg(choices=["a", "b"], aliases=["-m"])] = "a"
    hidden: A[int, Arg(no_cli=True)] = 1
    renamed: A[str, Arg(cli_name="--other")] = None
''')
    flags: dict = {}
    assert add_annotated_flags(sym, ["fields.py"], flags) == []
    assert flags["--port"] == {"field": "ServerFields.port", "type": "int", "default": 30000}
    assert flags["--trust-remote-code"]["action"] == "store_true"
    assert flags["--mode"] == {"field": "ServerFields.mode", "type": "choice", "choices": ["a", "b"],
                               "aliases": ["-m"], "default": "a"}
    assert "--hidden" not in flags and flags["--other"]["field"] == "ServerFields.renamed"


def test_metrics_are_found_directly_and_through_a_name_variable():
    sym = Symbols()
    sym.add("metrics.py", b'''
def setup():
    Gauge(name="vllm:num_requests_running", documentation="")
    prometheus_client.Counter("vllm:prompt_tokens_total", "")
    Histogram(name="other:x")

def info():
    name = "vllm:cache_config_info"
    g = Gauge(name=name, documentation="")
''')
    assert extract_metrics(sym, ["metrics.py"], "vllm:") == {
        "vllm:cache_config_info": "gauge", "vllm:num_requests_running": "gauge",
        "vllm:prompt_tokens_total": "counter"}


def test_tgi_clap_arguments_become_flags():
    src = '''
enum Quantization {
    Awq,
    #[clap(name = "bitsandbytes-nf4")]
    BitsandbytesNf4,
}

struct Args {
    /// The model
    #[clap(default_value = "bigscience/bloom-560m", long, env)]
    model_id: String,
    #[clap(default_value = "2", long, short, env)]
    validation_workers: usize,
    #[clap(long, env, value_enum)]
    quantize: Option<Quantization>,
    #[clap(default_value = "1.0", long, env = "CUDA_MEMORY_FRACTION")]
    cuda_memory_fraction: f32,
    #[clap(long, env)]
    disable_custom_kernels: bool,
    #[clap(long, env, value_delimiter = ',')]
    cors_allow_origin: Vec<String>,
    #[clap(long, env)]
    rope_scaling: Option<RopeScaling>,
    #[clap(env)]
    no_long: usize,
}
'''
    flags, unresolved = tgi_flags(src)
    assert flags["--model-id"] == {"field": "model_id", "env": ["MODEL_ID"], "type": "str",
                                   "default": "bigscience/bloom-560m"}
    assert flags["--validation-workers"] == {"field": "validation_workers", "env": ["VALIDATION_WORKERS"],
                                             "aliases": ["-v"], "type": "int", "default": 2}
    assert flags["--quantize"]["choices"] == ["awq", "bitsandbytes-nf4"]
    assert flags["--cuda-memory-fraction"]["env"] == ["CUDA_MEMORY_FRACTION"]
    assert flags["--cuda-memory-fraction"]["default"] == 1.0
    assert flags["--disable-custom-kernels"]["default"] is False
    assert flags["--cors-allow-origin"]["nargs"] == "list"
    assert "--no-long" not in flags
    assert unresolved == ["--rope-scaling: type Option<RopeScaling>"]
    assert tgi_flags("fn main() {}") == ({}, ["struct Args not found"])


def test_the_command_line_is_unchanged():
    out = subprocess.run([sys.executable, str(ROOT / "scripts/extract_engine_truth.py"), "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    for flag in ("--cache", "--out", "--tgi-sources", "--only {vllm,sglang,tgi,llamacpp,ollama}", "--version", "--git ORIGIN=DIR"):
        assert flag in out
    assert "Build triage's engine truth tables from the engines' own source." in out
