"""Inductor's Triton (GPU) code paths on this CPU: Triton's own interpreter runs the kernels.

With ``config.cpu_backend = "triton"`` Inductor lowers CPU tensors to Triton kernels and
Triton templates, and with ``max_autotune`` defers a GEMM's choice to the scheduler's
epilogue-fusion benchmark (``MultiTemplateBuffer``), as on a GPU. Triton's interpreter
(``TRITON_INTERPRET=1``, set by the parent before this process starts) runs the kernels
on CPU tensors. Two things a GPU driver would provide are stood in for here, nothing of
Inductor's decisions: a Triton driver (``get_current_target``, which Inductor hashes into
kernel metadata; a benchmarker) and the CPU device interface's ``device`` context (a GPU's
sets the current device; the CPU has one). What the interpreter cannot do is give a
compiled kernel's launcher (registers, spills), which Inductor's benchmark of a generated
module checks before timing it; :func:`time_interpreted_module` (installed only by
:func:`benchmark_generated_modules`) times the module's call on the CPU with Inductor's
own CPU benchmarker instead, without that check.

Only for test child processes (it changes process-wide state): import it first.
"""

from __future__ import annotations

import os

import torch
from torch._dynamo.device_interface import CpuInterface
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.runtime.driver import driver

if os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError("set TRITON_INTERPRET=1 before starting the process")


class InterpreterDriver(DriverBase):
    """The driver Triton asks for a target and a benchmarker (a target Triton knows, so
    its backend hash is defined; no kernel is compiled for it under the interpreter)."""

    @classmethod
    def is_active(cls) -> bool:
        return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        raise NotImplementedError("no compiled launchers under the interpreter")

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_benchmarker(self):  # type: ignore[no-untyped-def]
        from triton.testing import do_bench
        return do_bench

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_device_interface(self):  # type: ignore[no-untyped-def]
        return torch.cpu

    def get_empty_cache_for_benchmark(self) -> torch.Tensor:
        return torch.empty(1 << 20, dtype=torch.int8)

    def clear_cache(self, cache: torch.Tensor) -> None:
        cache.zero_()


class _OneDevice:
    """``with device_interface.device(index)`` on the CPU: one device, nothing to set."""

    def __init__(self, device: object) -> None:
        self.device = device

    def __enter__(self) -> _OneDevice:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


def time_interpreted_module(self: object, mod: object, *args: object,
                            **kwargs: object) -> tuple[float, str]:
    """``TritonScheduling.benchmark_codegened_module`` for interpreted kernels: the
    generated module's ``call`` on fresh copies of its arguments, timed by Inductor's CPU
    benchmarker (no launcher to check for register spills)."""
    from torch._inductor.runtime.benchmarking import benchmarker

    call_args = mod.get_args()  # type: ignore[attr-defined]
    kernel = mod.triton_  # type: ignore[attr-defined]
    ms = benchmarker.benchmark_cpu(lambda: mod.call(kernel.clone_args(*call_args)[0]))  # type: ignore[attr-defined]
    return float(ms), str(mod.__file__)  # type: ignore[attr-defined]


def benchmark_generated_modules() -> None:
    """Let Inductor's fusion benchmark time interpreted modules (see the module text)."""
    from torch._inductor.codegen.triton import TritonScheduling

    TritonScheduling.benchmark_codegened_module = time_interpreted_module  # type: ignore[method-assign]


driver.set_active(InterpreterDriver())
CpuInterface.device = _OneDevice  # type: ignore[assignment,misc]
