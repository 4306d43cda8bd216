"""Integration with TorchInductor: problem keys from IR, candidate identity, the hooks."""
