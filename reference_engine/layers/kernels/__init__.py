"""Small native kernels the engine compiles on first use (torch.utils.cpp_extension), each with a plain
torch fallback when it cannot be built here."""
