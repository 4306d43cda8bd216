"""GEMM autotuning as the plugin sees it: candidates, selections, recording, serving and lookup."""
