"""Run a block-scaled (MX) GEMM template's compiled ISA and compare it with a float64
dequantize-then-matmul reference (:mod:`inductor_flydsl.numerics.mx`).

Operands are random in their formats (every finite FP4 code; FP8 from a normal
distribution), the scales random powers of two in ``[2^-2, 2^2]`` (fp16 outputs stay
finite), so a kernel that pairs a scale with the wrong block, row or operand gives a wrong
result. With ``layout="nt_b32"`` B's scales are per 32x32 block, (ceil(N / 32), K / 32),
each row of blocks differing from the one above in every entry (a kernel that reads the
scale row of a neighbouring block fails).
"""

from __future__ import annotations

import time
from typing import Any

from .errors import EmulatorError
from .gemm import GemmEmulation, judge, note_run, run_kernel
from .machine import DEFAULT_BUDGET


def make_mx_operands(dtype: str, op: str, m: int, n: int, k: int, *, seed: int = 0,
                     layout: str = "nt"):
    """Random ``(a, b, scale_a, scale_b, bias, out)`` CPU tensors for an MX variant:
    ``a`` (M, K) and ``b`` (K, N) as K-contiguous views (``b`` is the transpose of a
    row-major (N, K) weight); ``scale_b`` (N, K / 32), or (ceil(N / 32), K / 32) for
    ``layout="nt_b32"``."""
    import torch

    from ..numerics.mx import random_operand, random_scales
    from ..template_loader import load_template

    template = load_template("gemm_mx")
    fmt_a, fmt_b, out_name = template.parse_dtype(dtype)
    b_rows = template.b_scale_rows(n, layout)
    gen = torch.Generator().manual_seed(seed)
    out_dtype = torch.bfloat16 if out_name == "bf16" else torch.float16
    a = random_operand(m, k, fmt_a, gen)
    w = random_operand(n, k, fmt_b, gen)
    scale_a = random_scales(m, k, gen)
    scale_b = (random_scales(n, k, gen) if layout == "nt"
               else random_scales(b_rows, k, gen, distinct_rows=True))
    bias = torch.randn(n, generator=gen).to(out_dtype) if op == "addmm" else None
    out = torch.full((m, n), float("nan"), dtype=out_dtype)
    return a, w.t(), scale_a, scale_b, bias, out


def emulate_mx(isa_text: str, template: Any, config: Any, *, dtype: str, op: str, m: int,
               n: int, k: int, seed: int = 0, budget: int = DEFAULT_BUDGET,
               hazards: str = "error", layout: str = "nt") -> GemmEmulation:
    """Emulate the MX kernel compiled to ``isa_text`` (for ``layout``) on one random
    problem; ``ok`` needs a correct result, no LDS race and no hazard."""
    from ..numerics.mx import check_mx

    result = GemmEmulation(ok=False, op=op, dtype=dtype, layout=layout, shape=(m, n, k),
                           batch=1)
    start = time.perf_counter()
    try:
        a, b, scale_a, scale_b, bias, out = make_mx_operands(dtype, op, m, n, k, seed=seed,
                                                             layout=layout)
        args = template.launcher_args(a, b, scale_a, scale_b, bias, out, layout=layout)
        report, bindings = run_kernel(isa_text, *template.kernel_launch(config, args),
                                      budget=budget, hazards=hazards)
        note_run(result, report)
        close = check_mx(bindings.read_back(out), a, b.t(), scale_a, scale_b, bias,
                         layout=layout)
        judge(result, close)
    except EmulatorError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def mx_tail_shape(config: Any, k_steps: int | None = None) -> tuple[int, int, int]:
    """A small problem covering a config's full tiles, its M and N tails (N a multiple of
    4: each lane stores 4 outputs; ``tile_n + 8`` is never a multiple of 32, so with
    per-block B scales the last block row is partial) and every part of its K loop
    (``stages + 2`` steps by default: prologue, the loop unrolled by ``stages``, its
    leftover step, the drain)."""
    if k_steps is None:
        k_steps = config.stages + 2
    m = config.tile_m + 5 if config.tile_m > 5 else config.tile_m
    return m, config.tile_n + 8, config.tile_k * k_steps
