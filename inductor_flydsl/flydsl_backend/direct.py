"""The namespace Inductor's generated code calls the plugin's ops through.

A graph whose selection a FlyDSL candidate won runs
``inductor_flydsl_direct.<op>_out(..., out=buf)`` (:func:`call_name`): the op's
implementation (``run/ops.py``) without torch's dispatcher, reached as a module attribute
(one global and one attribute lookup per call, as ``extern_kernels.<name>`` is). The
generated module imports this module itself (:data:`IMPORT`, written among its imports
when the call is generated: ``autotune.choices.DirectKernelOut``), so the module finds its
ops in any process where the package is installed, the plugin on or off, with or without the
``torch.backends`` entry point, for a graph compiled here or loaded from Inductor's
FX-graph cache or another compiler's cache of Inductor's code (vLLM's); importing it
registers the ``torch.ops.inductor_flydsl`` ops too. Nothing is set on ``torch``.
It stays at ``flydsl_backend/direct.py``, outside the job folders (``run/`` holds the ops),
because generated code, which may sit in users' FX-graph caches, imports it by this path.

Its attributes are the ops' implementations and nothing else (``tests/flydsl``).
"""

from __future__ import annotations

from .run.ops import (
    addmm_out,
    bmm_out,
    gemm_epilogue_out,
    grouped_mm_out,
    mm_out,
    scaled_mm_bias_out,
    scaled_mm_out,
)

ALIAS = "inductor_flydsl_direct"  # the name generated code gives this module
IMPORT = f"from inductor_flydsl.flydsl_backend import direct as {ALIAS}"

__all__ = ["addmm_out", "bmm_out", "gemm_epilogue_out", "grouped_mm_out", "mm_out",
           "scaled_mm_bias_out", "scaled_mm_out"]


def call_name(op: str) -> str:
    """How generated code names ``op``'s implementation: ``inductor_flydsl_direct.<op>_out``
    (valid once :data:`IMPORT` is among the module's imports)."""
    return f"{ALIAS}.{op}_out"
