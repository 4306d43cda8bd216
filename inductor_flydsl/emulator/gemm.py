"""Run a dense GEMM template's compiled ISA on a random problem and compare with torch.

The inputs are built with the variant's memory layout, the kernel arguments come from
the template's own host code (``launcher_args`` and ``kernel_launch``, the same path a
real launch takes), and the result is compared with torch in float64 using the shared
tolerances of :mod:`inductor_flydsl.flydsl_backend.tolerances`.

With a fused epilogue (``epilogue``, an ``EpilogueSpec``'s canonical JSON) A, B and the
bias hold small integers times a power of two (:func:`exact_operands`), so that every
fp32 sum the kernel forms is exact and equal to the float64 GEMM: the comparison with
the epilogue's reference (``check_epilogue``) then measures the epilogue alone, at an
accumulator RMS of about 2 where the nonlinear ops curve and saturate. Its operands are
random with magnitudes in [0.5, 2] and random signs (a divisor never near 0); a ``tile``
operand is a view with a padded row stride.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import EmulatorError
from .kernel_args import Bindings, pack_kernargs
from .machine import DEFAULT_BUDGET, Machine
from .memory import GlobalMemory
from .program import parse_program

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass
class GemmEmulation:
    ok: bool
    op: str
    dtype: str
    layout: str
    shape: tuple[int, int, int]
    batch: int
    max_abs_err: float | None = None
    worst: float | None = None
    epilogue: str = ""
    races: list[str] = field(default_factory=list)
    hazards: list[str] = field(default_factory=list)
    error: str | None = None
    instructions: int = 0
    workgroups: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def make_operands(op: str, dtype: str, layout: str, m: int, n: int, k: int, *, batch: int = 2,
                  seed: int = 0):
    """Random ``(a, b, bias, out)`` CPU tensors with the variant's layout."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    tdtype = getattr(torch, TORCH_DTYPES[dtype])
    lead = (batch,) if op == "bmm" else ()

    def operand(rows: int, cols: int, col_major: bool):
        shape = (*lead, cols, rows) if col_major else (*lead, rows, cols)
        t = torch.randn(shape, generator=gen, dtype=torch.float32).to(tdtype)
        return t.transpose(-1, -2) if col_major else t

    a = operand(m, k, layout[0] == "t")
    b = operand(k, n, layout[1] == "t")
    bias = torch.randn(n, generator=gen).to(tdtype) if op == "addmm" else None
    out = torch.full((*lead, m, n), float("nan"), dtype=tdtype)
    return a, b, bias, out


def exact_operands(op: str, dtype: str, layout: str, m: int, n: int, k: int, *,
                   seed: int = 0):
    """``(a, b, bias)`` like :func:`make_operands` (mm and addmm) whose GEMM is exact in
    fp32: integers in [-3, 3] times ``2**-s`` (``s`` chosen for an accumulator RMS near
    2) and a bias of eighths in [-1, 1]."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    tdtype = getattr(torch, TORCH_DTYPES[dtype])
    scale = 2.0 ** -max(0, round(math.log2(2 * math.sqrt(k)) / 2))

    def operand(rows: int, cols: int, col_major: bool):
        shape = (cols, rows) if col_major else (rows, cols)
        t = (torch.randint(-3, 4, shape, generator=gen) * scale).to(tdtype)
        return t.t() if col_major else t

    a = operand(m, k, layout[0] == "t")
    b = operand(k, n, layout[1] == "t")
    bias = (torch.randint(-8, 9, (n,), generator=gen) / 8).to(tdtype) if op == "addmm" else None
    return a, b, bias


def random_epilogue_operands(template: Any, spec: Any, m: int, n: int, *, seed: int = 0):
    """Operands for ``spec`` (spec order): magnitudes in [0.5, 2], random signs; a ``tile``
    is an ``(m, n)`` view of an ``(m, n + 8)`` tensor (row stride ``n + 8``)."""
    import torch

    gen = torch.Generator().manual_seed(seed + 1)

    def make(shape: tuple[int, ...], dtype: Any):
        wide = (*shape[:-1], shape[-1] + 8) if len(shape) == 2 else shape
        sign = torch.randint(0, 2, wide, generator=gen) * 2 - 1
        t = (torch.empty(wide).uniform_(0.5, 2.0, generator=gen) * sign).to(dtype)
        return t[:, : shape[-1]] if len(shape) == 2 else t

    return template.epilogue_operands(spec, m, n, make)


def emulate_gemm(isa_text: str, template: Any, config: Any, *, op: str, dtype: str, layout: str,
                 m: int, n: int, k: int, batch: int = 2, seed: int = 0, alpha: float = 1.0,
                 beta: float = 1.0, budget: int = DEFAULT_BUDGET,
                 hazards: str = "error", epilogue: str = "",
                 order: str | int = "forward") -> GemmEmulation:
    """Emulate ``template``'s kernel compiled to ``isa_text`` on one random problem.

    ``ok`` needs a correct result, no LDS race and no hazard. With ``hazards="record"``
    every distinct hazard is listed and the run goes on (see :class:`~.machine.Machine`).
    ``epilogue`` (the kernel's fused ``EpilogueSpec``, canonical JSON) switches to exact
    inputs and the epilogue's reference (module notes); a refused one raises ValueError.
    """
    if epilogue:
        return _emulate_fused(isa_text, template, config, op=op, dtype=dtype, layout=layout,
                              shape=(m, n, k), seed=seed, alpha=alpha, beta=beta,
                              budget=budget, hazards=hazards, epilogue=epilogue)
    import torch

    from ..numerics.gemm import reference
    from ..numerics.tolerances import check_close

    result = GemmEmulation(ok=False, op=op, dtype=dtype, layout=layout, shape=(m, n, k),
                           batch=batch if op == "bmm" else 1)
    start = time.perf_counter()
    try:
        a, b, bias, out = make_operands(op, dtype, layout, m, n, k, batch=batch, seed=seed)
        # split-K: the kernel writes fp32 partials; the template's host code adds them,
        # or (reduce_in_launch) the kernel's last-arriving wave of each sub-tile does
        workspace = template.split_k_workspace(config, out)
        if workspace is not None:
            workspace.fill_(float("nan"))  # a partial the kernel never writes shows up
        counters = None
        if workspace is not None and getattr(config, "reduce_in_launch", 0):
            counters = torch.zeros(template.MAX_COUNTERS, dtype=torch.int32)
        args = template.launcher_args(a, b, bias, out, alpha, beta, workspace=workspace,
                                      counters=counters)
        report, bindings = run_kernel(isa_text, *template.kernel_launch(config, args),
                                      budget=budget, hazards=hazards, order=order)
        note_run(result, report)
        if counters is not None:
            left = bindings.read_back(counters)
            if int(left.count_nonzero()):
                raise EmulatorError(f"{int(left.count_nonzero())} arrival counters were not "
                                    "reset to 0 by the launch")
            got = bindings.read_back(out)
        elif workspace is not None:
            template.reduce_split_k(bindings.read_back(workspace), out)
            got = out
        else:
            got = bindings.read_back(out)
        inputs = (bias.expand(m, n), a, b) if op == "addmm" else (a, b)
        expected = reference(op, inputs, alpha, beta)
        rms_a = float(a.double().pow(2).mean().sqrt())
        rms_b = float(b.double().pow(2).mean().sqrt())
        close = check_close(got, expected, dtype, k=k, scale=max(abs(alpha) * rms_a * rms_b,
                                                                  1e-30))
        judge(result, close)
    except EmulatorError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def _emulate_fused(isa_text: str, template: Any, config: Any, *, op: str, dtype: str,
                   layout: str, shape: tuple[int, int, int], seed: int, alpha: float,
                   beta: float, budget: int, hazards: str, epilogue: str) -> GemmEmulation:
    """:func:`emulate_gemm` with a fused epilogue (exact inputs, epilogue reference)."""
    import torch

    from ..numerics.gemm import reference
    from ..numerics.tolerances import check_epilogue

    reason = template.epilogue_reason(config, op=op, epilogue=epilogue)
    if reason:
        raise ValueError(reason)
    spec = template.parse_epilogue(epilogue)
    m, n, k = shape
    result = GemmEmulation(ok=False, op=op, dtype=dtype, layout=layout, shape=shape, batch=1,
                           epilogue=epilogue)
    start = time.perf_counter()
    try:
        a, b, bias = exact_operands(op, dtype, layout, m, n, k, seed=seed)
        extras = random_epilogue_operands(template, spec, m, n, seed=seed)
        out = torch.full((m, n), float("nan"), dtype=getattr(torch, spec.out_dtype))
        args = template.launcher_args(a, b, bias, out, alpha, beta, epilogue=epilogue,
                                      extras=extras)
        report, bindings = run_kernel(isa_text, *template.kernel_launch(config, args),
                                      budget=budget, hazards=hazards)
        note_run(result, report)
        inputs = (bias.expand(m, n), a, b) if op == "addmm" else (a, b)
        acc = reference(op, inputs, alpha, beta)
        judge(result, check_epilogue(bindings.read_back(out), acc, spec, extras))
    except EmulatorError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def run_kernel(isa_text: str, kernel_args: tuple, grid: tuple, block: tuple, *,
               budget: int = DEFAULT_BUDGET, hazards: str = "error",
               order: str | int = "forward") -> tuple[Any, Bindings]:
    """Run ``isa_text``'s kernel once on ``kernel_args`` (tensors are bound into emulated
    global memory): the machine's run report and the bindings to read tensors back."""
    program = parse_program(isa_text)
    memory = GlobalMemory()
    bindings = Bindings(memory)
    kernarg = pack_kernargs(program.kernel, kernel_args, bindings)
    kernarg_address = memory.add("kernarg", kernarg, writable=False)
    machine = Machine(program, memory, budget=budget, hazards=hazards)
    return machine.run(kernarg_address, grid, block, order), bindings


def note_run(result: GemmEmulation, report: Any) -> None:
    """Copy a machine run's counts, LDS races and hazards into ``result``."""
    result.instructions, result.workgroups = report.instructions, report.workgroups
    result.races = [race.describe() for race in report.races]
    result.hazards = list(report.hazards)


def judge(result: GemmEmulation, close: Any, problem: str | None = None) -> None:
    """``result``'s verdict from a ``check_close`` report, an extra ``problem`` the runner
    found (None: none), and the run's races and hazards; the first failure is the error."""
    result.max_abs_err = close.max_abs_err if close.nonfinite == 0 else float("inf")
    result.worst = close.worst
    result.ok = close.ok and problem is None and not result.races and not result.hazards
    if not close.ok:
        result.error = mismatch_text(close)
    elif problem is not None:
        result.error = problem
    elif result.races:
        result.error = f"{len(result.races)} LDS race(s): {result.races[0]}"
    elif result.hazards:
        result.error = f"{len(result.hazards)} hazard(s): {result.hazards[0]}"


def mismatch_text(close: Any) -> str:
    """One line saying how a result missed the tolerances of ``check_close``."""
    return (f"{close.mismatched}/{close.numel} elements outside atol {close.atol:.3g} + rtol "
            f"{close.rtol:.3g} (worst {close.worst:.3g}x the bound, {close.nonfinite} "
            "non-finite)")


def tail_shape(config: Any, op: str, layout: str, k_steps: int | None = None
               ) -> tuple[int, int, int]:
    """A small problem that covers a config's full tiles, its M and N tails and every
    part of its K loop.

    M and N are one full tile plus a partial one (respecting the kernel's divisibility
    rules: N a multiple of 8, M too when A is column-major); K is ``k_steps`` tiles,
    by default ``stages + 2``: enough for the prologue, the main loop unrolled by
    ``stages``, its leftover step and the drain (per split, with split-K).
    """
    if k_steps is None:
        k_steps = config.stages + 2
    m_tail = 8 if layout[0] == "t" else 5
    m = config.tile_m + m_tail if config.tile_m > m_tail else config.tile_m
    n = config.tile_n + 8
    return m, n, config.tile_k * k_steps * config.split_k
