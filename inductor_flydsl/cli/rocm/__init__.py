"""``inductor-flydsl validate-rocm``: the FlyDSL kernels' numerics and speed on an
MI300/MI350 (``validate.py``: the command, its ROCm preflight and its output; one module
per section)."""
