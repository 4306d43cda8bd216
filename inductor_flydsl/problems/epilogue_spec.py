"""A GEMM epilogue as data: what a fused FlyDSL kernel applies to its fp32 accumulator.

An ``EpilogueSpec`` is a short straight-line program over the accumulator value ``acc``
(the GEMM result, fp32), extra operands of the output's shape or broadcast to it, and
float constants. It is built from the pointwise ops Inductor found after a GEMM
(``inductor/fusion/epilogue_fusion.py``), checked here, stored as canonical JSON (in the DB key
and the kernel's cache key), and turned into kernel code by the templates. Nothing in it
is ever executed as Python: the templates and :func:`reference` interpret the op names.

Operands (``kind``):

- ``col``: a vector over N broadcast over rows (a bias, a per-output-channel scale);
- ``row``: a vector over M broadcast over columns (a per-token scale);
- ``tile``: an M x N tensor (a residual, the other input of a binary op), row-major with
  its own leading stride.

Ops: ``add sub mul div maximum minimum`` (two arguments), ``neg exp erf relu sigmoid silu
tanh gelu_erf gelu_tanh`` (one argument). Inductor's post-grad graphs spell activations in
primitives (``silu`` as ``x / (1 + exp(-x))``, ``gelu`` with ``erf`` or ``tanh``), so specs
built from them mostly use ``neg exp erf tanh`` and the arithmetic. A value is ``"acc"``,
``"x<i>"`` (operand i), ``"s<j>"`` (the result of step j) or a finite float. The result
of the last step (or ``acc`` when there are none) is cast to ``out_dtype``; every step
computes in fp32.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .keys import canonical_json, stable_id

UNARY = ("neg", "exp", "erf", "relu", "sigmoid", "silu", "tanh", "gelu_erf", "gelu_tanh")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
KINDS = ("col", "row", "tile")
DTYPES = ("float32", "bfloat16", "float16")
MAX_STEPS = 24
MAX_OPERANDS = 4


class InvalidEpilogue(ValueError):
    """The epilogue cannot be fused: the reason says why."""


@dataclass(frozen=True)
class Operand:
    kind: str
    dtype: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "dtype": self.dtype}


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple[str | float, ...]

    def to_json(self) -> list[Any]:
        return [self.op, *self.args]


@dataclass(frozen=True)
class EpilogueSpec:
    operands: tuple[Operand, ...]
    steps: tuple[Step, ...]
    out_dtype: str

    # ---- identity -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"operands": [o.to_json() for o in self.operands],
                "steps": [s.to_json() for s in self.steps], "out_dtype": self.out_dtype}

    def text(self) -> str:
        return canonical_json(self.to_json())

    @property
    def id(self) -> str:
        return stable_id(self.to_json())

    @property
    def is_identity(self) -> bool:
        return not self.steps

    def ops(self) -> list[str]:
        return [s.op for s in self.steps]

    def summary(self) -> str:
        """``relu(acc + col0) -> bfloat16``."""
        names: dict[str, str] = {"acc": "acc"}
        for i, o in enumerate(self.operands):
            names[f"x{i}"] = f"{o.kind}{i}"
        infix = {"add": "+", "sub": "-", "mul": "*", "div": "/"}

        def show(v: str | float) -> str:
            return names[v] if isinstance(v, str) else f"{v:g}"

        for j, s in enumerate(self.steps):
            if s.op in infix:
                names[f"s{j}"] = f"({show(s.args[0])} {infix[s.op]} {show(s.args[1])})"
            else:
                names[f"s{j}"] = f"{s.op}({', '.join(show(a) for a in s.args)})"
        last = names[f"s{len(self.steps) - 1}"] if self.steps else "acc"
        return f"{last} -> {self.out_dtype}"

    # ---- reading --------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: Any) -> EpilogueSpec:
        """Parse and check untrusted data (a DB row, a kernel cache key): every op, value
        reference, operand kind, dtype and count is validated; InvalidEpilogue names the
        first problem."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise InvalidEpilogue(f"not JSON ({exc})") from None
        if not isinstance(data, dict) or set(data) != {"operands", "steps", "out_dtype"}:
            raise InvalidEpilogue("an epilogue is an object with operands, steps, out_dtype")
        operands_raw, steps_raw = data["operands"], data["steps"]
        if not isinstance(operands_raw, list) or len(operands_raw) > MAX_OPERANDS:
            raise InvalidEpilogue(f"at most {MAX_OPERANDS} extra operands")
        operands = []
        for o in operands_raw:
            if not isinstance(o, dict) or set(o) != {"kind", "dtype"}:
                raise InvalidEpilogue("an operand is {kind, dtype}")
            if o["kind"] not in KINDS:
                raise InvalidEpilogue(f"operand kind {o['kind']!r} is not one of {KINDS}")
            if o["dtype"] not in DTYPES:
                raise InvalidEpilogue(f"operand dtype {o['dtype']!r} is not one of {DTYPES}")
            operands.append(Operand(o["kind"], o["dtype"]))
        if not isinstance(steps_raw, list) or len(steps_raw) > MAX_STEPS:
            raise InvalidEpilogue(f"at most {MAX_STEPS} steps")
        steps = []
        for j, raw in enumerate(steps_raw):
            if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
                raise InvalidEpilogue(f"step {j} is not [op, args...]")
            op, args = raw[0], tuple(raw[1:])
            arity = 1 if op in UNARY else 2 if op in BINARY else None
            if arity is None:
                raise InvalidEpilogue(f"op {op!r} is not fusable (supported: "
                                      f"{', '.join(UNARY + BINARY)})")
            if len(args) != arity:
                raise InvalidEpilogue(f"step {j}: {op} takes {arity} argument(s)")
            for a in args:
                _check_value(a, j, len(operands))
            steps.append(Step(op, tuple(float(a) if isinstance(a, int | float) else a
                                        for a in args)))
        if data["out_dtype"] not in DTYPES:
            raise InvalidEpilogue(f"out_dtype {data['out_dtype']!r} is not one of {DTYPES}")
        spec = cls(tuple(operands), tuple(steps), data["out_dtype"])
        read = {v for s in spec.steps for v in s.args if isinstance(v, str)}
        unread = [f"x{i}" for i in range(len(spec.operands)) if f"x{i}" not in read]
        if unread:
            raise InvalidEpilogue(f"operand {unread[0]} is read by no step")
        return spec


def _check_value(value: Any, step: int, operands: int) -> None:
    if isinstance(value, bool):
        raise InvalidEpilogue(f"step {step}: a boolean is not a value")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise InvalidEpilogue(f"step {step}: constants must be finite")
        return
    if not isinstance(value, str):
        raise InvalidEpilogue(f"step {step}: {value!r} is not a value")
    if value == "acc":
        return
    if len(value) > 1 and value[0] in "xs" and value[1:].isdigit():
        index = int(value[1:])
        if value[0] == "x" and index < operands:
            return
        if value[0] == "s" and index < step:
            return
    raise InvalidEpilogue(f"step {step}: {value!r} names no earlier value")


# ---- the reference semantics ----------------------------------------------------------
def reference(spec: EpilogueSpec, acc: Any, operands: Sequence[Any]) -> Any:
    """The epilogue on an fp32 accumulator tensor (M x N, or batched ... x M x N) with torch
    ops, in fp32, cast to ``out_dtype``: what a fused kernel must compute."""
    import torch

    if len(operands) != len(spec.operands):
        raise InvalidEpilogue(f"{len(spec.operands)} operands expected, got {len(operands)}")
    values: dict[str, Any] = {"acc": acc.float()}
    for i, (o, t) in enumerate(zip(spec.operands, operands, strict=True)):
        t = t.float()
        values[f"x{i}"] = t.unsqueeze(-1) if o.kind == "row" else t

    def get(v: str | float) -> Any:
        return values[v] if isinstance(v, str) else v

    unary = {"neg": torch.neg, "exp": torch.exp, "erf": torch.erf, "relu": torch.relu,
             "sigmoid": torch.sigmoid,
             "silu": torch.nn.functional.silu, "tanh": torch.tanh,
             "gelu_erf": torch.nn.functional.gelu,
             "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
              "maximum": torch.maximum, "minimum": torch.minimum}
    result = values["acc"]
    for j, s in enumerate(spec.steps):
        if s.op in unary:
            result = unary[s.op](get(s.args[0]))
        else:
            a, b = (get(v) for v in s.args)
            if s.op in ("maximum", "minimum"):
                a = a if isinstance(a, torch.Tensor) else torch.tensor(a)
                b = b if isinstance(b, torch.Tensor) else torch.tensor(b)
            result = binary[s.op](a, b)
        values[f"s{j}"] = result
    return result.to(getattr(torch, spec.out_dtype))


def identity(out_dtype: str) -> EpilogueSpec:
    return EpilogueSpec((), (), out_dtype)
