"""A GEMM problem as the tuning DB keys it, independent of Inductor's IR objects.

A problem is the op name Inductor autotunes (``mm``, ``addmm``, ``bmm``, ``baddbmm``, a
CPU op such as ``packed_linear`` or ``qlinear_unary``, ...), the dtype/size/stride of every
input (0-D scale and zero-point tensors included), the output size and dtype, the epilogue
scalars (alpha, beta) and every other attribute that changes the op's result (``attrs``:
e.g. a quantized linear's post-op name and arguments, output scale, zero-point and dtype).
GEMM dims M, N, K and the batch are derived for filtering and reports; they are not part
of the key.

:func:`Problem.from_spec` is the one definition of a valid problem: the hooks run every
problem through it before anything is written (:func:`checked`), and every DB tool reads
problems back through it. A spec it rejects raises :class:`InvalidProblem`; a spec from a
newer plugin (fields this version does not know) raises :class:`UnknownProblem`. Both are
``ValueError`` subclasses with a one-line reason.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Any

from .keys import canonical_json, stable_id
from .mx_scales import is_block_scaled

# Ops whose first input is the bias/accumulator rather than the left operand.
OPS_WITH_LEADING_BIAS = frozenset({"addmm", "baddbmm"})
# Bounds of a valid problem. Generous on purpose: they only keep untrusted DB rows (and
# absurd IR) from exhausting memory or producing ids nobody can look up.
MAX_DIM = 1 << 40  # per size or stride entry
MAX_RANK = 16
MAX_INPUTS = 64
MAX_ATTRS = 32
MAX_ATTR_ITEMS = 64  # entries of one list-valued attribute
MAX_ATTR_DEPTH = 3  # nesting of list-valued attributes
MAX_STR = 256
MAX_SPEC_CHARS = 64 * 1024
MAX_INT = 1 << 63
SPEC_FIELDS = frozenset({"op", "inputs", "output", "epilogue", "attrs", "symbolic"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_DTYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")

Scalar = bool | int | float | str | None
AttrValue = Scalar | tuple[Any, ...]


class InvalidProblem(ValueError):
    """A problem spec outside the one definition of a valid problem (the reason says why)."""


class UnknownProblem(InvalidProblem):
    """A spec with fields this version does not know (written by a newer plugin)."""


def _require(ok: bool, reason: str) -> None:
    if not ok:
        raise InvalidProblem(reason)


def _int(value: Any, what: str, low: int, high: int) -> int:
    _require(isinstance(value, int) and not isinstance(value, bool),
             f"{what} must be an integer, not {type(value).__name__}")
    _require(low <= value <= high, f"{what} {value} is outside [{low}, {high}]")
    return int(value)


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    _require(isinstance(value, list | tuple), f"{what} must be a list")
    _require(len(value) <= MAX_RANK, f"{what} has rank {len(value)} (at most {MAX_RANK})")
    return tuple(_int(x, f"{what} entry", 0, MAX_DIM) for x in value)


def _dtype(value: Any, what: str) -> str:
    _require(isinstance(value, str) and _DTYPE.fullmatch(value) is not None,
             f"{what} dtype {value!r} is not a dtype name")
    return value


def _name(value: Any, what: str) -> str:
    _require(isinstance(value, str) and _NAME.fullmatch(value) is not None,
             f"{what} {value!r} is not an identifier of at most 128 characters")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    _require(isinstance(value, dict), f"{what} must be a JSON object, not "
             f"{type(value).__name__}")
    return value


def attr_value(value: Any, what: str, depth: int = 0) -> AttrValue:
    """An attribute value in its key form: JSON scalars and (nested) lists as tuples.
    Enums and torch dtypes become their names; anything else is refused."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, int):
        return _int(value, what, -MAX_INT, MAX_INT)
    if isinstance(value, float):
        _require(math.isfinite(value), f"{what} is {value} (only finite numbers are keyed)")
        return value
    if isinstance(value, str):
        _require(len(value) <= MAX_STR and value.isprintable(),
                 f"{what} is not a printable string of at most {MAX_STR} characters")
        return value
    if isinstance(value, list | tuple):
        _require(depth < MAX_ATTR_DEPTH, f"{what} nests lists deeper than {MAX_ATTR_DEPTH}")
        _require(len(value) <= MAX_ATTR_ITEMS, f"{what} has {len(value)} items "
                 f"(at most {MAX_ATTR_ITEMS})")
        return tuple(attr_value(v, what, depth + 1) for v in value)
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value).removeprefix("torch.")
    raise InvalidProblem(f"{what} has a value of type {type(value).__name__}, "
                         "which a problem key cannot hold")


def _attr_json(value: AttrValue) -> Any:
    return [_attr_json(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # short torch dtype name: "float32", "bfloat16", "uint8", ...
    size: tuple[int, ...]  # () for a 0-D (scalar) tensor
    stride: tuple[int, ...]

    def as_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "size": list(self.size), "stride": list(self.stride)}

    @classmethod
    def from_json(cls, data: Any, what: str = "tensor") -> TensorSpec:
        data = _dict(data, what)
        _require(set(data) == {"dtype", "size", "stride"}, f"{what} must have exactly "
                 f"dtype, size and stride, not {sorted(map(str, data))}")
        dtype = _dtype(data["dtype"], what)
        size = _int_list(data["size"], f"{what} size")
        stride = _int_list(data["stride"], f"{what} stride")
        _require(len(size) == len(stride),
                 f"{what} size {list(size)} and stride {list(stride)} differ in rank")
        return cls(dtype=dtype, size=size, stride=stride)


@dataclass(frozen=True)
class Problem:
    op: str
    inputs: tuple[TensorSpec, ...]
    output: TensorSpec
    epilogue: tuple[tuple[str, float | int | bool], ...] = ()
    # Other attributes that change the result, sorted by name (see ``attr_value``).
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    # Dynamic shapes: the indices of the dims with a symbolic size of each input, then of
    # the output (len(inputs) + 1 tuples; where no size is symbolic, the dims with a
    # symbolic stride), or () for a static problem. Sizes and strides are then
    # the symbols' hints (see ``dynamic_key``): the key of the selection Inductor makes
    # once, at the hint, for every size the symbolic dims take.
    symbolic: tuple[tuple[int, ...], ...] = ()
    # The expression of each symbolic dim above, in order (inputs, then the output),
    # symbols renamed a, b, ... by first appearance: ``a*b`` for a batch*sequence M, ``a``
    # for one symbolic dim. Compiles that differ only there (a batch specialized to 1
    # recompiles with M = a) build different kernels, so they are different problems.
    # Key text only: never parsed or evaluated.
    exprs: tuple[str, ...] = ()

    @property
    def dynamic(self) -> bool:
        return bool(self.symbolic)

    def spec(self) -> dict[str, Any]:
        """The JSON document that identifies the problem (stored in ``problems.spec``).
        ``attrs`` appears only when non-empty, so ids of problems without attributes are
        the ones earlier versions wrote."""
        spec: dict[str, Any] = {
            "op": self.op,
            "inputs": [t.as_json() for t in self.inputs],
            "output": {"dtype": self.output.dtype, "size": list(self.output.size)},
            "epilogue": dict(self.epilogue),
        }
        if self.attrs:
            spec["attrs"] = {k: _attr_json(v) for k, v in self.attrs}
        if self.symbolic:
            spec["symbolic"] = {"inputs": [list(d) for d in self.symbolic[:-1]],
                                "output": list(self.symbolic[-1]),
                                "exprs": list(self.exprs)}
        return spec

    @property
    def id(self) -> str:
        return stable_id(self.spec())

    @classmethod
    def from_spec(cls, spec: Any) -> Problem:
        """Rebuild and validate a problem read back from a DB (untrusted input).

        Raises :class:`InvalidProblem` (or :class:`UnknownProblem`), never another error.
        """
        spec = _dict(spec, "problem spec")
        unknown = sorted(str(k) for k in set(spec) - SPEC_FIELDS)
        if unknown:
            raise UnknownProblem(f"spec has fields this version does not know: {unknown}")
        for key in ("op", "inputs", "output"):
            _require(key in spec, f"spec lacks {key!r}")
        op = _name(spec["op"], "op name")
        raw_inputs = spec["inputs"]
        _require(isinstance(raw_inputs, list), "inputs must be a list")
        _require(1 <= len(raw_inputs) <= MAX_INPUTS,
                 f"{len(raw_inputs)} inputs (1 to {MAX_INPUTS} allowed)")
        inputs = tuple(TensorSpec.from_json(t, f"input {i}") for i, t in enumerate(raw_inputs))
        out = _dict(spec["output"], "output")
        _require(set(out) == {"dtype", "size"},
                 f"output must have exactly dtype and size, not {sorted(map(str, out))}")
        size = _int_list(out["size"], "output size")
        output = TensorSpec(_dtype(out["dtype"], "output"), size, contiguous_stride(size))
        epilogue = tuple(sorted(_epilogue_item(k, v) for k, v in
                                _dict(spec.get("epilogue", {}), "epilogue").items()))
        attrs = _dict(spec.get("attrs", {}), "attrs")
        _require(bool(attrs) or "attrs" not in spec, "attrs is present but empty")
        _require(len(attrs) <= MAX_ATTRS, f"{len(attrs)} attrs (at most {MAX_ATTRS})")
        problem = cls(op=op, inputs=inputs, output=output, epilogue=epilogue,
                      attrs=tuple(sorted((_name(k, "attr name"), attr_value(v, f"attr {k}"))
                                         for k, v in attrs.items())),
                      **_symbolic(spec, inputs, output))
        text = canonical_json(problem.spec())
        _require(len(text) <= MAX_SPEC_CHARS,
                 f"spec is {len(text)} characters (at most {MAX_SPEC_CHARS})")
        return problem

    # ---- GEMM view (defined for every valid problem, 0-D tensors included) ------------
    def _operands(self) -> tuple[TensorSpec, TensorSpec | None]:
        start = 1 if self.op in OPS_WITH_LEADING_BIAS and len(self.inputs) >= 3 else 0
        a = self.inputs[start]
        b = self.inputs[start + 1] if len(self.inputs) > start + 1 else None
        return a, b

    @property
    def mnk(self) -> tuple[int, int, int]:
        a, _ = self._operands()
        out = self.output.size
        m = out[-2] if len(out) >= 2 else 1
        n = out[-1] if out else 1
        k = a.size[-1] if a.size else 1
        # MXFP4 operands pack two K elements per byte (torch.float4_e2m1fn_x2)
        return m, n, k * 2 if a.dtype == "float4_e2m1fn_x2" else k

    @property
    def groups(self) -> int:
        """G of a grouped GEMM with 3-D weights (``grouped_mm`` of a 2-D A and a 3-D B),
        else 0."""
        if (self.op != "grouped_mm" or len(self.inputs) < 2 or len(self.inputs[0].size) != 2
                or len(self.inputs[1].size) != 3):
            return 0
        return self.inputs[1].size[0]

    @property
    def batch(self) -> int:
        return math.prod(self.output.size[:-2]) if len(self.output.size) > 2 else 1

    @property
    def dtype(self) -> str:
        return self._operands()[0].dtype

    @property
    def layout(self) -> str:
        """``nn``/``nt``/``tn``/``tt``: A then B, ``n`` row-major, ``t`` column-major.

        The second letter is ``t`` when B (K x N) is stored column-major, i.e. as an N x K
        row-major matrix, the usual weight layout of ``nn.Linear``. ``-`` where unknown
        (a prepacked CPU weight, a 0-D scale).
        """
        a, b = self._operands()
        return _major(a) + (_major(b) if b is not None else "-")

    def summary(self) -> str:
        m, n, k = self.mnk
        batch = f"{self.batch}x" if self.batch > 1 else ""
        groups = self.groups
        if groups:  # grouped GEMM: G groups over T = M rows (``GxTxNxK``)
            batch = f"{groups}x"
        extras = " ".join(f"{k}={v}" for k, v in self.epilogue)
        attrs = " ".join(f"{k}={_attr_text(v)}" for k, v in self.attrs
                         if v not in (None, "", ()))
        text = f"{self.op} {self.dtype} {batch}{m}x{n}x{k} {self.layout}"
        dynamic = f"dynamic[{self.symbolic_text()}]" if self.symbolic else ""
        return " ".join(part for part in (text, self._scales_text(n), extras, attrs, dynamic)
                        if part)[:500]

    def _scales_text(self, n: int) -> str:
        """``scale_b=32x32`` for a scaled GEMM whose weight scales are per 32x32 block
        (vLLM's MXFP8 linear): another problem than per-row scales of the same shape."""
        if self.op not in ("scaled_mm", "scaled_mm_v2") or len(self.inputs) < 4:
            return ""
        scale_b = self.inputs[3]
        blocked = len(scale_b.size) == 2 and is_block_scaled(scale_b.size[0], n)
        return "scale_b=32x32" if blocked else ""

    def symbolic_text(self) -> str:
        """Which GEMM dims are symbolic, e.g. ``M`` or ``batch,M``; each keyed at its
        hint (the size shown)."""
        if not self.symbolic:
            return ""
        names = []
        out_dims = self.symbolic[-1]
        rank = len(self.output.size)
        total = sum(len(d) for d in self.symbolic)
        exprs = self.exprs if len(self.exprs) == total else ("",) * total
        for d, expr in zip(out_dims, exprs[total - len(out_dims):], strict=True):
            name = "M" if d == rank - 2 else "N" if d == rank - 1 else "batch"
            names.append(name if expr == "a" or not expr else f"{name}={expr}")
        a, _ = self._operands()
        a_index = self.inputs.index(a)
        if len(a.size) >= 1 and len(a.size) - 1 in self.symbolic[a_index]:
            names.append("K")
        if not names:
            names.append("strides")
        return ",".join(dict.fromkeys(names))

    def as_row(self) -> dict[str, Any]:
        m, n, k = self.mnk
        return {"id": self.id, "op": self.op, "summary": self.summary(), "m": m, "n": n,
                "k": k, "batch": self.batch, "dtype": self.dtype, "layout": self.layout,
                "spec": canonical_json(self.spec())}


def _dim_list(value: Any, rank: int, what: str) -> tuple[int, ...]:
    _require(isinstance(value, list), f"{what} must be a list of dim indices")
    dims = tuple(_int(d, f"{what} entry", 0, max(rank - 1, 0)) for d in value)
    _require(list(dims) == sorted(set(dims)) and (rank > 0 or not dims),
             f"{what} {list(dims)} must be distinct increasing dims of a rank-{rank} tensor")
    return dims


_EXPR = re.compile(r"[A-Za-z0-9_*+\-/(), ]{1,128}")


def _symbolic(spec: dict[str, Any], inputs: tuple[TensorSpec, ...],
              output: TensorSpec) -> dict[str, Any]:
    if "symbolic" not in spec:
        return {}
    data = _dict(spec["symbolic"], "symbolic")
    _require(set(data) == {"inputs", "output", "exprs"}, "symbolic must have exactly "
             f"inputs, output and exprs, not {sorted(map(str, data))}")
    raw = data["inputs"]
    _require(isinstance(raw, list) and len(raw) == len(inputs),
             f"symbolic inputs must list the dims of each of the {len(inputs)} inputs")
    dims = [_dim_list(d, len(t.size), f"symbolic dims of input {i}")
            for i, (d, t) in enumerate(zip(raw, inputs, strict=True))]
    dims.append(_dim_list(data["output"], len(output.size), "symbolic dims of the output"))
    _require(any(dims), "symbolic is present but names no dim")
    exprs = data["exprs"]
    count = sum(len(d) for d in dims)
    _require(isinstance(exprs, list) and len(exprs) == count,
             f"symbolic exprs must give one expression per symbolic dim ({count})")
    for e in exprs:
        _require(isinstance(e, str) and _EXPR.fullmatch(e) is not None,
                 f"symbolic expr {e!r} is not a size expression of at most 128 characters")
    return {"symbolic": tuple(dims), "exprs": tuple(exprs)}


def _epilogue_item(key: Any, value: Any) -> tuple[str, float | int | bool]:
    name = _name(key, "epilogue name")
    _require(isinstance(value, bool | int | float),
             f"epilogue {name} must be a number, not {type(value).__name__}")
    if isinstance(value, float):
        _require(math.isfinite(value), f"epilogue {name} is {value}")
    elif not isinstance(value, bool):
        _int(value, f"epilogue {name}", -MAX_INT, MAX_INT)
    return name, value


def checked(problem: Problem) -> Problem:
    """``problem`` if it is valid by the same definition the DB tools read with
    (:meth:`Problem.from_spec`), else :class:`InvalidProblem` with the reason. The hooks
    call this before a problem is looked up or written."""
    try:
        again = Problem.from_spec(problem.spec())
    except InvalidProblem:
        raise
    except ValueError as exc:  # canonical JSON refused a value (NaN) or similar
        raise InvalidProblem(str(exc)) from exc
    _require(again.spec() == problem.spec(),
             f"{problem.op}: the spec does not read back as the same problem")
    return problem


def _attr_text(value: AttrValue) -> str:
    if isinstance(value, tuple):
        return ",".join(_attr_text(v) for v in value)
    return str(value)


def _major(t: TensorSpec) -> str:
    if len(t.size) < 2:
        return "-"
    if t.stride[-1] == 1 or t.size[-1] == 1:
        return "n"
    if t.stride[-2] == 1 or t.size[-2] == 1:
        return "t"
    return "-"


def _synthetic_grouped(t: int, n: int, k: int, *, dtype: str, layout: str,
                       groups: int) -> Problem:
    """``torch._grouped_mm(A, B, offs)`` as Inductor sees it: A ``(T, K)``, B ``(G, K,
    N)`` (``layout[1]``: ``n`` N-contiguous, ``t`` K-contiguous), int32 ``offs`` of G."""
    a = TensorSpec(dtype, (t, k), (k, 1) if layout[0] == "n" else (1, t))
    b_stride = (k * n, n, 1) if layout[1] == "n" else (k * n, 1, k)
    b = TensorSpec(dtype, (groups, k, n), b_stride)
    offs = TensorSpec("int32", (groups,), (1,))
    return Problem(op="grouped_mm", inputs=(a, b, offs),
                   output=TensorSpec(dtype, (t, n), (n, 1)))


def contiguous_stride(size: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for dim in reversed(size):
        stride.append(acc)
        acc *= max(dim, 1)
    return tuple(reversed(stride))


def synthetic_problem(op: str, m: int, n: int, k: int, *, dtype: str, layout: str = "nn",
                      batch: int = 1, alpha: float = 1.0, beta: float = 1.0) -> Problem:
    """The problem Inductor would see for ``op`` on freshly allocated operands
    (``grouped_mm``: M is the total tokens T and ``batch`` the number of groups G).

    ``layout`` is two letters for A (M x K) and B (K x N): ``n`` row-major, ``t``
    column-major. addmm gets a bias row vector expanded to M x N (stride 0, 1), as
    Inductor's addmm lowering passes it.
    """
    if op not in ("mm", "addmm", "bmm", "grouped_mm"):
        raise ValueError(f"op must be mm, addmm, bmm or grouped_mm, not {op!r}")
    if len(layout) != 2 or any(c not in "nt" for c in layout):
        raise ValueError(f"layout must be nn, nt, tn or tt, not {layout!r}")
    if min(m, n, k, batch) <= 0:
        raise ValueError("sizes must be positive")
    if op == "grouped_mm":
        return _synthetic_grouped(m, n, k, dtype=dtype, layout=layout, groups=batch)

    def operand(rows: int, cols: int, letter: str) -> TensorSpec:
        stride = (cols, 1) if letter == "n" else (1, rows)
        if op == "bmm":
            return TensorSpec(dtype, (batch, rows, cols), (rows * cols, *stride))
        return TensorSpec(dtype, (rows, cols), stride)

    a, b = operand(m, k, layout[0]), operand(k, n, layout[1])
    out_size = (batch, m, n) if op == "bmm" else (m, n)
    output = TensorSpec(dtype, out_size, contiguous_stride(out_size))
    if op == "addmm":
        bias = TensorSpec(dtype, (m, n), (0, 1))
        return Problem(op=op, inputs=(bias, a, b), output=output,
                       epilogue=(("alpha", float(alpha)), ("beta", float(beta))))
    return Problem(op=op, inputs=(a, b), output=output)
