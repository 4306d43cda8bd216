"""Cross-compile one config and run its ISA in the emulator (``compile-check --emulate``).

Each (dtype, layout, op) variant is run on a small random problem that covers a full
tile and the M and N tails (``emulator.gemm.tail_shape``), against torch in float64; a
grouped GEMM on its ragged scenarios (``emulator.grouped``); an MX GEMM against its
float64 dequantize-then-matmul reference (``emulator.mx``; the ``nt_b32`` layout with
B's scales per 32x32 block).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ...emulator.gemm import emulate_gemm, tail_shape
from ...emulator.grouped import emulate_grouped_scenarios
from ...emulator.mx import emulate_mx, mx_tail_shape
from ...template_loader import load_template
from .cross_compile import CompileResult, compile_config

GROUPED_OP = "grouped_mm"
MX_TEMPLATE = "gemm_mx"


def emulate_compiled(result: CompileResult, *, seed: int = 0) -> dict[str, Any]:
    """Run a compiled result's ISA (``result.isa_path``) on its variant's tail problem
    (grouped GEMMs: on every ragged scenario of :func:`~.grouped.grouped_scenarios`)."""
    template = load_template(result.template)
    config = template.GemmConfig.from_json(dict(result.config))
    assert result.isa_path is not None
    if result.op == GROUPED_OP:
        return emulate_grouped_scenarios(Path(result.isa_path).read_text(), template, config,
                                         dtype=result.dtype, layout=result.layout, seed=seed)
    if result.template == MX_TEMPLATE:
        m, n, k = mx_tail_shape(config)
        return emulate_mx(Path(result.isa_path).read_text(), template, config,
                          dtype=result.dtype, op=result.op, m=m, n=n, k=k, seed=seed,
                          layout=result.layout).to_json()
    m, n, k = tail_shape(config, result.op, result.layout)
    run = emulate_gemm(Path(result.isa_path).read_text(), template, config, op=result.op,
                       dtype=result.dtype, layout=result.layout, m=m, n=n, k=k, seed=seed,
                       epilogue=result.epilogue)
    return run.to_json()


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
