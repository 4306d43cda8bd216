"""Turn parsed instructions into closures over a :class:`~.wave.Wave`.

Each opcode family registers a *builder* for its mnemonics with :func:`opcode`. A builder
receives the instruction and a :class:`DecodeContext` and returns a :class:`Compiled`:
the closure to run plus the register codes it reads and writes (for the hazard check).
Encoding suffixes (``_e32``, ``_e64``) are dropped before the lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import UnknownOpcode
from .operands import Operand, parse_operand
from .program import Instruction, Program
from .wave import LANES, Wave

Run = Callable[[Wave], None]
Builder = Callable[[Instruction, "DecodeContext"], "Compiled"]
_BUILDERS: dict[str, Builder] = {}


@dataclass
class Compiled:
    ins: Instruction
    run: Run
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    kind: str = "alu"  # alu, barrier, end, branch, wait, mem


@dataclass
class DecodeContext:
    program: Program
    machine: Any  # the Machine: memory, LDS and op ids are reached through it

    @property
    def arch(self) -> str:
        return self.program.kernel.arch


def opcode(*names: str) -> Callable[[Builder], Builder]:
    def register(builder: Builder) -> Builder:
        for name in names:
            _BUILDERS[name] = builder
        return builder

    return register


def base_mnemonic(mnemonic: str) -> str:
    for suffix in ("_e32", "_e64", "_sdwa", "_dpp"):
        if mnemonic.endswith(suffix):
            return mnemonic[: -len(suffix)]
    return mnemonic


def decode(ins: Instruction, ctx: DecodeContext) -> Compiled:
    builder = _BUILDERS.get(ins.mnemonic) or _BUILDERS.get(base_mnemonic(ins.mnemonic))
    if builder is None:
        raise UnknownOpcode(f"opcode {ins.mnemonic!r} is not implemented by the emulator "
                            f"({ins.where()})")
    if ins.mnemonic.endswith("_dpp"):
        raise UnknownOpcode(f"DPP forms are not implemented ({ins.where()})")
    return builder(ins, ctx)


def operands(ins: Instruction, count: int | None = None) -> list[Operand]:
    ops = [parse_operand(text, ins.where()) for text in ins.operands]
    if count is not None and len(ops) != count:
        raise UnknownOpcode(f"expected {count} operands, got {len(ops)} ({ins.where()})")
    return ops


def codes(*ops: Operand) -> tuple[int, ...]:
    out: list[int] = []
    for op in ops:
        out.extend(op.codes())
    return tuple(out)


# -- vector sources ----------------------------------------------------------------------
def vreader(op: Operand, ins: Instruction, kind: str = "int") -> Callable[[Wave], np.ndarray]:
    """32-bit per-lane source: VGPR/AGPR, SGPR (broadcast) or constant."""
    if op.scc:
        raise UnknownOpcode(f"scc as a vector source ({ins.where()})")
    if op.reg is not None:
        i, file = op.reg.index, op.reg.file
        if file == "v":
            base: Callable[[Wave], np.ndarray] = lambda w: w.v[i]  # noqa: E731
        elif file == "a":
            base = lambda w: w.a[i]  # noqa: E731
        else:
            base = lambda w: np.full(LANES, w.s[i], np.uint32)  # noqa: E731
    else:
        assert op.const is not None
        value = np.full(LANES, op.const.bits(32, kind), np.uint32)
        value.setflags(write=False)
        base = lambda w: value  # noqa: E731
    return _float_modifiers(base, op, ins, kind)


def _float_modifiers(base, op: Operand, ins: Instruction, kind: str):
    if not (op.neg or op.abs):
        return base
    if kind not in ("f32", "f16"):
        raise UnknownOpcode(f"neg/abs modifier on a non-float operand ({ins.where()})")
    sign = np.uint32(0x80000000 if kind == "f32" else 0x8000)
    clear = np.uint32(~int(sign) & 0xFFFFFFFF)
    if op.abs and op.neg:
        return lambda w: (base(w) & clear) | sign
    if op.abs:
        return lambda w: base(w) & clear
    return lambda w: base(w) ^ sign


def vreader64(op: Operand, ins: Instruction) -> Callable[[Wave], np.ndarray]:
    """64-bit per-lane source as uint64."""
    if op.reg is not None:
        i, file = op.reg.index, op.reg.file
        if file in "va":
            def read(w: Wave) -> np.ndarray:
                reg = w.vfile(file)
                return reg[i].astype(np.uint64) | (reg[i + 1].astype(np.uint64) << np.uint64(32))
            return read
        return lambda w: np.full(LANES, w.get_s64(i), np.uint64)
    assert op.const is not None
    value = np.full(LANES, _const64(op), np.uint64)
    return lambda w: value


def _const64(op: Operand) -> int:
    assert op.const is not None
    v = op.const.value
    if isinstance(v, float):
        return op.const.bits(64, "f64")
    return v & 0xFFFFFFFFFFFFFFFF


def vwriter(op: Operand, ins: Instruction) -> Callable[[Wave, np.ndarray], None]:
    if op.reg is None or op.reg.file not in "va":
        raise UnknownOpcode(f"vector destination expected, got {op.text!r} ({ins.where()})")
    i, file = op.reg.index, op.reg.file
    return lambda w, values: w.write_v(file, i, values)


def vwriter64(op: Operand, ins: Instruction) -> Callable[[Wave, np.ndarray], None]:
    if op.reg is None or op.reg.file not in "va":
        raise UnknownOpcode(f"vector destination expected, got {op.text!r} ({ins.where()})")
    i, file = op.reg.index, op.reg.file

    def write(w: Wave, values: np.ndarray) -> None:
        values = values.astype(np.uint64)
        w.write_v(file, i, (values & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        w.write_v(file, i + 1, (values >> np.uint64(32)).astype(np.uint32))

    return write


# -- scalar sources ----------------------------------------------------------------------
def sreader(op: Operand, ins: Instruction, width: int = 32) -> Callable[[Wave], int]:
    if op.scc:
        return lambda w: w.scc
    if op.reg is not None:
        if op.reg.file != "s":
            raise UnknownOpcode(f"scalar source expected, got {op.text!r} ({ins.where()})")
        i = op.reg.index
        if width == 64:
            return lambda w: w.get_s64(i)
        return lambda w: w.s[i]
    assert op.const is not None
    value = _const64(op) if width == 64 else op.const.bits(32)
    return lambda w: value


def swriter(op: Operand, ins: Instruction, width: int = 32) -> Callable[[Wave, int], None]:
    if op.reg is None or op.reg.file != "s":
        raise UnknownOpcode(f"scalar destination expected, got {op.text!r} ({ins.where()})")
    i = op.reg.index
    if width == 64:
        return lambda w, value: w.set_s64(i, value)
    return lambda w, value: w.set_s(i, value)


def signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value
