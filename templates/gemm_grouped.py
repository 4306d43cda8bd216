"""Grouped GEMM template (mixture-of-experts) for AMD CDNA GPUs, written in FlyDSL.

Computes ``torch._grouped_mm(A, B, offs)`` for 2-D ragged activations and 3-D weights:
``out[s_g:e_g] = A[s_g:e_g] @ B[g]`` for each group ``g`` of ``G``, where ``e_g =
offs[g]`` and ``s_g = offs[g - 1]`` (0 for the first group), with fp32 MFMA
accumulation and the output in the input dtype (bf16 or fp16).

Operands:

* ``A`` is ``(T, K)`` row-major (``stride(K) == 1``): T tokens, sorted by group.
* ``B`` is ``(G, K, N)``. Layout letter 1: ``n`` = row-major in its last two dims
  (``stride(N) == 1``), ``t`` = K-contiguous (``stride(K) == 1``, i.e. ``W.transpose(-2,
  -1)`` of ``(G, N, K)`` weights). Layout letter 0 is always ``n``.
* ``offs`` is an int32 vector of ``G`` non-decreasing group end offsets, the last at most
  ``T`` (rows past it are not written, as in torch). Empty groups are allowed. The kernel
  clamps each end to [previous end, T], so bad offsets never make it read or write
  outside A or ``out`` (their groups are then computed short, never past the tokens).
* ``out`` is ``(T, N)`` with ``stride(N) == 1``.

The kernel is the dense template's (``gemm_dense``: direct-to-LDS loads, XOR-swizzled
LDS, the multi-stage pipeline, the MFMA tiling and epilogue are shared, not copied) with
its ``grouped_mm`` tile scheduler: the grid covers an upper bound of the number of
output tiles of all groups together (``sum ceil(rows_g / tile_m) <= (T + G * (tile_m -
1)) / tile_m``, times the N tiles), each workgroup scans ``offs`` on the GPU to find the
group and the M tile it owns, and workgroups past the real count skip the rest of the
kernel after that scan (no operand load, no store). No host synchronization reads
``offs``; empty groups own no tile; a one-token group costs one tile. The scan is a
scalar loop over the groups (G loads per workgroup, from the scalar cache after the
first workgroups).

There is no bias and no split-K: torch 2.13's ``_grouped_mm`` refuses a bias (its
Inductor lowering does not pass one), and the groups already give skinny problems
many workgroups. K must be a multiple of ``tile_k`` and hold at least ``stages - 1`` K
steps; N tails are handled in the kernel.
"""

import functools
from collections.abc import Callable
from typing import Any

from . import gemm_dense as _dense

GemmConfig = _dense.GemmConfig

__all__ = ["GemmConfig", "build_gemm", "kernel_launch", "launcher_args", "make_launcher"]

DTYPES = _dense.DTYPES
LAYOUTS = ("nn", "nt")
OPS = (_dense.GROUPED_OP,)
ARCHS = _dense.ARCHS
VEC = _dense.VEC
ELEM_BYTES = _dense.ELEM_BYTES
MAX_SPAN_ELEMENTS = _dense.MAX_SPAN_ELEMENTS
TILE_K_CHOICES = _dense.TILE_K_CHOICES
MAX_GROUPS = 4096  # offs entries the scan reads per workgroup; beyond it the scan dominates

launch_geometry = _dense.launch_geometry
kernel_launch = _dense.kernel_launch
lds_bytes = _dense.lds_bytes
loads_per_thread = _dense.loads_per_thread
stages_reason = _dense.stages_reason
uses_async_lds = _dense.uses_async_lds
dtype_name = _dense.dtype_name


def split_k_reason(config: GemmConfig, op: str = _dense.GROUPED_OP) -> str | None:
    """Why ``config`` cannot serve a grouped GEMM (None when it can)."""
    if config.split_k > 1:
        return f"split_k={config.split_k}: the grouped kernel does not split K"
    return None


def _check_variant(*, dtype: str = "bf16", layout: str = "nt", op: str = _dense.GROUPED_OP,
                   arch: str = "gfx950") -> None:
    for name, value, allowed in (("dtype", dtype, DTYPES), ("layout", layout, LAYOUTS),
                                 ("op", op, OPS), ("arch", arch, ARCHS)):
        if value not in allowed:
            raise ValueError(f"{name}={value!r} not in {allowed}")


def divisibility_requirements(config: GemmConfig, op: str, layout: str) -> dict[str, Any]:
    """Shape and alignment constraints of a grouped problem (see the dense template's
    :func:`~templates.gemm_dense.divisibility_requirements` for the keys). Groups may
    have any number of rows, zero included; ``m_multiple`` is 1."""
    _check_variant(layout=layout, op=op)
    req = _dense.divisibility_requirements(config, "bmm", layout)
    req.update(m_multiple=1, k_multiple=config.tile_k, k_min=config.tile_k *
               max(1, config.stages - 1), bias_unit_stride=False, max_groups=MAX_GROUPS,
               offs_dtype="int32")
    return req


def make_launcher(config: GemmConfig, *, dtype: str, layout: str, op: str = _dense.GROUPED_OP,
                  arch: str) -> Callable:
    """Build a fresh (uncached) ``@flyc.jit`` launcher; see :func:`build_gemm`."""
    config.validate()
    _check_variant(dtype=dtype, layout=layout, op=op, arch=arch)
    reason = split_k_reason(config) or stages_reason(config, arch)
    if reason:
        raise ValueError(reason)
    return _dense._make_kernel(config, dtype, layout, _dense.GROUPED_OP, arch)


@functools.lru_cache(maxsize=256)
def _build_cached(config: GemmConfig, dtype: str, layout: str, arch: str) -> Callable:
    return make_launcher(config, dtype=dtype, layout=layout, arch=arch)


def build_gemm(config: GemmConfig, *, dtype: str, layout: str, op: str = _dense.GROUPED_OP,
               arch: str) -> Callable:
    """The ``@flyc.jit`` launcher of one variant (cached); its positional arguments are
    :func:`launcher_args`' result, then an optional ``stream=``."""
    config.validate()
    _check_variant(dtype=dtype, layout=layout, op=op, arch=arch)
    return _build_cached(config, dtype, layout, arch)


def infer_layout(a, b) -> str:
    """Layout string of a 2-D A ``(T, K)`` and a 3-D B ``(G, K, N)`` from their strides."""
    if a.dim() != 2 or b.dim() != 3:
        raise ValueError(f"grouped GEMM needs a 2-D A and a 3-D B, got {a.dim()}-D and "
                         f"{b.dim()}-D")
    if a.stride(-1) != 1:
        raise ValueError(f"A must be row-major (stride(K) == 1), got strides {tuple(a.stride())}")
    return "n" + _dense.infer_layout(a, b)[1]


def split_k_workspace(config: GemmConfig, out) -> None:
    """Grouped launches never split K (no workspace)."""
    return None


def launcher_args(a, b, offs, out) -> tuple:
    """Positional arguments of a :func:`build_gemm` launcher for these tensors (the dense
    launcher's argument list: the group stride of B in ``batch_b``, ``offs`` and ``G``
    at the end)."""
    layout = infer_layout(a, b)
    if offs.dim() != 1 or offs.shape[0] != b.shape[0]:
        raise ValueError(f"offs must be a vector of {b.shape[0]} group ends, got shape "
                         f"{tuple(offs.shape)}")
    if str(offs.dtype) != "torch.int32" or offs.stride(0) != 1:
        raise ValueError("offs must be a contiguous int32 vector")
    if out.stride(-1) != 1:
        raise ValueError(f"out must have unit stride along N, got strides {tuple(out.stride())}")
    t, k = a.shape
    groups, _, n = b.shape
    ldb = b.stride(-2) if layout[1] == "n" else b.stride(-1)
    return (a, b, out, out, t, n, k, a.stride(0), ldb, out.stride(0), 0, b.stride(0), 0, 1,
            1.0, 0.0, offs, groups)


def example_args(config: GemmConfig, *, dtype: str, layout: str,
                 op: str = _dense.GROUPED_OP) -> tuple:
    """Small CPU placeholder arguments with the variant's strides, for compile-only calls."""
    import torch

    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    groups, n, k = 2, config.tile_n, 2 * config.tile_k
    t = 2 * config.tile_m
    a = torch.zeros(t, k, dtype=torch_dtype)
    if layout[1] == "t":
        b = torch.zeros(groups, n, k, dtype=torch_dtype).transpose(-1, -2)
    else:
        b = torch.zeros(groups, k, n, dtype=torch_dtype)
    offs = torch.tensor([config.tile_m, t], dtype=torch.int32)
    out = torch.zeros(t, n, dtype=torch_dtype)
    return launcher_args(a, b, offs, out)


def over_int32_span(a, b, out) -> bool:
    """True when an operand reaches past the kernel's int32 element offsets (the launch
    then computes with ATen instead)."""
    return any(sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1
               > MAX_SPAN_ELEMENTS for t in (a, b, out) if t.numel())


def launch(a, b, offs, out, config: GemmConfig, stream=None, *, runner) -> None:
    """Run the kernel on GPU tensors, writing into preallocated ``out`` (no host sync),
    through ``runner`` (see ``gemm_dense.launch``). Operands past the int32 offsets are
    computed with ``torch._grouped_mm`` instead."""
    import torch

    if over_int32_span(a, b, out):
        out.copy_(torch._grouped_mm(a, b, offs=offs))
        return
    variant = _dense.Variant("gemm_grouped", config, runner.arch(a), dtype_name(a),
                             infer_layout(a, b), _dense.GROUPED_OP)
    runner.run(variant, launcher_args(a, b, offs, out), runner.stream(a, stream), a)
