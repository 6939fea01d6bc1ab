"""Quantized linear layers and the handlers that swap them into a loaded model.

The model code never imports this package: ``quantize_model(model, "int4")`` replaces nn.Linear
modules after loading, as gpt-fast's handlers do.
"""
from triage.reference_engine.layers.quant.fp8 import Fp8Linear, dequantize_fp8, quantize_fp8_per_channel
from triage.reference_engine.layers.quant.handlers import (
    Fp8WeightOnlyHandler,
    Int4WeightOnlyHandler,
    QuantScheme,
    QuantSummary,
    apply_imported_checkpoint,
    model_weight_bytes,
    quantize_model,
)
from triage.reference_engine.layers.quant.int4 import (
    Int4Linear,
    Int4Weights,
    dequantize_int4,
    quantize_int4_groupwise,
)

__all__ = [
    "Fp8Linear", "Fp8WeightOnlyHandler", "Int4Linear", "Int4WeightOnlyHandler", "Int4Weights",
    "QuantScheme", "QuantSummary", "apply_imported_checkpoint", "dequantize_fp8", "dequantize_int4",
    "model_weight_bytes", "quantize_fp8_per_channel", "quantize_int4_groupwise", "quantize_model",
]
