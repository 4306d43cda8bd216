"""Float64 references for block-scaled (MX) GEMMs: dequantize, then matmul.

An MX operand is a K-contiguous matrix of FP8 (``float8_e4m3fn``, ``float8_e5m2``) or
FP4 (``float4_e2m1fn_x2``, two elements per byte, the lower K index in the low nibble)
values with one E8M0 scale (``float8_e8m0fnu``, ``2^(byte - 127)``, 0xFF = NaN) per 32
consecutive K elements of a row. Element values come from the formats' definitions
(the same tables the ISA emulator uses), not from torch's casts, which have no FP4.

B's scales may instead be per 32x32 block (the MX template's ``"nt_b32"`` layout, vLLM's
MXFP8 linear): ``scale_b`` is (ceil(N / 32), K / 32) and weight row ``n`` uses scale row
``n // 32``; the references take ``layout="nt_b32"`` and expand such scales to one row per
weight row (:func:`expand_block_scales`) before dequantizing.

Tolerances (:func:`validate_mx_output`): the reference dequantizes the *same* quantized
inputs, so the FP8/FP4 quantization error is not part of the comparison; every product
of two MX elements and their power-of-two scales is exact in fp32's significand (at
most 4 + 4 significant bits), so what is left is the fp32 accumulation in an order the
hardware does not specify and the final rounding to the output dtype. These are the
dense GEMM's tolerances for the output dtype (``tolerances.py``: rtol twice the output's
unit roundoff, atol growing with sqrt(K) times the RMS of the dequantized operands).
"""

from __future__ import annotations

import numpy as np
import torch

from ..problems.mx_scales import BLOCK_ROWS, is_block_scaled
from .fp import MX_FORMATS, e8m0_to_f64
from .tolerances import check_close

BLOCK = 32
# rows of B sharing one scale row, per layout of the MX template
B_SCALE_ROWS = {"nt": 1, "nt_b32": BLOCK_ROWS}
FORMAT_CODES = {"float8_e4m3fn": 0, "float8_e5m2": 1, "float4_e2m1fn_x2": 4}


def format_code(tensor: torch.Tensor) -> int:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in FORMAT_CODES:
        raise ValueError(f"{tensor.dtype} is not an MX element dtype ({sorted(FORMAT_CODES)})")
    return FORMAT_CODES[name]


def element_values(tensor: torch.Tensor) -> torch.Tensor:
    """The float64 values of a 2-D MX element tensor whose last dim is K-contiguous in
    memory order (FP4 pairs unpacked along the last dim)."""
    code = format_code(tensor)
    raw = tensor.contiguous().view(torch.uint8).cpu().numpy()
    if code == 4:
        codes = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(raw.shape[0], -1)
    else:
        codes = raw
    return torch.from_numpy(MX_FORMATS[code][2][codes])


def scale_b_layout(n: int, scale_b: torch.Tensor) -> str:
    """The MX layout of B's scales for an (N, K) weight: ``nt_b32`` when they are one per
    32x32 block, (ceil(N / 32), K / 32), else ``nt`` (one row per weight row)."""
    return "nt_b32" if scale_b.dim() == 2 and is_block_scaled(scale_b.shape[0], n) \
        else "nt"


def expand_block_scales(scale: torch.Tensor, rows: int, block_rows: int = BLOCK
                        ) -> torch.Tensor:
    """Per-block scales (ceil(rows / block_rows), K / 32) as one scale row per operand
    row, (rows, K / 32): row ``r`` gets block row ``r // block_rows``."""
    need = (rows + block_rows - 1) // block_rows
    if scale.dim() != 2 or scale.shape[0] < need:
        raise ValueError(f"block scales for {rows} rows need {need} rows, got "
                         f"{tuple(scale.shape)}")
    # scale.repeat_interleave(block_rows, 0)[:rows], as a view: no host sync anywhere
    blocks, cols = scale.shape
    return scale.unsqueeze(1).expand(blocks, block_rows, cols).reshape(-1, cols)[:rows]


def _row_scales(scale: torch.Tensor, rows: int, layout: str) -> torch.Tensor:
    if layout not in B_SCALE_ROWS:
        raise ValueError(f"layout {layout!r} not in {tuple(B_SCALE_ROWS)}")
    per = B_SCALE_ROWS[layout]
    return scale if per == 1 else expand_block_scales(scale, rows, per)


def dequantize(tensor: torch.Tensor, scale: torch.Tensor, *, block_rows: int = 1
               ) -> torch.Tensor:
    """(rows, K) float64 values of an MX operand given row-major (rows, K[/2]) and its
    (rows, K / 32) E8M0 scales, or with ``block_rows=32`` its (ceil(rows / 32), K / 32)
    scales of 32x32 blocks."""
    values = element_values(tensor)
    rows, k = values.shape
    s = torch.from_numpy(e8m0_to_f64(scale.contiguous().view(torch.uint8).cpu().numpy()))
    if block_rows != 1:
        s = expand_block_scales(s, rows, block_rows)
    return values * s[:rows, : k // BLOCK].repeat_interleave(BLOCK, dim=1)


def _e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    """float32 values of FP4 (e2m1) codes 0-15 from their bit fields, on their device:
    exponent 0 is subnormal (0 or 0.5), else (1 + m/2) * 2^(e-1); bit 3 the sign."""
    c = codes.to(torch.int32)
    e, m = (c >> 1) & 3, (c & 1).to(torch.float32)
    magnitude = torch.where(e == 0, 0.5 * m, (1 + 0.5 * m) * torch.exp2((e - 1).float()))
    return torch.where((c & 8) != 0, -magnitude, magnitude)


def dequantize_on_device(tensor: torch.Tensor, scale: torch.Tensor, *, block_rows: int = 1
                         ) -> torch.Tensor:
    """:func:`dequantize` in float32 with torch ops on the tensors' device: FP8 elements
    and E8M0 scales by torch's own casts, FP4 from its bit fields. No host copy, no host
    sync, no table moved to the device: safe inside a CUDA/HIP graph capture, where the
    MX ops' run-time fallback may run. float32 holds every element and every
    power-of-two scale exactly (the casts equal the formats' tables for all 256 codes).
    ``block_rows=32``: ``scale`` holds one row per 32 rows (32x32 blocks)."""
    if format_code(tensor) == 4:
        raw = tensor.contiguous().view(torch.uint8)
        codes = torch.stack([raw & 0xF, raw >> 4], dim=-1).reshape(raw.shape[0], -1)
        values = _e2m1_values(codes)
    else:
        values = tensor.to(torch.float32)
    rows, k = values.shape
    s = scale.contiguous().view(torch.float8_e8m0fnu)[:, : k // BLOCK].to(torch.float32)
    if block_rows != 1:
        s = expand_block_scales(s, rows, block_rows)
    s = s[:rows]
    return values * s.repeat_interleave(BLOCK, dim=1)


def mx_product_into(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                    scale_b: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, *, layout: str = "nt") -> None:
    """``out = (A * 2^sa) @ (B * 2^sb) (+ bias)`` for the MX ops' operands (``b`` the
    (K, N) K-contiguous view of a row-major (N, K) weight), dequantized on the device
    and multiplied in float32: what an MX op computes when its kernel cannot run.
    ``layout="nt_b32"``: ``scale_b`` per 32x32 block, (ceil(N / 32), K / 32)."""
    if layout not in B_SCALE_ROWS:
        raise ValueError(f"layout {layout!r} not in {tuple(B_SCALE_ROWS)}")
    product = dequantize_on_device(a, scale_a) @ dequantize_on_device(
        b.t(), scale_b, block_rows=B_SCALE_ROWS[layout]).T
    if bias is not None:
        product = product + bias.float()
    out.copy_(product)


def _dequantized_product(a, b_t, scale_a, scale_b, bias, layout="nt"):
    scale_b = _row_scales(scale_b.view(torch.uint8), b_t.shape[0], layout)
    deq_a, deq_b = dequantize(a, scale_a), dequantize(b_t, scale_b)
    out = deq_a @ deq_b.T
    if bias is not None:
        out = out + bias.double().cpu()
    return out, deq_a, deq_b


def mx_reference(a: torch.Tensor, b_t: torch.Tensor, scale_a: torch.Tensor,
                 scale_b: torch.Tensor, bias: torch.Tensor | None = None, *,
                 layout: str = "nt") -> torch.Tensor:
    """``(A * 2^sa) @ (B * 2^sb)^T (+ bias)`` in float64 on the CPU; ``b_t`` is B as
    (N, K[/2]) rows (the K-contiguous weight); ``scale_b`` is (N, K / 32), or with
    ``layout="nt_b32"`` (ceil(N / 32), K / 32) (one scale per 32x32 block)."""
    return _dequantized_product(a, b_t, scale_a, scale_b, bias, layout)[0]


def check_mx(out: torch.Tensor, a: torch.Tensor, b_t: torch.Tensor, scale_a: torch.Tensor,
             scale_b: torch.Tensor, bias: torch.Tensor | None = None, *,
             layout: str = "nt"):
    """A :class:`~.tolerances.CloseReport` of ``out`` against :func:`mx_reference`
    (``layout`` as there)."""
    expected, deq_a, deq_b = _dequantized_product(a, b_t, scale_a, scale_b, bias, layout)
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}[out.dtype]
    rms = float(deq_a.pow(2).mean().sqrt() * deq_b.pow(2).mean().sqrt())
    return check_close(out.cpu(), expected, dtype, k=deq_a.shape[1], scale=max(rms, 1e-30))


def random_operand(rows: int, k: int, fmt: str, gen: torch.Generator) -> torch.Tensor:
    """A random (rows, K) MX operand of format ``fmt`` (``e4m3``, ``e5m2``, ``e2m1``;
    FP4 packed as (rows, K / 2)): every finite code appears."""
    if fmt == "e2m1":
        codes = torch.randint(0, 16, (rows, k), generator=gen, dtype=torch.uint8)
        packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
        return packed.view(torch.float4_e2m1fn_x2)
    dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]
    return (torch.randn(rows, k, generator=gen) * 2).to(dtype)


def random_scales(rows: int, k: int, gen: torch.Generator, spread: int = 2, *,
                  distinct_rows: bool = False) -> torch.Tensor:
    """(rows, K / 32) E8M0 scales ``2^e``, ``e`` uniform in ``[-spread, spread]``; with
    ``distinct_rows`` every scale differs from the one above it (so a kernel reading a
    neighbouring row's scales gets a different result)."""
    e = torch.randint(127 - spread, 128 + spread, (rows, k // BLOCK), generator=gen,
                      dtype=torch.int16)
    if distinct_rows and spread > 0:
        for r in range(1, rows):
            same = e[r] == e[r - 1]
            # the next exponent in the range, wrapping: still in [-spread, spread]
            e[r][same] = (e[r][same] - (127 - spread) + 1) % (2 * spread + 1) + 127 - spread
    return e.to(torch.uint8).view(torch.float8_e8m0fnu)
