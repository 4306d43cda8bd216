"""FlyDSL kernel backend: config space, resource model, toolchain and cross-compilation."""
