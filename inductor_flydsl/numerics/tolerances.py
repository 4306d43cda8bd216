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

Fused epilogues (:func:`check_epilogue`): the reference is the epilogue's torch semantics
(``epilogue_spec.reference``, in fp32) on the float64 GEMM result, kept in fp32 (not
rounded to the output dtype). An element passes when ``|out - ref| <= prop + r * (|ref| +
rms(ref))`` with ``r = 2 * u(out_dtype) + EPILOGUE_RTOL``: twice the output rounding as
for the GEMM, plus ``EPILOGUE_RTOL = 2**-19`` (1.9e-6, about 16 fp32 ulp) for the
kernel's fp32 math (its exp, reciprocal and erf approximations are documented in
``templates/fused_epilogue.py``: below 1e-6 relative for |x| <= 2, a few 1e-6 further out,
where the GELUs are small) and the reference's own fp32 rounding (torch's tanh-GELU loses
relative accuracy for negative inputs), hence the ``rms(ref)`` term, an absolute floor at
the outputs' typical size.
``prop`` is how far the epilogue moves its output when the accumulator moves by its own
error bound ``acc_error`` (evaluated both ways on the reference, so kinks such as relu's
are covered): 0 for an exact accumulator, as in the emulator, whose inputs are small
integers times a power of two so that every fp32 sum is exact.

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
EPILOGUE_RTOL = 2.0**-19
SHORT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
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


def check_epilogue(out: Any, acc: Any, spec: Any, operands: Any,
                   acc_error: Any = None) -> CloseReport:
    """Compare a fused kernel's ``out`` with ``spec`` (an ``EpilogueSpec``) applied to the
    GEMM result ``acc`` (float64 or fp32, alpha and bias included) and its ``operands``
    (spec order); ``acc_error`` (a float or a tensor like ``acc``; None: 0) bounds how far
    the kernel's fp32 accumulator may be from ``acc``. See the module notes. Elements
    whose reference is not finite pass when ``out`` equals it."""
    import torch

    from ..problems.epilogue_spec import EpilogueSpec, reference

    fp32 = EpilogueSpec(spec.operands, spec.steps, "float32")
    ref = reference(fp32, acc.float(), operands).double()
    prop = torch.zeros_like(ref)
    if acc_error is not None:
        for sign in (1.0, -1.0):
            moved = reference(fp32, (acc.double() + sign * acc_error).float(), operands)
            prop = torch.maximum(prop, (moved.double() - ref).abs().nan_to_num(math.inf))
    r = 2 * UNIT_ROUNDOFF[SHORT_DTYPES[spec.out_dtype]] + EPILOGUE_RTOL
    finite_ref = torch.isfinite(ref)
    typical = float(ref[finite_ref].pow(2).mean().sqrt()) if finite_ref.any() else 0.0
    got = out.to(torch.float64)
    compared = finite_ref & torch.isfinite(got)
    err = torch.where(compared, got - ref, 0.0).abs()
    bound = torch.where(compared, prop + r * (ref.abs() + typical), 1.0)
    same = (got == ref) | (torch.isnan(got) & torch.isnan(ref))
    ratio = torch.where(err > 0, err / bound, 0.0)
    ratio = torch.where(compared | (~finite_ref & same), ratio, math.inf)
    numel = ratio.numel()
    return CloseReport(ok=bool((ratio <= 1.0).all()), max_abs_err=float(err.max()) if numel
                       else 0.0, worst=float(ratio.max()) if numel else 0.0,
                       atol=r * typical, rtol=r, mismatched=int((ratio > 1.0).sum()),
                       numel=numel, nonfinite=int((~torch.isfinite(got) & finite_ref).sum()))
