"""FlyDSL kernels launched end to end on this CPU machine: the plugin's custom ops, the
templates' ``launch``, the kernel runner, FlyDSL's real runtime (``libfly_jit_runtime.so``)
and a stand-in HIP library (tests/fake_hip) in place of ROCm's.

In the emulating mode the stand-in hands each launch (its code object, grid, block and
kernarg bytes, as HIP receives them) to this project's ISA emulator, which runs it on the
host memory its pointers name; the outputs are checked against torch. In the recording
mode launches are only recorded: errors, devices, the compiled-kernel cache and the
absence of tracing in the launching process are checked there. Builds run in the build
pool's workers, as in a compile.
"""

from __future__ import annotations

import os

import pytest
import torch

from inductor_flydsl.emulator.gemm import make_operands, random_epilogue_operands
from inductor_flydsl.emulator.grouped import make_grouped_operands
from inductor_flydsl.emulator.mx import make_mx_operands
from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_GROUPED
from inductor_flydsl.flydsl_backend.run import kernel_runner
from inductor_flydsl.flydsl_backend.run.ops import strict_launches
from inductor_flydsl.flydsl_backend.specs.gemm_mx import REPRESENTATIVE as MX_REPRESENTATIVE
from inductor_flydsl.numerics.gemm import validate_epilogue_output, validate_output
from inductor_flydsl.problems.epilogue_spec import EpilogueSpec
from inductor_flydsl.template_loader import load_template
from tests.fake_hip.harness import FakeHipRuntime, fake_hip

pytestmark = pytest.mark.skipif(
    not any(os.path.exists(os.path.join(d, "llvm-readelf-22")) for d in
            os.environ.get("PATH", "").split(os.pathsep)),
    reason="llvm-22 (llvm-readelf-22, llvm-objdump-22) reads the code objects")

gemm = load_template("gemm_dense")
SMALL = gemm.GemmConfig(tile_m=16, tile_n=32, tile_k=128, waves_m=1, waves_n=1, stages=2,
                        group_m=1)
SPLIT = gemm.GemmConfig(tile_m=16, tile_n=32, tile_k=128, waves_m=1, waves_n=1, stages=2,
                        group_m=1, split_k=2)
OPS = torch.ops.inductor_flydsl


@pytest.fixture(scope="module")
def hip(tmp_path_factory: pytest.TempPathFactory):
    os.environ.setdefault("FLYDSL_RUNTIME_CACHE_DIR",
                          str(tmp_path_factory.mktemp("flydsl-cache")))
    yield fake_hip(tmp_path_factory.mktemp("fake-hip"))
    prebuild.shutdown_pool()
    prebuild.forget_builds()


@pytest.fixture
def emulated(hip):
    with kernel_runner.use_runtime(FakeHipRuntime(hip, emulate=True)) as runner:
        yield runner
    assert runner.runtime.emulation.errors == []


@pytest.fixture
def recorded(hip):
    with kernel_runner.use_runtime(FakeHipRuntime(hip)) as runner:
        yield runner


def _config_json(config) -> str:
    from inductor_flydsl.problems.keys import canonical_json

    return canonical_json(config.to_json())


def test_the_flydsl_internals_the_launch_path_uses_are_there() -> None:
    from inductor_flydsl.flydsl_backend.builds import flydsl_runtime

    assert flydsl_runtime.problems() == []


# ---- every template kind, correct through FlyDSL's runtime and the emulator -------------
def test_dense_mm_with_tails(emulated) -> None:
    a, b, _, out = make_operands("mm", "bf16", "nt", 40, 96, 256)
    OPS.mm_out(a, b, out=out, config=_config_json(SMALL), alpha=1.5)
    validate_output("mm", (a, b), out, 1.5, 0.0)
    assert emulated.runtime.emulation.runs == 1


def test_split_k_addmm_with_a_1xn_bias(emulated) -> None:
    a, b, bias, out = make_operands("addmm", "bf16", "nt", 24, 64, 512)
    row = bias.reshape(1, -1)  # (1, N), as Inductor may hand it
    OPS.addmm_out(row, a, b, out=out, config=_config_json(SPLIT), alpha=1.0, beta=0.5)
    validate_output("addmm", (bias, a, b), out, 1.0, 0.5)
    assert emulated.runtime.emulation.runs == 1  # the partials; torch sums them


def test_fused_epilogue(emulated) -> None:
    text = EpilogueSpec.from_json({"operands": [{"kind": "col", "dtype": "bfloat16"}],
                                   "steps": [["add", "acc", "x0"], ["relu", "s0"]],
                                   "out_dtype": "bfloat16"}).text()
    spec = EpilogueSpec.from_json(text)
    a, b, _, _ = make_operands("mm", "bf16", "nt", 40, 64, 256)
    (x0,) = random_epilogue_operands(gemm, spec, 40, 64)
    out = torch.full((40, 64), float("nan"), dtype=torch.bfloat16)
    OPS.gemm_epilogue_out(a, b, x0, x0, x0, x0, out=out, config=_config_json(SMALL),
                          epilogue=text)
    validate_epilogue_output(text, (a, b, x0), out)


def test_grouped(emulated) -> None:
    config = DEFAULT_GROUPED[0]
    a, b, offs, out = make_grouped_operands("bf16", "nt", [5, 0, 20], 64, 128)
    OPS.grouped_mm_out(a, b, offs, out=out, config=_config_json(config))
    validate_output("grouped_mm", (a, b, offs), out, 1.0, 0.0)
    assert torch.isnan(out[25:].float()).all()  # rows past the last group untouched


def test_mx(emulated) -> None:
    a, b, scale_a, scale_b, _, out = make_mx_operands("e4m3xe4m3_bf16", "mm", 64, 128, 512)
    OPS.scaled_mm_out(a, b, scale_a, scale_b, out=out, config=_config_json(MX_REPRESENTATIVE))
    validate_output("scaled_mm", (a, b, scale_a, scale_b), out, 1.0, 0.0)


def test_split_k_counters_one_per_stream_made_outside_graphs(emulated, hip) -> None:
    """Issue 50: an in-launch split-K reduction's arrival counters are one buffer per raw
    stream handle (two streams, two buffers; the handle reached the key as None before,
    one buffer for every stream), made by the runtime outside any graph's memory pool,
    and never made inside a capture: there the call is computed with ATen, with no HIP
    call."""
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    inside = gemm.GemmConfig(tile_m=16, tile_n=32, tile_k=128, waves_m=1, waves_n=1,
                             stages=2, group_m=1, split_k=2, reduce_in_launch=1)
    runtime = emulated.runtime
    gemm._COUNTERS.clear()
    first, second = runtime.stream_handle, hip.create_stream()
    for stream in (first, second, first):
        runtime.stream_handle = stream  # the current stream of the next call
        a, b, _, out = make_operands("mm", "bf16", "nt", 24, 64, 512)
        OPS.mm_out(a, b, out=out, config=_config_json(inside))
        validate_output("mm", (a, b), out, 1.0, 0.0)
    assert sorted(key[1] for key in gemm._COUNTERS) == sorted([first, second])
    assert runtime.outside_graph_buffers == [first, second]  # each made once, outside
    third = hip.create_stream()
    runtime.stream_handle = third
    during = hip.calls_during_capture()
    a, b, _, out = make_operands("mm", "bf16", "nt", 24, 64, 512)
    with hip.capturing(), pytest.warns(TuningDBWarning, match="outside a graph capture"):
        OPS.mm_out(a, b, out=out, config=_config_json(inside))
    assert hip.calls_during_capture() == during
    torch.testing.assert_close(out, a @ b)
    assert len(gemm._COUNTERS) == 2 and runtime.outside_graph_buffers == [first, second]
    runtime.stream_handle = first


def test_grouped_and_mx_failures_in_the_forward_compute_with_aten(recorded, hip) -> None:
    """Issue 50: the grouped and MX ops fall back as the dense ones do: a failed launch,
    or a kernel not loaded yet inside a graph capture, is computed into ``out`` (grouped
    with ``torch._grouped_mm``; MX dequantized on the device, then a float32 matmul),
    with one warning per kernel, never an exception in the forward."""
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    a, b, offs, out = make_grouped_operands("bf16", "nt", [5, 0, 20], 64, 128)
    hip.fail_next(launches=1)
    with pytest.warns(TuningDBWarning, match="grouped_mm kernel .* computed with ATen"):
        OPS.grouped_mm_out(a, b, offs, out=out, config=_config_json(DEFAULT_GROUPED[0]))
    validate_output("grouped_mm", (a, b, offs), out, 1.0, 0.0)

    for op, dtype in (("mm", "e4m3xe4m3_bf16"), ("addmm", "e2m1xe2m1_bf16")):
        a, b, scale_a, scale_b, bias, out = make_mx_operands(dtype, op, 64, 128, 512)
        config = _config_json(MX_REPRESENTATIVE)
        hip.fail_next(launches=1)
        with pytest.warns(TuningDBWarning, match="computed with ATen.*hipErrorLaunchFailure"):
            if bias is None:
                OPS.scaled_mm_out(a, b, scale_a, scale_b, out=out, config=config)
            else:
                OPS.scaled_mm_bias_out(a, b, scale_a, scale_b, bias, out=out, config=config)
        inputs = (a, b, scale_a, scale_b) + (() if bias is None else (bias,))
        validate_output("scaled_mm", inputs, out, 1.0, 0.0)

    # not loaded yet, and its stream captures: nothing loads there, torch computes it
    a, b, offs, out = make_grouped_operands("bf16", "nt", [7, 9], 64, 128)
    during = hip.calls_during_capture()
    with hip.capturing(), pytest.warns(TuningDBWarning, match="capturing a graph"):
        OPS.grouped_mm_out(a, b, offs, out=out, config=_config_json(DEFAULT_GROUPED[1]))
    assert hip.calls_during_capture() == during
    validate_output("grouped_mm", (a, b, offs), out, 1.0, 0.0)


def test_a_strict_grouped_or_mx_launch_still_raises(recorded, hip) -> None:
    """While Inductor benchmarks a candidate a failure raises (the candidate is excluded),
    as for the dense ops."""
    a, b, offs, out = make_grouped_operands("bf16", "nt", [5, 20], 64, 128)
    hip.fail_next(launches=1)
    with strict_launches(), pytest.raises(RuntimeError, match="hipErrorLaunchFailure"):
        OPS.grouped_mm_out(a, b, offs, out=out, config=_config_json(DEFAULT_GROUPED[0]))


# ---- the launch path: no trace, no settings changed, errors raised, per device ---------
def _mm(runner, config=SMALL, m: int = 32, out=None):
    a, b, _, fresh = make_operands("mm", "bf16", "nt", m, 64, 256)
    OPS.mm_out(a, b, out=fresh if out is None else out, config=_config_json(config))


def test_launches_never_trace_or_touch_the_environment(recorded, hip, monkeypatch) -> None:
    from flydsl.compiler.jit_function import JitFunction

    traces = []
    trace = JitFunction._trace
    monkeypatch.setattr(JitFunction, "_trace",
                        lambda self, *a, **k: traces.append(1) or trace(self, *a, **k))
    before = dict(os.environ)
    _mm(recorded)  # cold: built by a worker
    for m in (16, 48, 200):  # warm, other shapes: the same compiled function
        _mm(recorded, m=m)
    assert traces == [] and dict(os.environ) == before
    assert recorded.loads == 1 and hip.launch_count() == 4
    launches = hip.launches()
    assert len({r["module_id"] for r in launches}) == 1  # loaded once
    assert [r["grid"][0] for r in launches] == [2 * 2, 1 * 2, 3 * 2, 13 * 2]
    assert all(r["stream"] == recorded.runtime.stream_handle for r in launches)
    assert all(len(r["kernarg"]) == launches[0]["kernarg"].__len__() > 0 for r in launches)


def test_the_arch_comes_from_the_device_not_the_environment(hip, monkeypatch) -> None:
    """The runtime says gfx942 while this process's FlyDSL setting says gfx950: the worker
    builds for gfx942 (the code object HIP is handed names it)."""
    import tempfile
    from pathlib import Path

    from inductor_flydsl.emulator.code_object import metadata

    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx950")
    with kernel_runner.use_runtime(FakeHipRuntime(hip, arch="gfx942")) as runner:
        _mm(runner)
    (launch,) = hip.launches()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.hsaco"
        path.write_bytes(launch["image"])
        assert "gfx942" in str(metadata(path)["amdhsa.target"])


def test_launch_errors_raise_and_the_next_launch_works(recorded, hip) -> None:
    _mm(recorded)
    hip.fail_next(launches=1)
    with strict_launches(), \
            pytest.raises(kernel_runner.FlydslLaunchError, match="hipErrorLaunchFailure"):
        _mm(recorded)
    _mm(recorded)
    assert hip.launch_count() == 3  # the failed one reached HIP too


def test_a_failed_module_load_raises_and_is_not_cached(recorded, hip) -> None:
    hip.fail_next(loads=1)
    with strict_launches(), \
            pytest.raises(kernel_runner.FlydslLaunchError, match="load or launch"):
        _mm(recorded)
    assert recorded.cached() == 0
    _mm(recorded)  # loads again
    assert recorded.cached() == 1 and recorded.loads == 1


def test_a_kernel_is_loaded_on_each_device_it_runs_on(recorded, hip) -> None:
    hip.set_device_count(2)
    recorded.runtime.device = 1
    _mm(recorded)
    _mm(recorded)
    recorded.runtime.device = 0
    _mm(recorded)
    launches = hip.launches()
    assert [(r["module_device"], r["device"]) for r in launches] == [(1, 1), (1, 1), (0, 0)]
    assert launches[0]["module_id"] == launches[1]["module_id"] != launches[2]["module_id"]
    assert recorded.loads == 2


def test_compiled_kernels_are_bounded(hip) -> None:
    other = gemm.GemmConfig(tile_m=32, tile_n=32, tile_k=128, waves_m=1, waves_n=1,
                            stages=2, group_m=1)
    with kernel_runner.use_runtime(FakeHipRuntime(hip), max_kernels=1) as runner:
        _mm(runner)
        _mm(runner, other)
        _mm(runner)  # evicted: loaded again
        assert runner.cached() == 1 and runner.evictions == 2 and runner.loads == 3


def test_a_failed_build_raises_with_its_reason(recorded, monkeypatch) -> None:
    from inductor_flydsl.flydsl_backend.builds import prebuild as pb

    def broken(variant):
        raise pb.FlydslBuildError("build failed: injected")

    monkeypatch.setattr(pb, "build_for_launch", broken)
    with strict_launches(), \
            pytest.raises(kernel_runner.FlydslLaunchError, match="not built: build failed"):
        _mm(recorded, gemm.GemmConfig(tile_m=64, tile_n=32, tile_k=128, waves_m=1,
                                      waves_n=1, stages=2, group_m=1))


# ---- the split-K workspace ------------------------------------------------------------
def test_split_k_workspace_is_counted() -> None:
    from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT, prune_for_shape

    big = gemm.GemmConfig(tile_m=16, tile_n=64, tile_k=64, waves_m=1, waves_n=2, stages=2,
                          group_m=1, split_k=8)
    assert "int32 offsets" in gemm.workspace_reason(big, 4096, 128256)  # 16.8 GB
    assert "bytes" in gemm.workspace_reason(big, 1024, 16384)
    assert gemm.workspace_reason(big, 16, 4096) is None
    assert all(c.split_k == 1 for c in prune_for_shape(list(DEFAULT), 4096, 128256, 4096))
    assert any(c.split_k > 1 for c in prune_for_shape(list(DEFAULT), 16, 4096, 8192))
    with pytest.raises(ValueError, match="int32 offsets"):
        gemm.split_k_workspace(big, torch.empty(4096, 128256, dtype=torch.bfloat16,
                                                device="meta"))


def test_dynamic_m_is_offered_no_split_k() -> None:
    import dataclasses

    from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs
    from inductor_flydsl.problems.problem import synthetic_problem

    static = synthetic_problem("mm", 16, 4096, 8192, dtype="bfloat16", layout="nt")
    dynamic = dataclasses.replace(static, symbolic=((0,), (), (0,)))
    assert any(c.split_k > 1 for c in candidate_configs(static, "gfx950"))
    assert all(c.split_k == 1 for c in candidate_configs(dynamic, "gfx950"))


def test_a_launch_past_the_workspace_cap_is_computed_by_aten(recorded, hip,
                                                              monkeypatch) -> None:
    monkeypatch.setattr(gemm, "MAX_WORKSPACE_BYTES", 1024)
    a, b, bias, out = make_operands("addmm", "bf16", "nt", 24, 64, 512)
    OPS.addmm_out(bias, a, b, out=out, config=_config_json(SPLIT), alpha=1.0, beta=1.0)
    validate_output("addmm", (bias, a, b), out, 1.0, 1.0)
    assert hip.launch_count() == 0


# ---- warm launches bound once; failures outside benchmarking; graph captures (issue 42) --
def test_warm_calls_take_the_bound_launch_and_stay_correct(emulated) -> None:
    """The first call of a signature binds it; later calls with other tensors of the same
    shapes (new pointers) and the 2-D bias row of addmm go through the bound launch, and
    every result is right."""
    config = _config_json(SMALL)
    for op in ("mm", "addmm"):
        for _ in range(3):
            a, b, bias, out = make_operands(op, "bf16", "nt", 40, 64, 256)
            if op == "mm":
                OPS.mm_out(a, b, out=out, config=config)
                validate_output("mm", (a, b), out, 1.0, 0.0)
            else:
                OPS.addmm_out(bias.reshape(1, -1), a, b, out=out, config=config, beta=0.5)
                validate_output("addmm", (bias, a, b), out, 1.0, 0.5)
    bound = [b for b in emulated._bound.values() if b is not None]
    assert len(bound) == 2 and emulated.loads == 2  # one per op; 4 calls bound
    assert emulated.runtime.emulation.runs == 6


def test_fused_epilogue_calls_are_bound_and_keep_the_alignment_check(emulated) -> None:
    """Issue 50: generated code fills a fused call's unused operand slots with another
    tensor (here ``a``, as Inductor does); the sources are the epilogue's own operands, so
    the call is bound like a plain one. A warm call whose operand is less aligned than at
    bind time leaves the bound launch: the full path's check refuses it and the call is
    computed with the reference, right."""
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    text = EpilogueSpec.from_json({"operands": [{"kind": "col", "dtype": "bfloat16"}],
                                   "steps": [["add", "acc", "x0"], ["relu", "s0"]],
                                   "out_dtype": "bfloat16"}).text()
    spec = EpilogueSpec.from_json(text)
    config = _config_json(SMALL)
    runs = emulated.runtime.emulation.runs
    for _ in range(3):
        a, b, _, _ = make_operands("mm", "bf16", "nt", 40, 64, 256)
        (x0,) = random_epilogue_operands(gemm, spec, 40, 64)
        out = torch.full((40, 64), float("nan"), dtype=torch.bfloat16)
        OPS.gemm_epilogue_out(a, b, x0, a, a, a, out=out, config=config, epilogue=text)
        validate_epilogue_output(text, (a, b, x0), out)
    bound = [k for k, v in emulated._bound.items() if k[0] == "gemm_epilogue" and v]
    assert len(bound) == 1 and emulated.runtime.emulation.runs == runs + 3
    # x0 one element past an aligned start: same shape, stride and dtype (the bound key)
    wide = torch.randn(65, dtype=torch.bfloat16)
    shifted = wide[1:]
    assert shifted.data_ptr() % 8
    with pytest.warns(TuningDBWarning, match="not 8-byte aligned"):
        OPS.gemm_epilogue_out(a, b, shifted, a, a, a, out=out, config=config, epilogue=text)
    validate_epilogue_output(text, (a, b, shifted), out)
    assert emulated.runtime.emulation.runs == runs + 3  # never launched misaligned


def test_split_k_keeps_the_full_path(emulated) -> None:
    a, b, _, out = make_operands("mm", "bf16", "nt", 24, 64, 512)
    for _ in range(2):
        OPS.mm_out(a, b, out=out, config=_config_json(SPLIT))
        validate_output("mm", (a, b), out, 1.0, 0.0)
    assert list(emulated._bound.values()) == [None]  # its workspace is new every call


def test_a_failure_in_the_forward_computes_with_aten(recorded, hip) -> None:
    """Outside Inductor's benchmark, a launch that fails is computed with ATen, with one
    warning (naming the kernel and the HIP error) per kernel, and never raises."""
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    config = gemm.GemmConfig(tile_m=16, tile_n=64, tile_k=128, waves_m=1, waves_n=1,
                             stages=2, group_m=1)
    a, b, _, out = make_operands("mm", "bf16", "nt", 32, 64, 256)
    hip.fail_next(launches=1)
    with pytest.warns(TuningDBWarning, match="computed with ATen.*hipErrorLaunchFailure"):
        OPS.mm_out(a, b, out=out, config=_config_json(config))
    torch.testing.assert_close(out, a @ b)
    hip.fail_next(loads=1)
    other = gemm.GemmConfig(tile_m=32, tile_n=64, tile_k=128, waves_m=1, waves_n=1,
                            stages=2, group_m=1)
    with pytest.warns(TuningDBWarning, match="computed with ATen"):
        OPS.mm_out(a, b, out=out, config=_config_json(other))
    torch.testing.assert_close(out, a @ b)


def test_kernels_launched_under_a_capture_are_never_unloaded(hip) -> None:
    """A graph captured with a kernel keeps its raw handle: the kernel is pinned when it
    is launched while its stream captures, and the LRU then evicts only others. Inside the
    capture nothing loads or unloads a module, allocates with HIP or synchronizes; a
    kernel not loaded yet is not loaded there (the op computes that call with ATen)."""
    other = gemm.GemmConfig(tile_m=32, tile_n=32, tile_k=128, waves_m=1, waves_n=1,
                            stages=2, group_m=1)
    third = gemm.GemmConfig(tile_m=16, tile_n=64, tile_k=128, waves_m=1, waves_n=1,
                            stages=2, group_m=1)
    with kernel_runner.use_runtime(FakeHipRuntime(hip), max_kernels=1) as runner:
        _mm(runner)  # loaded before the capture, as the warm-up run loads it
        unloads, during = hip.module_unloads(), hip.calls_during_capture()
        with hip.capturing():
            _mm(runner)  # captured: pinned (the bound launch)
            _mm(runner, m=48)  # captured: pinned (the full path, another signature)
            with pytest.warns(UserWarning, match="capturing a graph"):
                _mm(runner, other)  # not loaded: no load inside the capture, ATen
        assert hip.calls_during_capture() == during
        assert runner.pinned() == 1
        _mm(runner, other)  # after the capture: loaded, LRU-managed
        _mm(runner, third)  # evicts `other`, never the pinned kernel
        _mm(runner, other)
        assert runner.evictions == 2 and runner.cached() == 2
        launches = hip.launch_count()
        _mm(runner)  # the captured kernel still launches: its module stays loaded
        assert hip.launch_count() == launches + 1
        assert hip.module_unloads() - unloads <= 2  # only the evicted ones


def test_an_autotunes_benchmark_captures_leave_no_pin(hip) -> None:
    """Issue 50: Inductor's graph timing captures each candidate once into a graph it
    drops when the benchmark returns; a kernel launched only there is pinned until then
    (``ops.strict_launches``, which Inductor's benchmark of a FlyDSL candidate runs
    under), then goes back under the LRU bound. A kernel cudagraph trees capture (outside
    a benchmark) stays pinned, also when a benchmark captured it first."""
    from inductor_flydsl.flydsl_backend.offer.configs import default_configs

    candidates = [c for c in default_configs("gfx950") if c.split_k == 1][:CANDIDATES]
    assert len(candidates) == CANDIDATES
    with kernel_runner.use_runtime(FakeHipRuntime(hip), max_kernels=3) as runner:
        for config in candidates:  # benchmark_gpu_with_cuda_graph: warm-up, then capture
            with strict_launches():
                _mm(runner, config)
                with hip.capturing():
                    _mm(runner, config)
                assert runner.pinned() == 1  # while its graph lives
        assert runner.pinned() == 0 and runner.cached() == 3  # the bound holds
        assert runner.evictions == CANDIDATES - 3
        kept = candidates[-1]  # loaded (the LRU's newest)
        with strict_launches(), hip.capturing():
            _mm(runner, kept)
        with hip.capturing():  # cudagraph trees: the graph lives on
            _mm(runner, kept)
        assert runner.pinned() == 1
        with strict_launches(), hip.capturing():  # a later benchmark leaves it pinned
            _mm(runner, kept)
        assert runner.pinned() == 1


CANDIDATES = 12  # each a build in a worker (~1 s): 12 shows the bound as 50 would
