"""The pieces a forward pass is built from: attention backends (attention/), quantized linears and
their handlers (quant/), native CPU kernels (kernels/), the KV cache storage format (kv_cache.py) and
sampling (sampler.py, sampling_params.py). Torch-free on import; import modules by name."""
