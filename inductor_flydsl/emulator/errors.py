"""Errors and findings of the ISA emulator.

Every error names the instruction (line number and text) it stopped at; memory faults
also name the wave, the lane and the address.
"""

from __future__ import annotations

from dataclasses import dataclass


class EmulatorError(Exception):
    """Base class: the emulated kernel could not run to completion."""


class AsmError(EmulatorError):
    """The assembly could not be parsed (unknown syntax, missing metadata)."""


class UnknownOpcode(EmulatorError):
    """The kernel uses an instruction (or an operand form) the emulator does not implement."""


class MemoryFault(EmulatorError):
    """An access outside every bound buffer, outside LDS, or a store to a read-only buffer."""


class HazardError(EmulatorError):
    """A read (or overwrite) of a register or LDS byte an outstanding load has not filled."""


class BudgetExceeded(EmulatorError):
    """A wave ran past the instruction budget (a loop that does not end)."""


class BarrierDeadlock(EmulatorError):
    """Waves wait at a barrier that the other waves of the workgroup never reach."""


@dataclass(frozen=True)
class Race:
    """Two waves touched the same LDS bytes between two barriers, one of them writing."""

    kind: str  # "read-after-write", "write-after-read" or "write-after-write"
    workgroup: tuple[int, int, int]
    address: int
    first_wave: int
    first: str  # "line N: text" of the earlier access
    second_wave: int
    second: str

    def describe(self) -> str:
        return (f"LDS {self.kind} race at byte {self.address} in workgroup {self.workgroup}: "
                f"wave {self.first_wave} [{self.first}] then wave {self.second_wave} "
                f"[{self.second}] with no barrier between them")
