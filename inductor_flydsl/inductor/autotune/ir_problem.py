"""Build a :class:`~inductor_flydsl.problems.problem.Problem` from what Inductor autotunes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy

from ...problems.matmul_numerics import numerics_attrs
from ...problems.problem import InvalidProblem, Problem, TensorSpec, attr_value, checked
from ..adapter import internals
from ..adapter.choice_state import state_of

EPILOGUE_KWARGS = ("alpha", "beta")
# ATen kwargs that repeat what the tensor specs already say (packed_linear's M).
SHAPE_KWARGS = frozenset({"batch_size"})
# Ops whose result depends on scalars passed outside the tensors: their key needs the ATen
# choice's kwargs (plugin and template choices do not expose them). Without an ATen
# choice such a problem is refused rather than keyed without them.
ATTRIBUTE_OPS = frozenset({"addmm", "baddbmm", "linear_unary", "linear_binary",
                           "qlinear_unary", "qlinear_binary", "scaled_mm", "scaled_mm_v2"})


def _symbols(exprs: Sequence[Any]) -> set[sympy.Symbol]:
    return {sym for e in exprs if isinstance(e, sympy.Expr) for sym in e.free_symbols}


def symbol_values(exprs: Sequence[Any]) -> dict[sympy.Symbol, int]:
    """Each free symbol of ``exprs`` at its hint (Inductor's optimization hint: the size
    the graph was traced with, or its fallback for unbacked sizes). Exact, not rounded:
    the recorded timings of a dynamic problem are served in place of benchmarking at
    that very hint, so they must be what Inductor's benchmark measures there."""
    symbols = sorted(_symbols(exprs), key=str)
    if not symbols:
        return {}
    hints = internals.V.graph.sizevars.optimization_hints(symbols)
    return {sym: int(h) for sym, h in zip(symbols, hints, strict=True)}


def _ints(exprs: Sequence[Any], values: dict[sympy.Symbol, int]) -> tuple[int, ...]:
    """Concrete ints; a symbolic entry is evaluated at the symbols' hints."""
    out = []
    for e in exprs:
        if _is_symbolic(e):
            e = e.xreplace({s: sympy.Integer(v) for s, v in values.items()})
        out.append(int(e))
    return tuple(out)


def _is_symbolic(e: Any) -> bool:
    return isinstance(e, sympy.Expr) and not e.is_number


def _symbolic_dims(size: Sequence[Any], stride: Sequence[Any] | None = None) -> tuple[int, ...]:
    """Dims whose size, or stride, is symbolic."""
    strides = list(stride) if stride is not None else [None] * len(size)
    return tuple(i for i, (sz, st) in enumerate(zip(size, strides, strict=True))
                 if _is_symbolic(sz) or _is_symbolic(st))


def canonical_exprs(exprs: Sequence[Any]) -> tuple[str, ...]:
    """Each expression as text with its symbols renamed ``a``, ``b``, ... in order of
    first appearance (within one expression, by name): the same structure gives the same
    text in every program, whatever Dynamo numbered the symbols."""
    names: dict[sympy.Symbol, sympy.Symbol] = {}
    texts = []
    for e in exprs:
        for sym in sorted(e.free_symbols, key=str):
            if sym not in names:
                names[sym] = sympy.Symbol(_letters(len(names)), integer=True, positive=True)
        texts.append(str(e.xreplace(names)))
    return tuple(texts)


def _letters(index: int) -> str:
    text = ""
    while True:
        text = chr(ord("a") + index % 26) + text
        index = index // 26 - 1
        if index < 0:
            return text


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _size_stride(node: Any) -> tuple[list[Any], list[Any] | None]:
    size = list(node.get_size())
    try:
        stride = list(node.get_stride())
    except (AttributeError, NotImplementedError, AssertionError):
        stride = None
    if stride is not None and len(stride) != len(size):
        stride = None
    return size, stride


def _tensor_spec(node: Any, size: list[Any], stride: list[Any] | None,
                 values: dict[sympy.Symbol, int]) -> TensorSpec:
    ints = _ints(size, values)
    # None: an opaque layout (e.g. a prepacked mkldnn weight)
    strides = _ints(stride, values) if stride is not None else (0,) * len(ints)
    return TensorSpec(dtype=dtype_name(node.get_dtype()), size=ints, stride=strides)


def _aten_kwargs(choices: Sequence[Any]) -> dict[str, Any] | None:
    """kwargs of the first ATen (extern kernel) choice; plugin choices are skipped, so the
    key does not depend on which backends are on (except a client's own op whose kwargs
    are its arguments, vLLM's: ``keyed_kwargs``). None when no choice exposes kwargs."""
    for choice in choices:
        state = state_of(choice)
        if state is not None and not state.keyed_kwargs:
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
    is outside the one definition of a valid problem (``problem.checked``).

    With symbolic sizes (dynamic shapes) the key names the symbolic dims of every tensor
    (``Problem.symbolic``) and holds sizes and strides evaluated with every symbol at its
    hint: the selection Inductor makes once, at the hint, and compiles for every size.
    """
    layouts = [_size_stride(node) for node in input_nodes]
    out_exprs = list(output_layout.size)
    exprs = [e for size, stride in layouts for e in (*size, *(stride or ()))] + out_exprs
    try:
        values = symbol_values(exprs)
        specs = [_tensor_spec(node, size, stride, values)
                 for node, (size, stride) in zip(input_nodes, layouts, strict=True)]
        out_size = _ints(out_exprs, values)
    except (TypeError, ValueError) as exc:  # an expression with no integer value
        raise InvalidProblem(f"{name}: a symbolic size has no integer value ({exc})") from exc
    output = TensorSpec(dtype=dtype_name(output_layout.dtype), size=out_size,
                        stride=(0,) * len(out_size))
    symbolic: tuple[tuple[int, ...], ...] = ()
    entries: list[Any] = []
    if values:
        symbolic = (*(_symbolic_dims(size) for size, _ in layouts),
                    _symbolic_dims(out_exprs))
        sources = [size for size, _ in layouts] + [out_exprs]
        if not any(symbolic):  # only strides are symbolic (a view of a dynamic tensor)
            symbolic = (*(_symbolic_dims(size, stride) for size, stride in layouts),
                        symbolic[-1])
            sources = [[st if _is_symbolic(st) else sz for sz, st in
                        zip(size, stride or size, strict=True)] for size, stride in layouts]
            sources.append(out_exprs)
        entries = [src[d] for dims, src in zip(symbolic, sources, strict=True) for d in dims]
    device = getattr(getattr(output_layout, "device", None), "type", "cpu")
    numerics = numerics_attrs(str(device), [s.dtype for s in (*specs, output)])
    problem = Problem(op=str(name), inputs=tuple(specs), output=output,
                      epilogue=epilogue_of(choices),
                      attrs=tuple(sorted((*attrs_of(str(name), choices), *numerics))),
                      symbolic=symbolic, exprs=canonical_exprs(entries))
    return checked(problem)
