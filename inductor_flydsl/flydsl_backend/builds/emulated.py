"""Cross-compile one config and run its ISA in the emulator (``compile-check --emulate``).

Each template's spec names its emulator driver (``specs/``): the dense kernel runs a small
random problem that covers a full tile and the M and N tails (``emulator.gemm.tail_shape``)
against torch in float64; a grouped GEMM its ragged scenarios (``emulator.grouped``); an
MX GEMM its float64 dequantize-then-matmul reference (``emulator.mx``; the ``nt_b32``
layout with B's scales per 32x32 block).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .cross_compile import CompileResult, compile_config


def emulate_compiled(result: CompileResult, *, seed: int = 0) -> dict[str, Any]:
    """Run a compiled result's ISA (``result.isa_path``) with its template's emulator
    driver (the template registry's ``emulate``: a tail problem, the ragged scenarios of a
    grouped GEMM, an MX GEMM's dequantized reference)."""
    from ..specs import registry

    return registry.spec(result.template).emulate(result, seed)


def compile_and_emulate(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
                        op: str, dump_dir: str | os.PathLike | None = None,
                        epilogue: str = "") -> CompileResult:
    """:func:`compile_config`, then the emulator's verdict in ``result.emulation``
    (``epilogue``: the fused ``EpilogueSpec``'s canonical JSON, ``""`` for none)."""
    root = Path(dump_dir) if dump_dir is not None else Path(tempfile.mkdtemp(prefix="emu-"))
    try:
        result = compile_config(template_name, config, arch=arch, dtype=dtype, layout=layout,
                                op=op, dump_dir=root, epilogue=epilogue)
        if result.ok and result.isa_path:
            result.emulation = emulate_compiled(result)
        if dump_dir is None:
            result.isa_path = None
        return result
    finally:
        if dump_dir is None:
            shutil.rmtree(root, ignore_errors=True)
