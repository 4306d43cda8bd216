"""Numeric validation of a FlyDSL candidate against ATen, before it may win.

The candidate's output on Inductor's benchmark inputs is compared with ATen's output on
the same inputs. Tolerances (bf16 has 8 mantissa bits, fp16 11; both accumulate in fp32,
so the error grows with the reduction length K roughly like sqrt(K) ulps of the output):

- bf16: atol = rtol = 1.6e-2 * max(1, sqrt(K / 1024))
- fp16: atol = rtol = 2e-3  * max(1, sqrt(K / 1024))

and at most 0.1% of the elements may exceed them (a wrong kernel, e.g. a bad tile offset,
misses far more). Non-finite values where ATen's are finite always fail.
"""

from __future__ import annotations

import math

import torch

BASE_TOLERANCE = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
MAX_BAD_FRACTION = 1e-3


class NumericMismatch(Exception):
    pass


def tolerance(dtype: torch.dtype, k: int) -> float:
    base = BASE_TOLERANCE.get(dtype, 1e-4)
    return base * max(1.0, math.sqrt(k / 1024))


def reference(op: str, inputs: tuple[torch.Tensor, ...], alpha: float,
              beta: float) -> torch.Tensor:
    if op == "mm":
        return torch.mm(inputs[0], inputs[1]) * alpha if alpha != 1 else torch.mm(*inputs[:2])
    if op == "addmm":
        return torch.addmm(inputs[0], inputs[1], inputs[2], alpha=alpha, beta=beta)
    if op == "bmm":
        return torch.bmm(inputs[0], inputs[1]) * alpha if alpha != 1 else torch.bmm(*inputs[:2])
    raise ValueError(f"no reference for op {op!r}")


def check_close(actual: torch.Tensor, expected: torch.Tensor, k: int) -> None:
    """Raise NumericMismatch with a one-line summary when ``actual`` is wrong."""
    tol = tolerance(expected.dtype, k)
    a, e = actual.float(), expected.float()
    finite = torch.isfinite(e)
    if bool((~torch.isfinite(a) & finite).any()):
        raise NumericMismatch("non-finite values where ATen's output is finite")
    bad = ((a - e).abs() > tol + tol * e.abs()) & finite
    fraction = float(bad.float().mean()) if bad.numel() else 0.0
    if fraction > MAX_BAD_FRACTION:
        worst = float(((a - e).abs() * finite).max())
        raise NumericMismatch(f"{fraction:.2%} of elements off by more than {tol:.3g} "
                              f"(+rel); worst abs error {worst:.3g}")
