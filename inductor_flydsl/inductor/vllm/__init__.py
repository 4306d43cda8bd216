"""vLLM's GEMM ops made visible to Inductor's GEMM autotuning."""
