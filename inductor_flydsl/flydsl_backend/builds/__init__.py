"""Compiling FlyDSL kernels: build pool and server, cross-compiles, the compile catalog."""
