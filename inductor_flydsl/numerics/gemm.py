"""Numeric validation of a FlyDSL candidate against ATen, before it may win.

The candidate's output on Inductor's benchmark inputs is compared with ATen's result on
the same inputs computed in float64, with the tolerances of ``tolerances.py`` (one place
for them: rtol twice the output dtype's unit roundoff, atol scaled by sqrt(K) and the
inputs' RMS). Any element outside the bound, or non-finite, fails the candidate.
"""

from __future__ import annotations

import torch

from .tolerances import check_close

TEMPLATE_DTYPE = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


class NumericMismatch(Exception):
    pass


def reference(op: str, inputs: tuple[torch.Tensor, ...], alpha: float,
              beta: float) -> torch.Tensor:
    """ATen's result in float64 (exact for practical purposes)."""
    x = [t.double() for t in inputs]
    if op == "mm":
        return alpha * torch.mm(x[0], x[1])
    if op == "addmm":
        return torch.addmm(x[0], x[1], x[2], alpha=alpha, beta=beta)
    if op == "bmm":
        return alpha * torch.bmm(x[0], x[1])
    if op == "grouped_mm":
        return alpha * grouped_reference(*inputs)
    raise ValueError(f"no reference for op {op!r}")


def grouped_reference(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``torch._grouped_mm(a, b, offs)`` (2-D A, 3-D B) per group in float64 on the
    inputs' device; rows past the last offset are 0 (torch leaves them undefined: never
    compared). Reads ``offs`` on the host (validation only, never in a launch)."""
    out = torch.zeros(a.shape[0], b.shape[-1], dtype=torch.float64, device=a.device)
    start = 0
    for g, end in enumerate(offs.tolist()):
        end = min(max(end, start), a.shape[0])
        if end > start:
            out[start:end] = a[start:end].double() @ b[g].double()
        start = end
    return out


def _rms(t: torch.Tensor) -> float:
    return float(t.double().pow(2).mean().sqrt()) if t.numel() else 0.0


def validate_output(op: str, inputs: tuple[torch.Tensor, ...], out: torch.Tensor,
                    alpha: float, beta: float) -> None:
    """Raise NumericMismatch with a one-line summary when ``out`` is wrong."""
    if op in ("scaled_mm", "scaled_mm_bias"):  # MX: against dequantize-then-matmul
        from .mx import check_mx, scale_b_layout

        a, b, scale_a, scale_b = inputs[:4]
        bias = inputs[4] if len(inputs) > 4 else None
        layout = scale_b_layout(b.shape[1], scale_b)
        _raise_unless_close(check_mx(out, a, b.t(), scale_a, scale_b, bias, layout=layout),
                            " of the float64 MX reference")
        return
    a, b = (inputs[1], inputs[2]) if op == "addmm" else (inputs[0], inputs[1])
    expected = reference(op, inputs, alpha, beta)
    if op == "grouped_mm":  # only the rows of the groups are defined
        ends = inputs[2]
        used = min(max(int(ends.max()), 0), inputs[0].shape[0]) if ends.numel() else 0
        out, expected = out[:used], expected[:used]
    scale = max(abs(alpha) * _rms(a) * _rms(b), 1e-30)
    report = check_close(out, expected, TEMPLATE_DTYPE.get(out.dtype, "fp32"),
                         k=a.shape[-1], scale=scale)
    _raise_unless_close(report)


def _raise_unless_close(report, against: str = "") -> None:
    """NumericMismatch with a one-line summary unless ``report`` (check_close's) is ok."""
    if not report.ok:
        raise NumericMismatch(
            f"{report.mismatched}/{report.numel} elements outside atol {report.atol:.3g} + "
            f"rtol {report.rtol:.3g}{against}; worst {report.worst:.3g}x the bound, "
            f"{report.nonfinite} non-finite")


def validate_epilogue_output(epilogue: str, inputs: tuple[torch.Tensor, ...],
                             out: torch.Tensor) -> None:
    """A fused-epilogue candidate's ``out`` against the epilogue's reference semantics on
    the float64 product (``epilogue_spec.reference``); ``inputs`` are ``a, b`` and the
    op's operand slots."""
    from ..problems.epilogue_spec import EpilogueSpec
    from ..problems.epilogue_spec import reference as epilogue_reference

    spec = EpilogueSpec.from_json(epilogue)
    a, b = inputs[0], inputs[1]
    operands = [t.reshape(-1) if o.kind in ("col", "row") else t
                for t, o in zip(inputs[2:], spec.operands, strict=False)]
    product = torch.mm(a.double(), b.double())
    expected = epilogue_reference(spec, product, operands).double()
    scale = max(_rms(a) * _rms(b), float(expected.abs().mean()) if expected.numel() else 0.0,
                1e-30)
    report = check_close(out, expected, TEMPLATE_DTYPE.get(out.dtype, "fp32"),
                         k=a.shape[-1], scale=scale)
    _raise_unless_close(report, " of the fused epilogue's reference")
