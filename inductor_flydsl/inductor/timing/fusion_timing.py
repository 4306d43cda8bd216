"""The scheduler's epilogue-fusion benchmark, timed like the GEMM it is compared with
(issue 50).

``Scheduler.speedup_by_fusion`` fuses a deferred GEMM's epilogue when the fused template
beats the GEMM-only winner plus the epilogue kernel alone. The GEMM-only times are the
selection's; in a selection holding a FlyDSL candidate under ``mode="max-autotune"`` they
are graph-replay times (``timing_parity.py``), while Inductor times the epilogue kernel
and each fused template with ``benchmarker.benchmark`` (host dispatch and argument
clones included): unlike with unlike, which decides against fusing. For such an attempt
(``fusion_replay.py`` knows it) the two are timed here by graph replay instead, the way
Inductor's Triton backend times them otherwise (``benchmark_codegened_module``): one
call compiles the kernel, a kernel that spills more than 8 registers is not fused
(``inf``), the call on cloned arguments is captured and replayed, and where the kernel
mutates an argument the clone's own replayed time is taken off. Inductor's per-module
time file (``.kernel_perf``) is neither read nor written (it holds eager times).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from ..adapter import internals

SPILLS_THRESHOLD = 8  # Inductor's n_spills_threshold of benchmark_codegened_module


def _device_scope(device: Any) -> contextlib.AbstractContextManager:
    if device is None or getattr(device, "type", "cpu") == "cpu":
        return contextlib.nullcontext()
    return internals.get_interface_for_device(device.type).device(device.index or 0)


def time_module_by_graph(module: Any, device: Any) -> tuple[float, str]:
    """``(ms, module file)`` of a generated Triton module (``get_args``, ``call``,
    ``triton_``), the call captured and replayed."""
    path = getattr(module, "__file__", "") or ""
    with _device_scope(device):
        args = module.get_args()
        call, kernel = module.call, module.triton_
        try:
            call(kernel.clone_args(*args)[0])  # compiles it, outside any capture
        except Exception:
            return math.inf, path
        launchers = getattr(kernel, "launchers", ()) or ()
        if launchers and getattr(launchers[0], "n_spills", 0) > SPILLS_THRESHOLD:
            return math.inf, path
        bench = internals.benchmarker.benchmark_gpu_with_cuda_graph
        ms = bench(lambda: call(kernel.clone_args(*args)[0]))
        if getattr(kernel, "mutated_arg_names", None):
            ms -= bench(lambda: kernel.clone_args(*args))
    return float(ms), path


def time_nodes_by_graph(scheduler: Any, nodes: Any) -> tuple[float, str] | None:
    """``(ms, file)`` of the epilogue kernel alone (``benchmark_fused_nodes``' nodes) by
    graph replay; None when the nodes' backend does not generate a Triton module (then
    Inductor's own timing stands)."""
    device = nodes[0].get_device()
    backend = scheduler.get_backend(device)
    generate = getattr(backend, "generate_kernel_code_from_nodes", None)
    if generate is None:
        return None
    module = internals.PyCodeCache.load(generate(nodes, benchmark_kernel=True))
    if not hasattr(module, "triton_"):
        return None
    return time_module_by_graph(module, device)
