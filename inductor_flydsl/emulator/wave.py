"""State of one wave64: scalar and vector register files, EXEC, SCC, and its outstanding
memory operations (for the ``s_waitcnt`` hazard check)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .operands import EXEC_LO, NUM_SGPRS, SGPR_BASE

LANES = 64
_LANE_BITS = np.uint64(1) << np.arange(LANES, dtype=np.uint64)


def mask_to_bits(mask: np.ndarray) -> int:
    return int(np.bitwise_or.reduce(_LANE_BITS[mask])) if mask.any() else 0


def bits_to_mask(bits: int) -> np.ndarray:
    return (np.uint64(bits) & _LANE_BITS) != 0


@dataclass
class MemOp:
    """An issued memory operation that a ``s_waitcnt`` has not yet retired."""

    op_id: int
    counter: str  # "vm" or "lgkm"
    smem: bool
    codes: tuple[int, ...]  # destination registers it fills
    lds_write: bool  # it writes LDS bytes (tracked in Lds.pending)
    where: str


@dataclass
class Wave:
    wave_id: int
    workgroup: tuple[int, int, int]
    s: list[int] = field(default_factory=lambda: [0] * NUM_SGPRS)
    v: np.ndarray = field(default_factory=lambda: np.zeros((256, LANES), np.uint32))
    a: np.ndarray = field(default_factory=lambda: np.zeros((256, LANES), np.uint32))
    scc: int = 0
    pc: int = 0
    state: str = "run"  # run, barrier, done
    executed: int = 0
    exec_mask: np.ndarray = field(default_factory=lambda: np.ones(LANES, bool))
    exec_full: bool = True
    pending: dict[int, MemOp] = field(default_factory=dict)
    vm_queue: deque = field(default_factory=deque)
    lgkm_queue: deque = field(default_factory=deque)
    barrier_pc: int = -1
    barriers_passed: int = 0

    def __post_init__(self) -> None:
        self.s[EXEC_LO] = 0xFFFFFFFF
        self.s[EXEC_LO + 1] = 0xFFFFFFFF

    # -- scalar registers ---------------------------------------------------------------
    def set_s(self, index: int, value: int) -> None:
        self.s[index] = value & 0xFFFFFFFF
        if index in (EXEC_LO, EXEC_LO + 1):
            self._exec_changed()

    def get_s64(self, index: int) -> int:
        return self.s[index] | (self.s[index + 1] << 32)

    def set_s64(self, index: int, value: int) -> None:
        self.s[index] = value & 0xFFFFFFFF
        self.s[index + 1] = (value >> 32) & 0xFFFFFFFF
        if index in (EXEC_LO, EXEC_LO - 1, EXEC_LO + 1):
            self._exec_changed()

    @property
    def exec_bits(self) -> int:
        return self.get_s64(EXEC_LO)

    def _exec_changed(self) -> None:
        bits = self.exec_bits
        self.exec_full = bits == (1 << LANES) - 1
        self.exec_mask = bits_to_mask(bits)

    # -- vector registers ---------------------------------------------------------------
    def vfile(self, file: str) -> np.ndarray:
        return self.v if file == "v" else self.a

    def write_v(self, file: str, index: int, values: np.ndarray) -> None:
        """Write one 32-bit register in the active lanes."""
        reg = self.v if file == "v" else self.a
        if self.exec_full:
            reg[index] = values
        else:
            m = self.exec_mask
            reg[index][m] = np.broadcast_to(values, (LANES,))[m]

    def sgpr_code(self, index: int) -> int:
        return SGPR_BASE + index
