"""The process-wide matmul settings that change a GEMM candidate's numerics or time, as
problem attributes (the DB key).

A recorded time is only served to a compile that would have measured the same thing:
``torch.set_float32_matmul_precision`` / ``torch.backends.cuda.matmul.allow_tf32`` let
ATen (cuBLAS, hipBLASLt) and Triton templates (``ALLOW_TF32``) use TF32 for float32
GEMMs, ``torch.backends.mkldnn.matmul.fp32_precision`` lets oneDNN use bf16 or TF32 on
the CPU, and the reduced-precision-reduction flags change fp16/bf16 GEMMs on a GPU.
Inductor keys its own caches on the same settings (``codecache``: the float32 matmul
precision in its autotune cache, the CUDA matmul settings in its FX-graph key).

Only settings that differ from torch's defaults become attributes, so the keys of
problems compiled with the defaults (every record so far, the shipped DB) stay as they
were.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

DEFAULT_FP32_PRECISIONS = ("none", "ieee")  # backend fp32_precision: full fp32 math


def _setting(read: object) -> str | None:
    try:
        value = read() if callable(read) else read
    except (AttributeError, RuntimeError):  # an older torch without the setting
        return None
    return str(value)


def numerics_attrs(device_type: str, dtypes: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """The non-default matmul settings that apply to a GEMM on ``device_type`` whose
    tensors have ``dtypes`` (the DB's dtype names: ``float32``, ``bfloat16``, ...)."""
    kinds = set(dtypes)
    found: list[tuple[str, str]] = []
    if "float32" in kinds:
        precision = _setting(torch.get_float32_matmul_precision)
        if precision not in (None, "highest"):
            found.append(("matmul_fp32_precision", str(precision)))
        backend = (lambda: torch.backends.mkldnn.matmul.fp32_precision) \
            if device_type == "cpu" else (lambda: torch.backends.cuda.matmul.fp32_precision)
        value = _setting(backend)
        if value is not None and value not in DEFAULT_FP32_PRECISIONS:
            found.append(("onednn_fp32_precision" if device_type == "cpu"
                          else "gpu_fp32_precision", value))
    if device_type != "cpu":
        for dtype, flag in (("float16", "allow_fp16_reduced_precision_reduction"),
                            ("bfloat16", "allow_bf16_reduced_precision_reduction")):
            if dtype in kinds:
                value = _setting(lambda flag=flag: getattr(torch.backends.cuda.matmul, flag))
                if value is not None and value != "True":
                    found.append((f"{dtype}_reduced_precision_reduction", value))
    return tuple(found)
