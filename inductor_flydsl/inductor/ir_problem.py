"""Build a :class:`~inductor_flydsl.problem.Problem` from what Inductor autotunes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
from torch._inductor.virtualized import V

from ..problem import InvalidProblem, Problem, TensorSpec, attr_value, checked
from .candidates import BACKEND_ATTR

EPILOGUE_KWARGS = ("alpha", "beta")
# ATen kwargs that repeat what the tensor specs already say (packed_linear's M).
SHAPE_KWARGS = frozenset({"batch_size"})
# Ops whose result depends on scalars passed outside the tensors: their key needs the ATen
# choice's kwargs (plugin and template choices do not expose them). Without an ATen
# choice such a problem is refused rather than keyed without them.
ATTRIBUTE_OPS = frozenset({"addmm", "baddbmm", "linear_unary", "linear_binary",
                           "qlinear_unary", "qlinear_binary", "scaled_mm", "scaled_mm_v2"})


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


def _aten_kwargs(choices: Sequence[Any]) -> dict[str, Any] | None:
    """kwargs of the first ATen (extern kernel) choice; plugin choices are skipped, so the
    key does not depend on which backends are on. None when no choice exposes kwargs."""
    for choice in choices:
        if getattr(choice, BACKEND_ATTR, None):
            continue
        kwargs = getattr(choice, "kwargs", None)
        if isinstance(kwargs, dict):
            return kwargs
    return None


def epilogue_of(choices: Sequence[Any]) -> tuple[tuple[str, float | int | bool], ...]:
    """alpha/beta as the ATen choice was given them (addmm, baddbmm)."""
    kwargs = _aten_kwargs(choices) or {}
    # floats always: Inductor passes alpha=1 (int) where users write 1.0
    return tuple(sorted((k, float(kwargs[k])) for k in EPILOGUE_KWARGS
                        if isinstance(kwargs.get(k), int | float | bool)))


def attrs_of(name: str, choices: Sequence[Any]) -> tuple[tuple[str, Any], ...]:
    """Every other ATen kwarg, in key form: post-op names and arguments, output scale,
    zero-point and dtype, ... A kwarg of None means "absent" and is left out."""
    kwargs = _aten_kwargs(choices)
    if kwargs is None:
        if name in ATTRIBUTE_OPS:
            raise InvalidProblem(f"{name}: no ATen choice shows the op's scalar arguments "
                                 "(post-op, scales, alpha/beta), so it cannot be keyed")
        return ()
    return tuple(sorted((str(k), attr_value(v, f"attr {k}")) for k, v in kwargs.items()
                        if v is not None and k not in EPILOGUE_KWARGS
                        and k not in SHAPE_KWARGS))


def problem_from_ir(name: str, input_nodes: Sequence[Any], output_layout: Any,
                    choices: Sequence[Any]) -> Problem:
    """The DB key of one autotune call; :class:`InvalidProblem` (with the reason) when it
    is outside the one definition of a valid problem (``problem.checked``)."""
    specs, dynamic = [], False
    for node in input_nodes:
        spec, dyn = _tensor_spec(node)
        specs.append(spec)
        dynamic |= dyn
    out_size, dyn_out = _ints(list(output_layout.size))
    output = TensorSpec(dtype=dtype_name(output_layout.dtype), size=out_size,
                        stride=(0,) * len(out_size))
    problem = Problem(op=str(name), inputs=tuple(specs), output=output,
                      epilogue=epilogue_of(choices), attrs=attrs_of(str(name), choices),
                      dynamic=dynamic or dyn_out)
    return checked(problem)
