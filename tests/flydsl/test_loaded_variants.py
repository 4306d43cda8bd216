"""The FlyDSL variants of a compiled graph, read from its generated code and built as one
batch (inductor_flydsl/flydsl_backend/run/loaded_variants.py), so a graph loaded from
Inductor's FX-graph cache finds them built at its first call.

The generated code is Inductor's own (tests/flydsl/data/inductor_wrapper_mm_out*.py.txt,
written by torch 2.13 for a graph whose GEMM the DB gave to a FlyDSL candidate, calling
the op directly as generated code does now, and through torch.ops as it did before). Today's
choices write the config without its variant, so it is left to its first launch; with a
self-describing config (the ``"variant"`` member) the builds run in the build server's
workers, as one run, and the launches through the plugin's op (FlyDSL's runtime over the
stand-in HIP library, tests/fake_hip) then build nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.flydsl_backend.run import kernel_runner, loaded_variants
from inductor_flydsl.problems.keys import canonical_json

WRAPPER = Path(__file__).parent / "data" / "inductor_wrapper_mm_out.py.txt"
WRAPPER_TORCH_OPS = WRAPPER.with_name("inductor_wrapper_mm_out_torch_ops.py.txt")  # older
CONFIG = {"group_m": 1, "split_k": 1, "stages": 2, "tile_k": 128, "tile_m": 16, "tile_n": 32,
          "waves_m": 1, "waves_n": 1}
llvm22 = pytest.mark.skipif(
    not any(os.path.exists(os.path.join(d, "llvm-readelf-22")) for d in
            os.environ.get("PATH", "").split(os.pathsep)),
    reason="llvm-22 (llvm-readelf-22, llvm-objdump-22) reads the code objects")


def _self_describing(layout: str, op: str = "mm") -> str:
    return canonical_json({**CONFIG, "variant": {"template": "gemm_dense", "dtype": "bf16",
                                                 "layout": layout, "op": op}})


@pytest.mark.parametrize("wrapper", [WRAPPER, WRAPPER_TORCH_OPS], ids=["direct", "torch-ops"])
def test_calls_are_read_from_inductors_code_and_todays_configs_wait_for_their_launch(
        wrapper: Path) -> None:
    source = wrapper.read_text()
    (call,) = loaded_variants.flydsl_calls(source)
    assert call.op == "mm_out" and call.epilogue == ""
    assert call.config == canonical_json(CONFIG)
    assert loaded_variants.job_for(call, "gfx950") is None  # no variant in it
    outcome = loaded_variants.start_loaded_builds(source, "gfx950")
    assert (outcome.calls, outcome.jobs, outcome.unresolved, outcome.builds) == (1, 0, 1, [])
    assert loaded_variants.flydsl_calls("def call(args):\n    return args\n") == []


def test_generated_code_reaches_the_ops_through_the_plugins_own_module() -> None:
    """``direct.py`` holds the ops' implementations and nothing else, under the name this
    reader looks for; nothing of the plugin's is set on torch."""
    import torch

    from inductor_flydsl.flydsl_backend import direct
    from inductor_flydsl.flydsl_backend.run import ops

    assert loaded_variants.DIRECT_ALIAS == direct.ALIAS
    assert direct.IMPORT.endswith(f" as {direct.ALIAS}")
    assert sorted(direct.__all__) == sorted(f"{op}_out" for op in ops.SCHEMAS)
    for op, (_, impl) in ops.SCHEMAS.items():
        assert getattr(direct, f"{op}_out") is impl is ops.direct_call(op)
        assert direct.call_name(op) == f"inductor_flydsl_direct.{op}_out"
    assert not [name for name in dir(torch) if "flydsl" in name.lower()]


def test_a_self_describing_config_names_the_whole_variant() -> None:
    source = WRAPPER.read_text().replace(canonical_json(CONFIG), _self_describing("nn"))
    (call,) = loaded_variants.flydsl_calls(source)
    job = loaded_variants.job_for(call, "gfx942")
    assert (job.template, job.arch, job.dtype, job.layout, job.op, job.epilogue) == \
        ("gemm_dense", "gfx942", "bf16", "nn", "mm", "")
    assert job.config_json == CONFIG
    bad = source.replace('"tile_m":16', '"tile_m":17')
    outcome = loaded_variants.start_loaded_builds(bad, "gfx950")
    assert outcome.jobs == 0 and len(outcome.errors) == 1 and "mm_out" in outcome.errors[0]


@llvm22
def test_loaded_graphs_variants_are_built_as_one_batch_before_their_first_call(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two loaded graphs (module objects whose files hold Inductor's code, one GEMM each, a
    self-describing config each): one build run of both variants, then each graph's first
    launch finds its kernel built."""
    import types

    from inductor_flydsl.emulator.gemm import make_operands
    from tests.fake_hip.harness import FakeHipRuntime, fake_hip

    monkeypatch.setenv(prebuild.ENV_BUILD_JOBS, "2")
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(tmp_path / "flydsl"))
    hip = fake_hip(tmp_path / "fake-hip")
    modules = []
    for layout in ("nn", "nt"):
        path = tmp_path / f"graph_{layout}.py"
        path.write_text(WRAPPER.read_text().replace(canonical_json(CONFIG),
                                                    _self_describing(layout)))
        module = types.ModuleType(f"graph_{layout}")
        module.__file__ = str(path)
        modules.append(module)
    watch = loaded_variants.ModuleWatch()
    prebuild.shutdown_pool()
    prebuild.forget_builds()
    try:
        outcome = watch.start_builds(modules, "gfx950")
        assert outcome is not None
        assert (outcome.calls, outcome.jobs, outcome.unresolved) == (2, 2, 0)
        assert watch.start_builds(modules, "gfx950") is None  # each module looked at once
        results = [build.wait() for build in outcome.builds]
        assert all(r is not None and r.ok and r.artifact for r in results), results
        (run,) = prebuild.runs
        assert run.jobs == 2  # one batch
        with kernel_runner.use_runtime(FakeHipRuntime(hip)) as runner:
            for layout in ("nn", "nt"):  # each graph's first call
                a, b, _, out = make_operands("mm", "bf16", layout, 64, 256, 512)
                _launch_mm(a, b, out)
            assert runner.loads == 2 and hip.launch_count() == 2
        assert len(prebuild.runs) == 1  # the launches built nothing more
    finally:
        prebuild.shutdown_pool()
        prebuild.forget_builds()


def _launch_mm(a, b, out) -> None:
    import torch

    torch.ops.inductor_flydsl.mm_out(a, b, out=out, config=canonical_json(CONFIG))
