"""Graph timing captures every choice it claims to (issue 50): a stand-in capture records
which stream each choice's kernel went to.

There is no GPU here, so the GPU is a stand-in (``_standin_gpu``): a device interface
registered for the ``meta`` device whose raw stream is the stand-in's current stream, a
capture that switches that stream to its own while a function runs (as
``Benchmarker.benchmark_gpu_with_cuda_graph`` runs one call inside ``torch.cuda.graph``
on a side stream), and a Triton kernel stand-in (a real module file loaded through
Inductor's ``PyCodeCache``) that records the stream it is launched on. Everything between
is torch's own: ``TritonBenchmarkRequest.benchmark`` / ``make_run_fn`` and
``ExternKernelCaller.benchmark`` with their graph-timing flag set, as
``timing_parity.time_like_the_graph`` sets it.

Under torch 2.13 the unpatched Triton call goes to the stream that was current before the
capture (the timed replay would be empty); with the plugin on it goes into the capture
(``triton_stream.py``, the backport of torch 2.14.1's fix). Under torch 2.14.1 (this file
runs under both releases) the call is captured with the plugin off or on, and nothing of
torch's is replaced.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import inductor_flydsl
from inductor_flydsl.inductor.adapter import internals, patches, triton_stream

ORDINARY_STREAM, CAPTURE_STREAM = 11, 77

KERNEL_MODULE = '''
import _standin_gpu


class StandInTritonKernel:
    """Launches record the stream they were given (a Triton kernel's ``run``)."""

    def run(self, *args, stream, benchmark_run=False, warmup=False):
        _standin_gpu.launched(stream)


kernel = StandInTritonKernel()
'''


class StandInGPU:
    """The stand-in device: its current raw stream, a graph capture, the launches seen."""

    def __init__(self) -> None:
        self.current = ORDINARY_STREAM
        self.launches: list[tuple[int, bool]] = []  # (stream, inside a capture)
        self.capturing = False

    def launched(self, stream: int) -> None:
        self.launches.append((stream, self.capturing))

    def capture_and_time(self, fn: Callable[[], Any], **_: Any) -> float:
        """What ``benchmark_gpu_with_cuda_graph`` does: one call of ``fn`` captured on a
        side stream (the capture's stream current meanwhile), then the replay timed."""
        self.current, self.capturing = CAPTURE_STREAM, True
        try:
            fn()
        finally:
            self.current, self.capturing = ORDINARY_STREAM, False
        return 1.0


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInGPU]:
    from torch._dynamo import device_interface

    standin = StandInGPU()
    module = types.ModuleType("_standin_gpu")
    module.launched = standin.launched  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "_standin_gpu", module)
    base = device_interface.get_interface_for_device("cpu")

    class StandInInterface(base):  # type: ignore[misc, valid-type]
        device = staticmethod(lambda index: contextlib.nullcontext())  # one device

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return standin.current

    device_interface.get_interface_for_device("cpu")  # the registry initialised first
    monkeypatch.setitem(device_interface.device_interfaces, "meta", StandInInterface)
    monkeypatch.setattr(internals.benchmarker, "benchmark_gpu_with_cuda_graph",
                        standin.capture_and_time)
    yield standin


def _triton_request(tmp_path: Path) -> Any:
    import torch._inductor.runtime.triton_heuristics  # make_run_fn reads it
    from torch._inductor.autotune_process import TensorMeta, TritonBenchmarkRequest

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "standin_kernel.py"
    path.write_text(KERNEL_MODULE)
    meta = TensorMeta(device=torch.device("meta", 0), dtype=torch.float32, sizes=(4, 4),
                      strides=(4, 1), offset=0)
    request = TritonBenchmarkRequest("kernel", [meta, meta], meta, (), str(path),
                                     f"standin-{tmp_path.name}", num_stages=1, num_warps=1)
    request.benchmark_with_cudagraphs = True  # what TritonTemplateCaller.benchmark sets
    return request


def _benchmark_triton(tmp_path: Path) -> None:
    request = _triton_request(tmp_path)
    a, b, out = (torch.empty(4, 4, device="meta") for _ in range(3))
    request.benchmark(a, b, out=out)


@contextlib.contextmanager
def _plugin_on(tmp_path: Path) -> Iterator[None]:
    inductor_flydsl.enable(tmp_path / "t.db", "readwrite")
    try:
        yield
    finally:
        inductor_flydsl.disable()


def test_a_triton_choice_timed_by_graph_is_launched_inside_the_capture(
        gpu: StandInGPU, tmp_path: Path) -> None:
    early = triton_stream.binds_stream_early()
    _benchmark_triton(tmp_path / "off")
    # plugin off: torch as it is; under 2.13 the launch misses the capture's stream
    assert gpu.launches == [(ORDINARY_STREAM if early else CAPTURE_STREAM, True)]
    gpu.launches.clear()
    with _plugin_on(tmp_path):
        assert patches.is_applied(triton_stream.OWNER, triton_stream.ATTR) == early
        _benchmark_triton(tmp_path / "on")
    assert gpu.launches == [(CAPTURE_STREAM, True)]
    assert not patches.is_applied(triton_stream.OWNER, triton_stream.ATTR)  # put back


def test_torch_2_13_binds_the_stream_early_and_2_14_1_does_not() -> None:
    """The backport is applied exactly where torch lacks the fix: torch 2.13 builds a
    partial with ``stream=`` bound; 2.14.1 reads the stream inside ``run_fn``."""
    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:3])
    assert triton_stream.binds_stream_early() == (release < (2, 14, 1))


def test_an_eager_triton_call_keeps_its_stream(gpu: StandInGPU, tmp_path: Path) -> None:
    """Outside a capture the backported call launches on the stream current then, as
    before: eager timing is unchanged."""
    request = _triton_request(tmp_path)
    a, b, out = (torch.empty(4, 4, device="meta") for _ in range(3))
    with _plugin_on(tmp_path):
        fn = request.make_run_fn(a, b, out=out)
        fn()
    request.cleanup_run_fn()
    assert gpu.launches == [(ORDINARY_STREAM, False)]


def test_an_extern_choice_timed_by_graph_runs_inside_the_capture(gpu: StandInGPU) -> None:
    """ATen (and FlyDSL, both extern choices) are called inside the capture: their
    streams are read by the call itself (torch's current stream, FlyDSL's launcher reads
    the raw stream of the output's device when it launches)."""
    from torch._inductor.ir import FixedLayout
    from torch._inductor.select_algorithm import ExternKernelCaller, ExternKernelChoice

    seen: list[bool] = []

    def mm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        seen.append(gpu.capturing)
        return torch.mm(a, b, out=out)

    choice = ExternKernelChoice(mm, name=f"standin_mm_{id(gpu)}", has_out_variant=True)
    layout = FixedLayout(torch.device("cpu"), torch.float32, [4, 4])
    caller = ExternKernelCaller(choice, [], layout, {}, has_out_variant=True)
    caller._benchmark_with_cudagraphs = True  # what timing_parity sets
    a, b, out = torch.randn(4, 4), torch.randn(4, 4), torch.empty(4, 4)
    caller.benchmark(a, b, out=out)
    assert seen and all(seen)  # every call (the correctness call too) inside the capture
    torch.testing.assert_close(out, a @ b)


# ---- what is labelled graph-timed, and Inductor's local autotune cache ------------------
@functools.cache
def _kernel_choice(name: str) -> Any:
    """One ExternKernelChoice per name and process (Inductor registers them by name)."""
    from torch._inductor.select_algorithm import ExternKernelChoice

    return ExternKernelChoice(getattr(torch, name), name=f"standin_cache_{name}",
                              has_out_variant=False)


def _extern_choices() -> list[Any]:
    """Two fresh extern choices (ATen's kind), as a new compile makes them."""
    from torch._inductor.ir import FixedLayout
    from torch._inductor.select_algorithm import ExternKernelCaller

    layout = FixedLayout(torch.device("cpu"), torch.float32, [4, 4])
    return [ExternKernelCaller(_kernel_choice(name), [], layout, {})
            for name in ("mm", "matmul")]


def test_a_choice_type_that_ignores_the_flag_is_not_labelled_graph_timed() -> None:
    """CK and CK-tile choices (ROCmTemplateCaller) never read the graph flag: a selection
    holding one is timed eagerly, every choice of it, and keyed so."""
    from torch._inductor.codegen.cpp_template_kernel import CppTemplateCaller
    from torch._inductor.codegen.rocm.rocm_kernel import ROCmTemplateCaller
    from torch._inductor.codegen.subgraph import SubgraphChoiceCaller
    from torch._inductor.select_algorithm import ExternKernelCaller, TritonTemplateCaller

    from inductor_flydsl.flydsl_backend.autotune.choices import FlydslChoiceCaller
    from inductor_flydsl.inductor.adapter.choice_state import ATTR, PluginChoiceState
    from inductor_flydsl.inductor.timing import timing_parity

    for cls in (ExternKernelCaller, TritonTemplateCaller, SubgraphChoiceCaller,
                FlydslChoiceCaller):
        assert timing_parity.honours_graph_flag(cls), cls
    for cls in (ROCmTemplateCaller, CppTemplateCaller):
        assert not timing_parity.honours_graph_flag(cls), cls
    aten, plugin = _extern_choices()
    setattr(plugin, ATTR, PluginChoiceState("flydsl", {}))  # stands for a FlyDSL candidate
    assert timing_parity.time_like_the_graph([aten, plugin], "graph") == "graph"
    assert timing_parity.timing_mode_of([aten, plugin]) == "graph"
    ck = ROCmTemplateCaller.__new__(ROCmTemplateCaller)  # its class is what is checked
    aten, plugin = _extern_choices()
    setattr(plugin, ATTR, PluginChoiceState("flydsl", {}))
    assert timing_parity.time_like_the_graph([aten, plugin, ck], "graph") == "eager"
    assert not any(timing_parity.timed_with_graphs(c) for c in (aten, plugin))
    ck._benchmark_with_cudagraphs = True  # even flagged by someone else: not graph-timed
    assert timing_parity.timing_mode_of([ck]) is None


def test_inductors_local_autotune_cache_never_crosses_timing_modes(tmp_path: Path) -> None:
    """Eager -> graph -> eager lookups in one Inductor cache: the graph-timed selection
    is benchmarked (not served the eager timings), and the second eager one is served the
    first's, not the graph's (ATen's hash_key does not say how it was timed)."""
    from torch._inductor.utils import fresh_cache

    calls: list[str] = []

    def bench(label: str, ms: float):
        def run(choices: list[Any]) -> dict[Any, float]:
            calls.append(label)
            return dict.fromkeys(choices, ms)
        return run

    with _plugin_on(tmp_path), fresh_cache(), \
            internals.config.patch(autotune_local_cache=True):
        selector = internals.get_algorithm_selector_cache()
        eager = _extern_choices()
        first = selector.lookup(eager, "mm", "4x4", bench("eager", 1.0))
        graph = _extern_choices()
        for choice in graph:
            choice._benchmark_with_cudagraphs = True
        second = selector.lookup(graph, "mm", "4x4", bench("graph", 2.0))
        third = selector.lookup(_extern_choices(), "mm", "4x4", bench("eager again", 3.0))
        again = _extern_choices()
        for choice in again:
            choice._benchmark_with_cudagraphs = True
        fourth = selector.lookup(again, "mm", "4x4", bench("graph again", 4.0))
    assert calls == ["eager", "graph"]  # the third and fourth were served, each its own
    assert set(first.values()) == {1.0} and set(second.values()) == {2.0}
    assert set(third.values()) == {1.0} and set(fourth.values()) == {2.0}


# ---- the scheduler's epilogue-fusion benchmark: like with like -------------------------
class StandInKernel:
    """A generated module's ``triton_`` (Inductor's CachingAutotuner): clones, launchers."""

    def __init__(self, gpu: StandInGPU, spills: int = 0, mutates: bool = False) -> None:
        self.gpu = gpu
        self.launchers = [types.SimpleNamespace(n_spills=spills)]
        self.mutated_arg_names = ["buf0"] if mutates else []

    def clone_args(self, *args: Any) -> tuple[list[Any], dict]:
        self.gpu.launched(-1)  # a clone: recorded as stream -1
        return list(args), {}


class StandInModule:
    """A generated Triton module as the scheduler benchmarks it (get_args, call,
    triton_): its call launches the kernel on the stand-in's current stream."""

    __file__ = "/nowhere/standin_fused.py"

    def __init__(self, gpu: StandInGPU, **kernel: Any) -> None:
        self.gpu = gpu
        self.triton_ = StandInKernel(gpu, **kernel)

    def get_args(self) -> list[int]:
        return [1, 2]

    def call(self, args: list[int]) -> None:
        self.gpu.launched(self.gpu.current)


def test_a_graph_timed_fusion_attempt_times_its_fused_kernels_by_graph(
        gpu: StandInGPU) -> None:
    """Where the GEMM-only times are graph-replay times, the fused template (and the
    epilogue kernel alone) are timed by graph replay too: compiled by one call outside
    the capture, then the call on cloned arguments captured; a mutating kernel's clone
    time taken off; a spilling kernel not fused (inf)."""
    from inductor_flydsl.inductor.fusion import fusion_replay
    from inductor_flydsl.inductor.timing import fusion_timing

    meta = torch.device("meta", 0)
    ms, path = fusion_timing.time_module_by_graph(StandInModule(gpu), meta)
    assert (ms, path) == (1.0, StandInModule.__file__)
    # warm-up call outside (its clone first), then the clone and call inside the capture
    assert gpu.launches == [(-1, False), (ORDINARY_STREAM, False), (-1, True),
                            (CAPTURE_STREAM, True)]
    gpu.launches.clear()
    assert fusion_timing.time_module_by_graph(StandInModule(gpu, mutates=True), meta)[0] \
        == 0.0  # 1.0 captured with its clone, less the clone's own 1.0
    assert fusion_timing.time_module_by_graph(StandInModule(gpu, spills=9), meta)[0] \
        == float("inf")
    # through the scheduler's wrapped method, inside an attempt of each kind
    for graph in (True, False):
        capture = fusion_replay._Capture(multi=None, graph=graph)
        capture.caller = "template"
        gpu.launches.clear()
        with fusion_replay._capturing(capture):
            if graph:
                fusion_replay.benchmark_codegened_module(None, StandInModule(gpu), meta)
                assert capture.fused == {"template": 1.0}
                assert (CAPTURE_STREAM, True) in gpu.launches
            else:  # Inductor's own (here: the original, which needs a real scheduler)
                with pytest.raises(Exception):  # noqa: B017
                    fusion_replay.benchmark_codegened_module(None, StandInModule(gpu), meta)
                assert capture.fused == {} and gpu.launches == []
