"""The engine core: LLMEngine (llm_engine.py) over the scheduler, the KV block allocators, the
sequences they track and the model runner that executes a scheduled batch. Torch-free on import:
the scheduler and block manager load without torch; import modules by name."""
