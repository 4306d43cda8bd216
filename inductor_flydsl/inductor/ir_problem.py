"""Build a :class:`~inductor_flydsl.problem.Problem` from what Inductor autotunes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
from torch._inductor.virtualized import V

from ..problem import Problem, TensorSpec
from .candidates import BACKEND_ATTR

EPILOGUE_KWARGS = ("alpha", "beta")


def _ints(exprs: Sequence[Any]) -> tuple[tuple[int, ...], bool]:
    """Concrete ints for sizes/strides; symbolic ones become their hints (dynamic=True)."""
    dynamic = any(isinstance(e, sympy.Expr) and not e.is_number for e in exprs)
    if not exprs:
        return (), dynamic
    values = V.graph.sizevars.optimization_hints(exprs) if dynamic else exprs
    return tuple(int(v) for v in values), dynamic


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _tensor_spec(node: Any) -> tuple[TensorSpec, bool]:
    size, dyn_size = _ints(list(node.get_size()))
    try:
        stride, dyn_stride = _ints(list(node.get_stride()))
    except (AttributeError, NotImplementedError, AssertionError):
        stride, dyn_stride = (), False
    if len(stride) != len(size):
        stride = (0,) * len(size)  # opaque layout (e.g. a prepacked mkldnn weight)
    return TensorSpec(dtype=dtype_name(node.get_dtype()), size=size, stride=stride), (
        dyn_size or dyn_stride)


def epilogue_of(choices: Sequence[Any]) -> tuple[tuple[str, float | int | bool], ...]:
    """alpha/beta as the ATen choice was given them (addmm, baddbmm). Plugin choices are
    skipped, so the key does not depend on which backends are on."""
    for choice in choices:
        if getattr(choice, BACKEND_ATTR, None):
            continue
        kwargs = getattr(choice, "kwargs", None)
        if isinstance(kwargs, dict) and any(k in kwargs for k in EPILOGUE_KWARGS):
            # floats always: Inductor passes alpha=1 (int) where users write 1.0
            return tuple(sorted((k, float(kwargs[k])) for k in EPILOGUE_KWARGS
                                if isinstance(kwargs.get(k), int | float | bool)))
    return ()


def problem_from_ir(name: str, input_nodes: Sequence[Any], output_layout: Any,
                    choices: Sequence[Any]) -> Problem:
    specs, dynamic = [], False
    for node in input_nodes:
        spec, dyn = _tensor_spec(node)
        specs.append(spec)
        dynamic |= dyn
    out_size, dyn_out = _ints(list(output_layout.size))
    output = TensorSpec(dtype=dtype_name(output_layout.dtype), size=out_size,
                        stride=(0,) * len(out_size))
    return Problem(op=str(name), inputs=tuple(specs), output=output,
                   epilogue=epilogue_of(choices), dynamic=dynamic or dyn_out)
