"""An LLMEngine over a local GPTQ/AWQ checkpoint: the engine side of layers/quant/awq_gptq.py."""
from __future__ import annotations

from triage.reference_engine.engine.engine_config import EngineConfig
from triage.reference_engine.engine.llm_engine import LLMEngine
from triage.reference_engine.layers.quant.awq_gptq import load_quantized_checkpoint
from triage.reference_engine.layers.quant.handlers import QuantSummary, apply_imported_checkpoint


def load_quantized_engine(path: str, **engine_config) -> tuple[LLMEngine, QuantSummary]:
    """An LLMEngine serving a local GPTQ/AWQ checkpoint: the engine is built from the directory's
    config.json with placeholder weights, then every packed layer is swapped for an Int4Linear and
    the dense tensors (embeddings, norms, an unquantized head) are loaded. Returns (engine, summary)."""
    ckpt = load_quantized_checkpoint(path)
    engine = LLMEngine(EngineConfig(model=str(path), load_format="dummy", **engine_config))
    summary = apply_imported_checkpoint(engine.runner.model, ckpt)
    return engine, summary
