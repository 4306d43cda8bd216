"""Predicted performance of compiled FlyDSL GEMM kernels on AMD Instinct GPUs.

Nothing here runs on a GPU: a prediction is computed from the kernel's own compiled code
(its main loop's llvm-mca cycles per trip, its registers and LDS, from the compile catalog
or an ISA file) and a device's public specifications (``devices.py``, each figure with
its source). Every result is labelled a prediction; docs/performance-model.md validates
the model against published measurements on MI355X.
"""
