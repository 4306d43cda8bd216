"""Numeric tolerances of the FlyDSL GEMM kernels, in one place.

The reference is torch in **float64** on the same (already bf16/fp16-valued) inputs, so
it is exact for practical purposes and the whole error budget belongs to the kernel. An
element passes when ``|out - ref| <= atol + rtol * |ref|`` with:

* ``rtol = 2 * u`` where ``u`` is the unit roundoff of the output dtype (bf16
  ``2**-8``, fp16 ``2**-11``). The kernel accumulates in fp32 and rounds once to the
  output dtype: that rounding is at most ``u * |ref|``; the factor 2 leaves room for the
  fp32 accumulation and the alpha/beta epilogue.
* ``atol = 2 * u * sqrt(K) * scale``. With zero-mean inputs of RMS ``s_a`` and ``s_b``
  an output element has RMS ``sqrt(K) * s_a * s_b`` (pass ``scale = |alpha| * s_a *
  s_b``), so ``atol`` is the rounding error at a *typical* output magnitude. It covers
  elements near zero after cancellation, where ``rtol * |ref|`` vanishes but the fp32
  accumulation error (about ``2**-24 * K * s_a * s_b``, far below ``atol`` for any
  K < 2**32) does not. A fixed ``atol`` would be too loose for small K and too tight
  for large K; ``sqrt(K)`` scaling keeps it one output ulp at typical magnitude.

For bf16 and K = 4096 that is rtol 0.78 % and atol 0.5 against outputs of RMS 64: tight
enough that any indexing bug (a lost K step, a wrong tile, a stale LDS buffer) fails by
orders of magnitude, loose enough that torch's own bf16 GEMM passes. ``check_close``
reports that margin so the validation can also check torch's low-precision result
against the same bound (a self-test of the tolerance).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": 2.0**-24}
RTOL_FACTOR = 2.0
ATOL_FACTOR = 2.0


def tolerance(dtype: str, k: int, scale: float = 1.0) -> tuple[float, float]:
    """``(atol, rtol)`` for a GEMM with reduction length ``k`` and output dtype ``dtype``."""
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"no tolerance for dtype {dtype!r}; known: {sorted(UNIT_ROUNDOFF)}")
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    u = UNIT_ROUNDOFF[dtype]
    return ATOL_FACTOR * u * math.sqrt(k) * abs(scale), RTOL_FACTOR * u


@dataclass(frozen=True)
class CloseReport:
    """Outcome of one comparison; ``worst`` is max ``|err| / (atol + rtol*|ref|)``."""

    ok: bool
    max_abs_err: float
    worst: float
    atol: float
    rtol: float
    mismatched: int
    numel: int
    nonfinite: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_close(out: Any, ref: Any, dtype: str, k: int, scale: float = 1.0) -> CloseReport:
    """Compare a kernel output with a float64 reference of the same shape (torch tensors)."""
    import torch

    atol, rtol = tolerance(dtype, k, scale)
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: out {tuple(out.shape)} vs ref {tuple(ref.shape)}")
    got = out.to(torch.float64)
    want = ref.to(torch.float64)
    finite = torch.isfinite(got)
    nonfinite = int((~finite).sum().item())
    err = (got - want).abs()
    bound = atol + rtol * want.abs()
    ratio = torch.where(finite, err / bound, torch.full_like(err, math.inf))
    numel = ratio.numel()
    worst = float(ratio.max().item()) if numel else 0.0
    mismatched = int((ratio > 1.0).sum().item())
    max_abs = float(torch.where(finite, err, torch.zeros_like(err)).max().item()) if numel else 0.0
    return CloseReport(ok=mismatched == 0, max_abs_err=max_abs, worst=worst, atol=atol,
                       rtol=rtol, mismatched=mismatched, numel=numel, nonfinite=nonfinite)
