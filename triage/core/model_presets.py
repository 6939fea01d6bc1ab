"""Model shapes for planning: the published config.json values of common open models.

Each entry is the subset of the model's Hugging Face config.json that sizing needs, with the same
key names, so presets and user configs go through one parser (model_shape.shape_from_hf_config).
Parameter counts are computed from these shapes, never typed in.
"""
from __future__ import annotations

from typing import Any

_LLAMA3_VOCAB = 128256
_QWEN3_VOCAB = 151936
# What every Qwen3 config.json shares (the dense models and the MoE one).
_QWEN3 = {"model_type": "qwen3", "head_dim": 128, "use_sliding_window": False, "sliding_window": None,
          "vocab_size": _QWEN3_VOCAB, "tie_word_embeddings": False, "max_position_embeddings": 40960}

PRESETS: dict[str, dict[str, Any]] = {
    "llama-3.2-1b": {
        "_hf_id": "meta-llama/Llama-3.2-1B-Instruct", "model_type": "llama",
        "num_hidden_layers": 16, "hidden_size": 2048, "intermediate_size": 8192,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
        "vocab_size": _LLAMA3_VOCAB, "tie_word_embeddings": True, "max_position_embeddings": 131072},
    "llama-3.2-3b": {
        "_hf_id": "meta-llama/Llama-3.2-3B-Instruct", "model_type": "llama",
        "num_hidden_layers": 28, "hidden_size": 3072, "intermediate_size": 8192,
        "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": _LLAMA3_VOCAB, "tie_word_embeddings": True, "max_position_embeddings": 131072},
    "llama-3.1-8b": {
        "_hf_id": "meta-llama/Llama-3.1-8B-Instruct", "model_type": "llama",
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": _LLAMA3_VOCAB, "tie_word_embeddings": False, "max_position_embeddings": 131072},
    "llama-3.1-70b": {
        "_hf_id": "meta-llama/Llama-3.1-70B-Instruct", "model_type": "llama",
        "num_hidden_layers": 80, "hidden_size": 8192, "intermediate_size": 28672,
        "num_attention_heads": 64, "num_key_value_heads": 8,
        "vocab_size": _LLAMA3_VOCAB, "tie_word_embeddings": False, "max_position_embeddings": 131072},
    "llama-3.1-405b": {
        "_hf_id": "meta-llama/Llama-3.1-405B-Instruct", "model_type": "llama",
        "num_hidden_layers": 126, "hidden_size": 16384, "intermediate_size": 53248,
        "num_attention_heads": 128, "num_key_value_heads": 8,
        "vocab_size": _LLAMA3_VOCAB, "tie_word_embeddings": False, "max_position_embeddings": 131072},
    "llama-2-7b": {  # multi-head attention: one KV head per query head
        "_hf_id": "meta-llama/Llama-2-7b-chat-hf", "model_type": "llama",
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 11008,
        "num_attention_heads": 32, "num_key_value_heads": 32,
        "vocab_size": 32000, "tie_word_embeddings": False, "max_position_embeddings": 4096},
    "mistral-7b": {
        "_hf_id": "mistralai/Mistral-7B-Instruct-v0.3", "model_type": "mistral",
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": None,
        "vocab_size": 32768, "tie_word_embeddings": False, "max_position_embeddings": 32768},
    "mistral-7b-v0.1": {  # every layer attends within a 4096-token window
        "_hf_id": "mistralai/Mistral-7B-v0.1", "model_type": "mistral",
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096,
        "vocab_size": 32000, "tie_word_embeddings": False, "max_position_embeddings": 32768},
    "mixtral-8x7b": {
        "_hf_id": "mistralai/Mixtral-8x7B-Instruct-v0.1", "model_type": "mixtral",
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": None,
        "num_local_experts": 8, "num_experts_per_tok": 2,
        "vocab_size": 32000, "tie_word_embeddings": False, "max_position_embeddings": 32768},
    "gemma-2-9b": {  # alternating local (4096-token window) and global layers
        "_hf_id": "google/gemma-2-9b-it", "model_type": "gemma2",
        "num_hidden_layers": 42, "hidden_size": 3584, "intermediate_size": 14336,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096,
        "vocab_size": 256000, "tie_word_embeddings": True, "max_position_embeddings": 8192},
    "qwen2.5-7b": {
        "_hf_id": "Qwen/Qwen2.5-7B-Instruct", "model_type": "qwen2",
        "num_hidden_layers": 28, "hidden_size": 3584, "intermediate_size": 18944,
        "num_attention_heads": 28, "num_key_value_heads": 4, "attention_bias": True,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 28,
        "vocab_size": 152064, "tie_word_embeddings": False, "max_position_embeddings": 32768},
    "qwen2.5-72b": {
        "_hf_id": "Qwen/Qwen2.5-72B-Instruct", "model_type": "qwen2",
        "num_hidden_layers": 80, "hidden_size": 8192, "intermediate_size": 29568,
        "num_attention_heads": 64, "num_key_value_heads": 8, "attention_bias": True,
        "use_sliding_window": False, "sliding_window": 131072, "max_window_layers": 80,
        "vocab_size": 152064, "tie_word_embeddings": False, "max_position_embeddings": 32768},
    "qwen3-0.6b": {
        **_QWEN3, "_hf_id": "Qwen/Qwen3-0.6B",
        "num_hidden_layers": 28, "hidden_size": 1024, "intermediate_size": 3072,
        "num_attention_heads": 16, "num_key_value_heads": 8, "tie_word_embeddings": True},
    "qwen3-8b": {
        **_QWEN3, "_hf_id": "Qwen/Qwen3-8B",
        "num_hidden_layers": 36, "hidden_size": 4096, "intermediate_size": 12288,
        "num_attention_heads": 32, "num_key_value_heads": 8},
    "qwen3-32b": {
        **_QWEN3, "_hf_id": "Qwen/Qwen3-32B",
        "num_hidden_layers": 64, "hidden_size": 5120, "intermediate_size": 25600,
        "num_attention_heads": 64, "num_key_value_heads": 8},
    "qwen3-30b-a3b": {
        **_QWEN3, "_hf_id": "Qwen/Qwen3-30B-A3B", "model_type": "qwen3_moe",
        "num_hidden_layers": 48, "hidden_size": 2048, "intermediate_size": 6144,
        "num_attention_heads": 32, "num_key_value_heads": 4,
        "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
        "decoder_sparse_step": 1, "mlp_only_layers": []},
    "deepseek-v3": {  # multi-head latent attention + mixture of experts
        "_hf_id": "deepseek-ai/DeepSeek-V3", "model_type": "deepseek_v3",
        "num_hidden_layers": 61, "hidden_size": 7168, "intermediate_size": 18432,
        "num_attention_heads": 128, "num_key_value_heads": 128,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
        "moe_intermediate_size": 2048, "first_k_dense_replace": 3, "moe_layer_freq": 1,
        "vocab_size": 129280, "tie_word_embeddings": False, "max_position_embeddings": 163840},
}


def preset_key(name: str) -> str | None:
    """The preset a model name means: a preset's own name or its Hugging Face id (case as published); None."""
    if name in PRESETS:
        return name
    return next((key for key, shape in PRESETS.items() if shape.get("_hf_id") == name), None)
