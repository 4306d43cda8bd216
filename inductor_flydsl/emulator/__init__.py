"""A functional emulator of the CDNA3 (gfx942) and CDNA4 (gfx950) instructions our FlyDSL
kernels compile to: it runs the final ISA on the CPU, 64 lanes at a time with numpy.

Entry points: :func:`~.gemm.emulate_gemm` (run a dense GEMM template's ISA on a random
problem and compare with torch) and :class:`~.machine.Machine` (run any parsed kernel).
What it proves and what it does not: the paragraph of docs/emulator.md that begins "What
it proves".
"""

from .errors import (
    AsmError,
    BarrierDeadlock,
    BudgetExceeded,
    EmulatorError,
    HazardError,
    MemoryFault,
    Race,
    UnknownOpcode,
)

__all__ = ["AsmError", "BarrierDeadlock", "BudgetExceeded", "EmulatorError", "HazardError",
           "MemoryFault", "Race", "UnknownOpcode"]
