"""The MX (MXFP8/MXFP4) GEMM template's real compiled kernels, cross-compiled for gfx950
and run in the ISA emulator against a float64 dequantize-then-matmul reference: every
DEFAULT config, format pairings (FP8 x FP8, FP4 x FP4, mixed), M/N tails, a bias, fp16
output; the ISA uses the scaled MFMA, with no spill and no scratch."""

from __future__ import annotations

import pytest

from inductor_flydsl.emulator.mx import emulate_mx, make_mx_operands
from inductor_flydsl.flydsl_backend.builds import catalog, catalog_summary, toolchain
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_MX, mx_default_configs
from inductor_flydsl.numerics.mx import check_mx
from inductor_flydsl.template_loader import load_template

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

mx = load_template("gemm_mx")
SCALED_MFMA = "v_mfma_scale_f32_16x16x128_f8f6f4"
# tile_k 256: two MFMAs per block and K step, so the scale bytes are picked with op_sel
TWO_PER_STEP = mx.MxConfig(tile_m=32, tile_n=64, tile_k=256, waves_m=1, waves_n=2,
                           stages=3, group_m=1)


@pytest.mark.parametrize(("dtype", "op"), [
    ("e4m3xe4m3_bf16", "mm"),
    ("e2m1xe2m1_fp16", "addmm"),
    ("e4m3xe2m1_bf16", "addmm"),
    ("e2m1xe5m2_bf16", "mm"),
    ("e5m2xe4m3_fp16", "mm"),
])
def test_format_pairings_are_correct_in_the_emulator(tmp_path, dtype: str, op: str) -> None:
    result = compile_and_emulate("gemm_mx", TWO_PER_STEP, arch="gfx950", dtype=dtype,
                                 layout="nt", op=op, dump_dir=tmp_path)
    assert result.ok, result.error
    assert set(result.mfma_counts) == {SCALED_MFMA}
    assert result.vgpr_spills == 0 and result.scratch_bytes == 0
    emulation = result.emulation
    assert emulation["ok"], emulation
    # the tail problem: one full tile plus a partial one in M and N, stages + 2 K steps
    assert tuple(emulation["shape"]) == (37, 72, 256 * 5)
    isa = open(result.isa_path).read()
    assert "op_sel:[1,1,0]" in isa  # the second MFMA of a step reads scale byte 1


def test_a_wrong_scale_pairing_is_caught(tmp_path) -> None:
    """The comparison would see a kernel that used another K block's or row's scale:
    the kernel's (correct) output fails against the reference once the scale blocks are
    rotated."""
    result = compile_and_emulate("gemm_mx", TWO_PER_STEP, arch="gfx950",
                                 dtype="e4m3xe4m3_bf16", layout="nt", op="mm",
                                 dump_dir=tmp_path)
    isa = open(result.isa_path).read()
    m, n, k = 20, 64, 256 * 3
    run = emulate_mx(isa, mx, TWO_PER_STEP, dtype="e4m3xe4m3_bf16", op="mm", m=m, n=n, k=k,
                     seed=3)
    assert run.ok, run.error
    from inductor_flydsl.emulator.gemm import run_kernel

    a, b, scale_a, scale_b, bias, out = make_mx_operands("e4m3xe4m3_bf16", "mm", m, n, k,
                                                         seed=3)
    args = mx.launcher_args(a, b, scale_a, scale_b, bias, out)
    _, bindings = run_kernel(isa, *mx.kernel_launch(TWO_PER_STEP, args))
    got = bindings.read_back(out)
    assert check_mx(got, a, b.t(), scale_a, scale_b).ok
    rotated = scale_a.view(scale_a.dtype).roll(1, dims=1)
    assert not check_mx(got, a, b.t(), rotated, scale_b).ok
    assert not check_mx(got, a, b.t(), scale_a, scale_b.roll(1, dims=0)).ok


@pytest.mark.full_catalog  # the shipped catalog records this run; CI checks it is current and
# re-runs a covering sample (tests/test_shipped_catalog.py)
@pytest.mark.slow
def test_every_default_config_is_correct_in_the_emulator(tmp_path) -> None:
    """compile-check's MX job set: every DEFAULT config for FP8 x FP8 and for FP4 x FP4,
    the other pairings and ops once; gfx942 jobs rejected for want of a scaled MFMA."""
    jobs = catalog.build_jobs(["gfx950", "gfx942"], template="gemm_mx",
                              dtypes=["e4m3xe4m3_bf16", "e2m1xe2m1_bf16"])
    run = catalog.run_catalog(jobs, workers=2, db_path=tmp_path / "c.db", progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    summary = catalog_summary.summarize(run)
    assert summary["clean"], summary
    gfx950 = summary["archs"]["gfx950"]
    expected = len(mx_default_configs("e4m3xe4m3_bf16")) + len(DEFAULT_MX)
    assert gfx950["ok"] == gfx950["emulated_ok"] == expected
    assert summary["archs"]["gfx942"]["rejected"] == expected
    for item in run.results:
        if item.job.arch == "gfx942":
            assert "no scaled MFMA" in item.job.rejected
            continue
        r = item.result
        assert set(r.mfma_counts) == {SCALED_MFMA} and not item.spilled
        assert r.scratch_bytes == 0 and r.emulation["ok"]
