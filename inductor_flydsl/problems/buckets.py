"""Dynamic-M buckets: serving a GEMM whose M the DB lacks, or whose M is symbolic.

Bucketing: M goes up to the next power of two, from 1 to 8192 (M = 300 -> 512; M = 8192
-> 8192). Larger M has no bucket. The tuning presets sweep exactly these sizes, so a
bucket's winner is a candidate that was really benchmarked (and, for FlyDSL, numerically
validated) at the bucket's own M; nothing is extrapolated from another bucket. A bucket
winner is used only when a candidate of the same family (backend, kernel name and
size-independent config) is among the current candidates; otherwise Inductor autotunes as
usual.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .keys import stable_id
from .problem import Problem, TensorSpec

MAX_BUCKET_M = 8192
# info_dict entries that depend on the problem size, not on the kernel's configuration
SIZE_DEPENDENT_KEYS = frozenset({"grid", "kernel_name", "name", "description", "batch_size"})


def bucket_m(m: int) -> int | None:
    if m < 1 or m > MAX_BUCKET_M:
        return None
    return 1 << (m - 1).bit_length()


def _with_m(t: TensorSpec, old_m: int, new_m: int, m_axis: int) -> TensorSpec:
    """``t`` with its M axis resized and dense strides in the same axis order (broadcast
    axes keep stride 0), as a freshly allocated operand of the bucket size would have."""
    if t.size[m_axis] != old_m:
        return t
    size = list(t.size)
    size[m_axis] = new_m
    stride = [0] * len(size)
    acc = 1
    for axis in sorted(range(len(size)), key=lambda i: (t.stride[i], i)):
        if t.stride[axis] != 0:
            stride[axis] = acc
            acc *= size[axis]
    return TensorSpec(dtype=t.dtype, size=tuple(size), stride=tuple(stride))


def bucket_problem(problem: Problem) -> tuple[Problem, int] | None:
    """The problem at M's bucket size, or None when M has no bucket (or is the bucket)."""
    m = problem.mnk[0]
    target = bucket_m(m)
    if target is None or (target == m and not problem.dynamic) or len(problem.output.size) < 2:
        return None
    out_axis = len(problem.output.size) - 2
    inputs = []
    start = 1 if problem.op in ("addmm", "baddbmm") and len(problem.inputs) >= 3 else 0
    for i, t in enumerate(problem.inputs):
        if i == start and len(t.size) >= 2:  # A: (..., M, K)
            inputs.append(_with_m(t, m, target, len(t.size) - 2))
        elif i < start and len(t.size) >= 2 and t.size[-2] == m:  # an (M, N) bias view
            inputs.append(_with_m(t, m, target, len(t.size) - 2))
        else:
            inputs.append(t)
    output = _with_m(problem.output, m, target, out_axis)
    return replace(problem, inputs=tuple(inputs), output=output, symbolic=(), exprs=()), target


def dynamic_m_problem(problem: Problem) -> Problem:
    """The key a compile with a symbolic M (and everything else static) records for
    ``problem`` when M's hint is the problem's M: the M dim of A, of an (M, N) bias and of
    the output marked symbolic. What
    ``explain --dynamic-m`` looks up and what a dynamic sweep item reproduces."""
    if problem.dynamic or len(problem.output.size) < 2:
        return problem
    m = problem.mnk[0]
    target = m
    start = 1 if problem.op in ("addmm", "baddbmm") and len(problem.inputs) >= 3 else 0
    inputs, symbolic = [], []
    for i, t in enumerate(problem.inputs):
        m_row = len(t.size) >= 2 and (i == start or (i < start and t.size[-2] == m))
        if not m_row:
            inputs.append(t)
            symbolic.append(())
            continue
        inputs.append(_with_m(t, m, target, len(t.size) - 2))
        symbolic.append((len(t.size) - 2,))  # the dims whose size is symbolic
    out_axis = len(problem.output.size) - 2
    output = _with_m(problem.output, m, target, out_axis)
    return replace(problem, inputs=tuple(inputs), output=output,
                   symbolic=(*symbolic, (out_axis,)),
                   exprs=("a",) * (sum(len(d) for d in symbolic) + 1))


def family_id(backend: str, name: str, config: dict[str, Any]) -> str:
    """Identity of a candidate up to the problem size (same kernel, same config)."""
    base = name.rsplit("_", 1)[0] if name.rsplit("_", 1)[-1].isdigit() else name
    stable = {k: v for k, v in config.items() if k not in SIZE_DEPENDENT_KEYS}
    return stable_id({"backend": backend, "name": base, "config": stable})
