"""Can the MX template (``templates/gemm_mx.py``) serve a ``scaled_mm`` problem?

Inductor names both ``torch._scaled_mm`` and torch 2.13's ``torch._scaled_mm_v2`` /
``F.scaled_mm`` selections ``scaled_mm``, with inputs ``[A, B, scale_a, scale_b(, bias)]``
(the recipe and swizzle arguments of the v2 API are not passed on: its lowering asserts
no swizzle, and its ATen choice calls ``_scaled_mm``). A problem is MX when A and B are
MX element dtypes (``float8_e4m3fn``, ``float8_e5m2``, ``float4_e2m1fn_x2``) and both
scales are ``float8_e8m0fnu``; every other ``scaled_mm`` (FP8 with fp32 tensor-wise or
row-wise scales, NVFP4) is refused with its reason.

:func:`mx_problem_reasons` returns every reason a problem is refused (empty: eligible):
arch (only gfx950 has scaled MFMAs), formats, output dtype, A row-major and B
K-contiguous (``a @ w.t()``), K a multiple of 128 (the smallest MX tile_k), N of 8,
16-byte aligned rows and bases, the scales' layout (unswizzled ``(M, K/32)`` and
``(N, K/32)`` row-major E8M0 blocks: torch's padded ``SWIZZLE_32_4_4`` layout is refused,
as is anything that is not exactly one scale per 32 K elements of a row), a bias of the
output dtype, static shapes and the kernel's int32 offsets.

B's scales may also be one per 32x32 block of the weight, ``(ceil(N/32), K/32)``: vLLM's
MXFP8 linear (``vllm::rocm_mxfp8_block32_gemm``, lowered by the plugin to a
``scaled_mm`` selection) keeps a checkpoint's block scales so. The template's ``nt_b32``
layout reads them (:func:`mx_layout`), for e4m3 x e4m3 only (``LAYOUT_DTYPES``): any
other format pairing with block scales is refused with that reason.
"""

from __future__ import annotations

import math
from typing import Any

from ...problems.mx_scales import block_scale_rows, is_block_scaled
from ...problems.problem import Problem, TensorSpec
from ...template_loader import load_template

MX_OP = "scaled_mm"
MX_ARCHS = ("gfx950",)
FORMATS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float4_e2m1fn_x2": "e2m1"}
OUT_DTYPES = {"bfloat16": "bf16", "float16": "fp16"}
SCALE_DTYPE = "float8_e8m0fnu"
BLOCK = 32
N_MULTIPLE = 8  # out rows 16-byte aligned; each lane stores 4 outputs


def is_mx(problem: Problem) -> bool:
    """A ``scaled_mm`` problem with MX element operands and E8M0 scales."""
    if problem.op != MX_OP or len(problem.inputs) < 4:
        return False
    a, b, sa, sb = problem.inputs[:4]
    return a.dtype in FORMATS and b.dtype in FORMATS and SCALE_DTYPE in (sa.dtype, sb.dtype)


def logical_k(a: TensorSpec) -> int:
    """K in elements of a row-major A (FP4 packs two per byte)."""
    return a.size[-1] * (2 if a.dtype == "float4_e2m1fn_x2" else 1)


def is_block32_scale(scale: TensorSpec, n: int, blocks: int) -> bool:
    """B's scales are one per 32x32 block of an (N, K) weight: ``(ceil(N/32), K/32)``
    (and not also one per row: N > 1)."""
    return len(scale.size) == 2 and is_block_scaled(scale.size[0], n) and \
        scale.size[1] == blocks


def mx_layout(problem: Problem) -> str:
    """The MX template layout of an MX problem: ``nt_b32`` when B's scales are per 32x32
    block, else ``nt``."""
    a, b, _, sb = problem.inputs[:4]
    k = logical_k(a)
    return "nt_b32" if is_block32_scale(sb, b.size[1], k // BLOCK) else "nt"


def variant_dtype(problem: Problem) -> str:
    """The template variant (``<a>x<b>_<out>``) of an eligible MX problem."""
    a, b = problem.inputs[:2]
    return f"{FORMATS[a.dtype]}x{FORMATS[b.dtype]}_{OUT_DTYPES[problem.output.dtype]}"


def _span_bytes(t: TensorSpec) -> int:
    itemsize = 2 if t.dtype in OUT_DTYPES else 1
    return (sum((s - 1) * st for s, st in zip(t.size, t.stride, strict=True)) + 1) * itemsize


def _scale_reasons(name: str, scale: TensorSpec, rows: int, blocks: int) -> list[str]:
    if scale.dtype != SCALE_DTYPE:
        return [f"{name} is {scale.dtype}, not {SCALE_DTYPE} (MX block scales)"]
    if tuple(scale.size) != (rows, blocks):
        padded = (-(-rows // 128) * 128) * (-(-blocks // 4) * 4)
        what = ("the padded layout of torch's swizzled (32x4x4) MX scales"
                if math.prod(scale.size) == padded else "not one scale per 32 K elements of a row")
        return [f"{name} is {tuple(scale.size)}, not ({rows}, {blocks}): {what}; the template "
                "reads unswizzled row-major (rows, K/32) scales"]
    if scale.stride[-1] != 1 or (rows > 1 and scale.stride[0] % 4):
        return [f"{name} strides {tuple(scale.stride)}: the template needs unit stride along K "
                "and a row stride that is a multiple of 4 bytes"]
    return []


def mx_problem_reasons(problem: Problem, *, arch: str | None = None,
                       offsets: tuple[int, ...] = ()) -> list[str]:
    """Why the MX template cannot compute ``problem`` (empty: it can). ``arch`` is the
    compile target when known; ``offsets`` the inputs' storage offsets in elements."""
    reasons: list[str] = []
    if arch is not None and arch not in MX_ARCHS:
        reasons.append(f"arch {arch} has no scaled MFMA (v_mfma_scale_f32_*_f8f6f4 is CDNA4, "
                       "gfx950, only)")
    if problem.op != MX_OP:
        return [*reasons, f"op {problem.op} is not scaled_mm"]
    if len(problem.inputs) not in (4, 5):
        return [*reasons, f"scaled_mm with {len(problem.inputs)} inputs (A, B, scale_a, "
                "scale_b and an optional bias expected)"]
    a, b, sa, sb = problem.inputs[:4]
    bias = problem.inputs[4] if len(problem.inputs) == 5 else None
    if problem.dynamic:
        reasons.append(f"dynamic shapes: symbolic {problem.symbolic_text()}; the MX template "
                       "is offered for static shapes")
    not_mx = False
    for name, t in (("A", a), ("B", b)):
        if t.dtype not in FORMATS:
            not_mx = True
            reasons.append(f"{name} is {t.dtype}: not an MX element dtype "
                           f"({', '.join(FORMATS)})")
    if sa.dtype == "float32" or sb.dtype == "float32":
        not_mx = True
        reasons.append("fp32 scales: tensor-wise or row-wise FP8 scaling, not MX block "
                       "scales (E8M0 per 32 K elements)")
    if problem.output.dtype not in OUT_DTYPES:
        reasons.append(f"output dtype {problem.output.dtype} is not bfloat16 or float16")
    if len(a.size) != 2 or len(b.size) != 2:
        return [*reasons, "scaled_mm operands must be 2-D"]
    if not_mx:  # the layout and scale checks below are about MX operands
        return reasons
    if a.stride[-1] != 1:
        reasons.append("A is not row-major (K-contiguous)")
    if b.stride[0] != 1:
        reasons.append("B is not K-contiguous (the template takes a @ w.t() with a row-major "
                       "weight w)")
    m, n = a.size[0], b.size[1]
    k = logical_k(a)
    k_b = b.size[0] * (2 if b.dtype == "float4_e2m1fn_x2" else 1)
    if k_b != k:
        reasons.append(f"A and B hold different K ({k} and {k_b} elements)")
    if min(m, n, k) == 0:
        return [*reasons, "an empty dimension (M, N or K is 0)"]
    tpl = load_template("gemm_mx")
    min_tile_k = min(tpl.TILE_K_CHOICES)
    if k % min_tile_k:
        reasons.append(f"K={k} is not a multiple of {min_tile_k} (the smallest MX tile_k; "
                       "one scaled MFMA takes 128 K elements)")
    if n % N_MULTIPLE:
        reasons.append(f"N={n} is not a multiple of {N_MULTIPLE}")
    for name, t, lead in (("A", a, a.stride[0]), ("B", b, b.stride[1])):
        row_bytes = lead * (1 if t.dtype in FORMATS else 2)
        if row_bytes % 16:
            reasons.append(f"{name}'s rows are {row_bytes} bytes apart, not a multiple of 16")
        if _span_bytes(t) > tpl.MAX_SPAN_UNITS * tpl.UNIT_BYTES:
            reasons.append(f"{name} spans {_span_bytes(t)} bytes, over the kernel's int32 "
                           "offsets")
    blocks = k // BLOCK
    reasons += _scale_reasons("scale_a", sa, m, blocks)
    if is_block32_scale(sb, n, blocks):  # per 32x32 block: the nt_b32 layout
        reasons += _scale_reasons("scale_b", sb, block_scale_rows(n), blocks)
        served = getattr(tpl, "LAYOUT_DTYPES", {}).get("nt_b32", ())
        dtype = f"{FORMATS[a.dtype]}x{FORMATS[b.dtype]}_" \
            f"{OUT_DTYPES.get(problem.output.dtype, problem.output.dtype)}"
        if dtype not in served:
            reasons.append(f"scale_b per 32x32 block is read for {', '.join(served) or 'no'}"
                           f" variants, not {dtype} (vLLM's MXFP8 linear is e4m3 x e4m3)")
    else:
        reasons += _scale_reasons("scale_b", sb, n, blocks)
    if bias is not None and (bias.dtype != problem.output.dtype or len(bias.size) != 1
                             or bias.size[0] != n or bias.stride[0] != 1):
        reasons.append("bias is not a contiguous length-N vector of the output dtype")
    for i, offset in enumerate(offsets[:2]):
        if offset % 16:
            reasons.append(f"input {i} starts {offset} bytes into its storage: not 16-byte "
                           "aligned")
    return reasons


def mx_candidate_configs(problem: Problem, arch: str, *, limit: int = 12) -> list[Any]:
    """The MX DEFAULT configs for an eligible ``problem`` on ``arch``: those whose tile_k
    divides K with enough K steps and whose LDS fits, the tiles that waste the least of
    M x N first (ties: the larger tile)."""
    from .configs import mx_default_configs

    tpl = load_template("gemm_mx")
    dtype = variant_dtype(problem)
    a = problem.inputs[0]
    m, n, k = a.size[0], problem.output.size[-1], logical_k(a)
    usable = []
    layout = mx_layout(problem)
    for c in mx_default_configs(dtype):
        req = tpl.divisibility_requirements(c, "mm", layout)
        if k % req["k_multiple"] or k < req["k_min"] or tpl.resource_reason(c, dtype, arch):
            continue
        tiles = -(-m // c.tile_m) * -(-n // c.tile_n)
        waste = tiles * c.tile_m * c.tile_n / (m * n)
        usable.append((round(waste, 2), -c.tile_m * c.tile_n, -c.tile_k, c))
    usable.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in usable[:limit]]


MX_DTYPE_ALIASES = {"mxfp8": ("float8_e4m3fn", "float8_e4m3fn"),
                    "mxfp4": ("float4_e2m1fn_x2", "float4_e2m1fn_x2")}
_SHORT_FORMATS = {short: name for name, short in FORMATS.items()}


def parse_mx_dtype(text: str) -> tuple[str, str]:
    """``mxfp8``, ``mxfp4`` or ``<a>x<b>`` (``e4m3``, ``e5m2``, ``e2m1``) -> the torch
    dtype names of A and B."""
    text = text.lower()
    if text in MX_DTYPE_ALIASES:
        return MX_DTYPE_ALIASES[text]
    parts = text.split("x")
    if len(parts) != 2 or any(p not in _SHORT_FORMATS for p in parts):
        raise ValueError(f"MX dtype {text!r}: use mxfp8, mxfp4 or <a>x<b> with formats "
                         f"{', '.join(_SHORT_FORMATS)} (e.g. e4m3xe2m1)")
    return _SHORT_FORMATS[parts[0]], _SHORT_FORMATS[parts[1]]


def alias_variant(alias: str, out: str = "bf16") -> str:
    """The template variant (``<a>x<b>_<out>``) of ``mxfp8``, ``mxfp4`` or ``<a>x<b>``."""
    fmt_a, fmt_b = parse_mx_dtype(alias)
    return f"{FORMATS[fmt_a]}x{FORMATS[fmt_b]}_{out}"


def synthetic_mx_problem(m: int, n: int, k: int, *, formats: tuple[str, str],
                         out_dtype: str = "bfloat16", bias: bool = False,
                         swizzled_scales: bool = False, block_scaled_weight: bool = False
                         ) -> Problem:
    """The ``scaled_mm`` problem Inductor sees for ``a @ w.t()`` with a row-major (M, K)
    ``a`` and (N, K) ``w`` in MX formats (FP4 packed two per byte) and their E8M0 scales:
    unswizzled (rows, K/32), or with ``swizzled_scales`` torch's padded 32x4x4 layout
    (rows rounded up to 128, blocks to 4, flattened). ``block_scaled_weight``: the
    weight's scales per 32x32 block, (ceil(N/32), K/32), and the problem as vLLM's MXFP8
    linear's selection keys it (its op's ``out_dtype`` the only attribute)."""
    if min(m, n, k) <= 0:
        raise ValueError("sizes must be positive")
    fmt_a, fmt_b = formats

    def packed(fmt: str) -> int:
        return k // 2 if fmt == "float4_e2m1fn_x2" else k

    a = TensorSpec(fmt_a, (m, packed(fmt_a)), (packed(fmt_a), 1))
    b = TensorSpec(fmt_b, (packed(fmt_b), n), (1, packed(fmt_b)))

    def scale(rows: int) -> TensorSpec:
        blocks = max(k // BLOCK, 1)
        if swizzled_scales:
            count = (-(-rows // 128) * 128) * (-(-blocks // 4) * 4)
            return TensorSpec(SCALE_DTYPE, (count,), (1,))
        return TensorSpec(SCALE_DTYPE, (rows, blocks), (blocks, 1))

    inputs = [a, b, scale(m), scale(block_scale_rows(n) if block_scaled_weight else n)]
    if bias:
        inputs.append(TensorSpec(out_dtype, (n,), (1,)))
    output = TensorSpec(out_dtype, (m, n), (n, 1))
    attrs = (("out_dtype", out_dtype),) if block_scaled_weight else \
        (("out_dtype", out_dtype), ("use_fast_accum", False))
    return Problem(op=MX_OP, inputs=tuple(inputs), output=output, attrs=attrs)
