"""Operands of the assembly text: registers, special registers and constants.

Register codes (used by the hazard tracker): VGPR ``i`` is ``i``, AGPR ``i`` is
``256 + i``, SGPR ``i`` is ``512 + i``. Special scalar registers sit at their hardware
SGPR numbers: ``vcc`` = s[106:107], ``m0`` = s124, ``exec`` = s[126:127].
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from .errors import UnknownOpcode

VCC_LO, M0, EXEC_LO = 106, 124, 126
NUM_SGPRS = 128
AGPR_BASE, SGPR_BASE = 256, 512
_SPECIAL = {"vcc": (VCC_LO, 2), "vcc_lo": (VCC_LO, 1), "vcc_hi": (VCC_LO + 1, 1),
            "exec": (EXEC_LO, 2), "exec_lo": (EXEC_LO, 1), "exec_hi": (EXEC_LO + 1, 1),
            "m0": (M0, 1)}
_REG_RE = re.compile(r"^([vsa])(?:(\d+)|\[(\d+):(\d+)\])$")


@dataclass(frozen=True)
class Reg:
    file: str  # "v", "a" or "s"
    index: int
    count: int

    def codes(self) -> tuple[int, ...]:
        base = {"v": 0, "a": AGPR_BASE, "s": SGPR_BASE}[self.file]
        return tuple(base + self.index + i for i in range(self.count))


@dataclass(frozen=True)
class Const:
    text: str
    value: int | float  # int for integer literals, float for float literals

    def bits(self, width: int, kind: str = "int") -> int:
        """Bit pattern of the constant as a ``width``-bit operand of a ``kind`` op."""
        if isinstance(self.value, float):
            if kind == "f16":
                return int(np.float16(self.value).view(np.uint16))
            if width == 64 and kind == "f64":
                return struct.unpack("<Q", struct.pack("<d", self.value))[0]
            return struct.unpack("<I", struct.pack("<f", self.value))[0]
        return self.value & ((1 << width) - 1)


@dataclass(frozen=True)
class Operand:
    """A source or destination operand, with the float input modifiers ``-x`` / ``|x|``."""

    text: str
    reg: Reg | None = None
    const: Const | None = None
    neg: bool = False
    abs: bool = False
    scc: bool = False

    @property
    def is_vgpr(self) -> bool:
        return self.reg is not None and self.reg.file in "va"

    def codes(self) -> tuple[int, ...]:
        return self.reg.codes() if self.reg is not None else ()


def parse_operand(text: str, where: str) -> Operand:
    raw = text
    neg = absolute = False
    if text.startswith("-") and not re.match(r"^-\d", text):
        neg, text = True, text[1:]
    if text.startswith("|") and text.endswith("|"):
        absolute, text = True, text[1:-1]
    if text.startswith("neg(") and text.endswith(")"):
        neg, text = True, text[4:-1]
    if text.startswith("abs(") and text.endswith(")"):
        absolute, text = True, text[4:-1]
    if text in _SPECIAL:
        index, count = _SPECIAL[text]
        return Operand(raw, reg=Reg("s", index, count), neg=neg, abs=absolute)
    if text == "off":
        return Operand(raw)
    if text in ("scc", "src_scc"):
        return Operand(raw, scc=True)
    match = _REG_RE.match(text)
    if match:
        file = match.group(1)
        if match.group(2) is not None:
            index, count = int(match.group(2)), 1
        else:
            index, count = int(match.group(3)), int(match.group(4)) - int(match.group(3)) + 1
        return Operand(raw, reg=Reg(file, index, count), neg=neg, abs=absolute)
    try:
        value: int | float = int(text, 0)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise UnknownOpcode(f"unsupported operand {raw!r} at {where}") from None
    return Operand(raw, const=Const(text, value), neg=neg, abs=absolute)
