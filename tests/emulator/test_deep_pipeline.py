"""Pipelines deeper than double buffering (gfx950 direct-to-LDS path) in the emulator:
3 and 4 LDS stages, every part of the K loop (prologue, the main loop unrolled by
``stages``, its leftover steps, the drain), with split-K; gfx942 refuses them."""

import pytest

from inductor_flydsl.emulator.gemm import emulate_gemm
from inductor_flydsl.flydsl_backend.builds import toolchain
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.flydsl_backend.offer.resources import estimate
from inductor_flydsl.template_loader import load_template

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

gemm = load_template("gemm_dense")


@pytest.mark.parametrize("config,layout,op", [
    (gemm.GemmConfig(32, 64, 64, 1, 2, 3, 1), "nt", "addmm"),
    (gemm.GemmConfig(64, 64, 32, 2, 2, 4, 4), "tn", "mm"),
    (gemm.GemmConfig(16, 32, 128, 1, 1, 3, 1, 2), "nn", "mm"),
])
def test_deep_pipeline_is_correct_for_every_k_step_count(config, layout, op, tmp_path):
    result = compile_and_emulate("gemm_dense", config, arch="gfx950", dtype="bf16",
                                 layout=layout, op=op, dump_dir=tmp_path)
    assert result.ok, result.error
    assert result.emulation["ok"], result.emulation["error"]
    isa = open(result.isa_path).read()
    # K steps per split from the shortest the pipeline takes to two full unrolled trips
    # plus every leftover count
    m, n = config.tile_m + (8 if layout[0] == "t" else 5), config.tile_n + 8  # tails
    for steps in range(config.stages - 1, 3 * config.stages):
        k = config.tile_k * steps * config.split_k
        run = emulate_gemm(isa, gemm, config, op=op, dtype="bf16", layout=layout,
                           m=m, n=n, k=k, seed=steps)
        assert run.ok, (steps, run.error)


def test_gfx942_refuses_more_than_two_stages():
    config = gemm.GemmConfig(64, 64, 32, 2, 2, 3, 4)
    assert "gfx942" in gemm.stages_reason(config, "gfx942")
    assert gemm.stages_reason(config, "gfx950") is None
    _, _, fits, reasons = estimate(config, "bf16", "gfx942")
    assert not fits and any("stages=3" in r for r in reasons)
    with pytest.raises(ValueError, match="at most 2 stages"):
        gemm.make_launcher(config, dtype="bf16", layout="nt", op="mm", arch="gfx942")
