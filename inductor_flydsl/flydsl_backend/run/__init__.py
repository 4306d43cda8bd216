"""Launching FlyDSL kernels: the custom ops, the kernel runner, FlyDSL's runtime."""
