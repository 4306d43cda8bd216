"""A GEMM problem as the tuning DB keys it, independent of Inductor's IR objects.

A problem is the op name Inductor autotunes (``mm``, ``addmm``, ``bmm``, ``baddbmm``, or a
CPU op such as ``packed_linear``), the dtype/size/stride of every input, the output
size and dtype, and the epilogue scalars (alpha, beta). GEMM dims M, N, K and the batch are
derived for filtering and reports; they are not part of the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .keys import canonical_json, stable_id

# Ops whose first input is the bias/accumulator rather than the left operand.
OPS_WITH_LEADING_BIAS = frozenset({"addmm", "baddbmm"})
MAX_DIM = 1 << 40


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # short torch dtype name: "float32", "bfloat16", ...
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def as_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "size": list(self.size), "stride": list(self.stride)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        dtype = data["dtype"]
        size = tuple(int(x) for x in data["size"])
        stride = tuple(int(x) for x in data["stride"])
        if not isinstance(dtype, str) or not dtype.isidentifier():
            raise ValueError(f"bad dtype {dtype!r}")
        if len(size) != len(stride) or not 0 < len(size) <= 4:
            raise ValueError(f"bad tensor rank: size {size}, stride {stride}")
        if any(not 0 <= x <= MAX_DIM for x in size + stride):
            raise ValueError(f"tensor dims out of range: size {size}, stride {stride}")
        return cls(dtype=dtype, size=size, stride=stride)


@dataclass(frozen=True)
class Problem:
    op: str
    inputs: tuple[TensorSpec, ...]
    output: TensorSpec
    epilogue: tuple[tuple[str, float | int | bool], ...] = ()
    # True when some size was symbolic and its hint was used (dynamic shapes).
    dynamic: bool = field(default=False, compare=False)

    def spec(self) -> dict[str, Any]:
        """The JSON document that identifies the problem (stored in ``problems.spec``)."""
        return {
            "op": self.op,
            "inputs": [t.as_json() for t in self.inputs],
            "output": {"dtype": self.output.dtype, "size": list(self.output.size)},
            "epilogue": dict(self.epilogue),
        }

    @property
    def id(self) -> str:
        return stable_id(self.spec())

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Problem:
        """Rebuild and validate a problem read back from a DB (untrusted input)."""
        op = spec["op"]
        if not isinstance(op, str) or not op.replace("_", "").isalnum() or len(op) > 64:
            raise ValueError(f"bad op name {op!r}")
        inputs = tuple(TensorSpec.from_json(t) for t in spec["inputs"])
        if not 1 <= len(inputs) <= 8:
            raise ValueError(f"bad number of inputs: {len(inputs)}")
        out = spec["output"]
        size = tuple(int(x) for x in out["size"])
        output = TensorSpec.from_json({"dtype": out["dtype"], "size": size,
                                       "stride": contiguous_stride(size)})
        epilogue = tuple(sorted((str(k), v) for k, v in dict(spec.get("epilogue", {})).items()
                                if isinstance(v, int | float | bool)))
        return cls(op=op, inputs=inputs, output=output, epilogue=epilogue)

    # ---- GEMM view -------------------------------------------------------------------
    def _operands(self) -> tuple[TensorSpec, TensorSpec | None]:
        start = 1 if self.op in OPS_WITH_LEADING_BIAS and len(self.inputs) >= 3 else 0
        a = self.inputs[start]
        b = self.inputs[start + 1] if len(self.inputs) > start + 1 else None
        return a, b

    @property
    def mnk(self) -> tuple[int, int, int]:
        a, _ = self._operands()
        m, n = self.output.size[-2], self.output.size[-1]
        return m, n, a.size[-1]

    @property
    def batch(self) -> int:
        return self.output.size[0] if len(self.output.size) == 3 else 1

    @property
    def dtype(self) -> str:
        return self._operands()[0].dtype

    @property
    def layout(self) -> str:
        """``nn``/``nt``/``tn``/``tt``: A then B, ``n`` row-major, ``t`` column-major.

        The second letter is ``t`` when B (K x N) is stored column-major, i.e. as an N x K
        row-major matrix, the usual weight layout of ``nn.Linear``. ``-`` where unknown
        (a prepacked CPU weight).
        """
        a, b = self._operands()
        return _major(a) + (_major(b) if b is not None else "-")

    def summary(self) -> str:
        m, n, k = self.mnk
        batch = f"{self.batch}x" if self.batch > 1 else ""
        extras = " ".join(f"{k}={v}" for k, v in self.epilogue)
        text = f"{self.op} {self.dtype} {batch}{m}x{n}x{k} {self.layout}"
        return f"{text} {extras}".strip()

    def as_row(self) -> dict[str, Any]:
        m, n, k = self.mnk
        return {"id": self.id, "op": self.op, "summary": self.summary(), "m": m, "n": n,
                "k": k, "batch": self.batch, "dtype": self.dtype, "layout": self.layout,
                "spec": canonical_json(self.spec())}


def _major(t: TensorSpec) -> str:
    if len(t.size) < 2:
        return "-"
    if t.stride[-1] == 1 or t.size[-1] == 1:
        return "n"
    if t.stride[-2] == 1 or t.size[-2] == 1:
        return "t"
    return "-"


def contiguous_stride(size: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for dim in reversed(size):
        stride.append(acc)
        acc *= max(dim, 1)
    return tuple(reversed(stride))


def synthetic_problem(op: str, m: int, n: int, k: int, *, dtype: str, layout: str = "nn",
                      batch: int = 1, alpha: float = 1.0, beta: float = 1.0) -> Problem:
    """The problem Inductor would see for ``op`` on freshly allocated operands.

    ``layout`` is two letters for A (M x K) and B (K x N): ``n`` row-major, ``t``
    column-major. addmm gets a bias row vector expanded to M x N (stride 0, 1), as
    Inductor's addmm lowering passes it.
    """
    if op not in ("mm", "addmm", "bmm"):
        raise ValueError(f"op must be mm, addmm or bmm, not {op!r}")
    if len(layout) != 2 or any(c not in "nt" for c in layout):
        raise ValueError(f"layout must be nn, nt, tn or tt, not {layout!r}")
    if min(m, n, k, batch) <= 0:
        raise ValueError("sizes must be positive")

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
