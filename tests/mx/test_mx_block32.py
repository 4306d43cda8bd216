"""The MX template's ``nt_b32`` layout (vLLM's MXFP8 linear,
``rocm_mxfp8_block32_gemm``): B's E8M0 scales per 32x32 block, ``scale_b`` of shape
(ceil(N / 32), K / 32), weight row ``n`` using scale row ``n // 32``.

Real kernels cross-compiled for gfx950 and run in the ISA emulator against the float64
reference, on problems with an M tail and an N tail that is not a multiple of 32 (the
last block row partial), with every block row's scales differing from its neighbours'
in every entry (a kernel reading a neighbouring block's row fails); the host-side shape
checks; and the two layouts really differ (the block kernel reads row ``n // 32``)."""

from __future__ import annotations

import pytest
import torch

from inductor_flydsl.emulator.mx import emulate_mx, make_mx_operands, mx_tail_shape
from inductor_flydsl.flydsl_backend.builds import catalog, toolchain
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_MX, mx_default_configs
from inductor_flydsl.numerics.mx import check_mx, expand_block_scales, mx_reference
from inductor_flydsl.template_loader import load_template

mx = load_template("gemm_mx")
DTYPE = "e4m3xe4m3_bf16"
LAYOUT = "nt_b32"
SCALED_MFMA = "v_mfma_scale_f32_16x16x128_f8f6f4"
CONFIGS = mx_default_configs(DTYPE)
# a covering fast sample of the DEFAULT list: one and two MFMAs per step (tile_k 128,
# 256), 2 and 3 stages, one and two waves along N, group_m 1 and 8, 16- to 128-row tiles
FAST = [c for c in CONFIGS if (c.tile_m, c.tile_n, c.tile_k, c.stages)
        in {(16, 64, 128, 3), (64, 128, 256, 2)}]
# tile_k 256: two MFMAs per block and K step (op_sel picks the scale byte); two waves
# along N, so the waves' 32-row blocks start at different scale rows
TWO_PER_STEP = mx.MxConfig(tile_m=32, tile_n=64, tile_k=256, waves_m=1, waves_n=2,
                           stages=3, group_m=1)


def _needs_compiler() -> None:
    pytest.importorskip("flydsl")
    if toolchain.find_ld_lld() is None:
        pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}")


def _check_compiled(result, config) -> None:
    assert result.ok, result.error
    assert set(result.mfma_counts) == {SCALED_MFMA}
    assert result.vgpr_spills == 0 and result.sgpr_spills == 0
    assert result.scratch_bytes == 0
    emulation = result.emulation
    assert emulation["ok"], emulation
    assert emulation["layout"] == LAYOUT
    m, n, k = tuple(emulation["shape"])
    assert (m, n, k) == mx_tail_shape(config)
    assert n % 32 and n % 4 == 0 and n > config.tile_n  # a partial last block row, N tail
    assert m > config.tile_m or config.tile_m <= 5  # an M tail


# ---------------------------------------------------------------------------
# Host side (no compile)
# ---------------------------------------------------------------------------


def test_the_layout_is_offered_for_e4m3_with_every_default_config() -> None:
    assert LAYOUT in mx.LAYOUTS
    assert set(mx.LAYOUT_DTYPES[LAYOUT]) == {"e4m3xe4m3_bf16", "e4m3xe4m3_fp16"}
    mx.divisibility_requirements(CONFIGS[0], "mm", LAYOUT)  # accepted
    with pytest.raises(ValueError, match="serves dtypes"):
        mx.make_launcher(CONFIGS[0], dtype="e2m1xe2m1_bf16", layout=LAYOUT, op="mm",
                         arch="gfx950")
    jobs = catalog.build_jobs(["gfx950"], template="gemm_mx")
    block = [j for j in jobs if j.layout == LAYOUT]
    main = {j.config for j in block if (j.dtype, j.op) == (DTYPE, "mm")}
    assert main == {tuple(c.to_json().items()) for c in CONFIGS}
    assert {(j.dtype, j.op) for j in block} == {(d, o) for d in mx.LAYOUT_DTYPES[LAYOUT]
                                                for o in mx.OPS}
    with pytest.raises(ValueError, match="no variant"):
        catalog.build_jobs(["gfx950"], template="gemm_mx", dtypes=["e2m1xe2m1_bf16"],
                           layouts=[LAYOUT])


def test_launcher_args_check_the_block_scale_shape() -> None:
    m, n, k = 8, 72, 256
    a, b, scale_a, scale_b, _, out = make_mx_operands(DTYPE, "mm", m, n, k, layout=LAYOUT)
    assert tuple(scale_b.shape) == (3, k // 32)  # ceil(72 / 32) block rows
    args = mx.launcher_args(a, b, scale_a, scale_b, None, out, layout=LAYOUT)
    assert args[5].shape == (3, k // 32) and args[13] == k // 32  # SB and ld_sb
    per_row = expand_block_scales(scale_b.view(torch.uint8), n)
    assert tuple(per_row.shape) == (n, k // 32)
    # per-row scales given for the block layout: refused, not read as blocks
    with pytest.raises(ValueError, match=r"scale_b must be \(3, 8\).*32x32 block"):
        mx.launcher_args(a, b, scale_a, per_row, None, out, layout=LAYOUT)
    with pytest.raises(ValueError, match="scale_b"):  # too few K blocks
        mx.launcher_args(a, b, scale_a, scale_b[:, :4], None, out, layout=LAYOUT)
    with pytest.raises(ValueError, match="scale_b"):  # block scales for the per-row layout
        mx.launcher_args(a, b, scale_a, scale_b, None, out, layout="nt")
    with pytest.raises(ValueError, match="layout"):
        mx.launcher_args(a, b, scale_a, scale_b, None, out, layout="nt_b16")


def test_launch_runs_the_block_variant() -> None:
    a, b, scale_a, scale_b, _, out = make_mx_operands(DTYPE, "mm", 8, 40, 128, layout=LAYOUT)

    class Runner:
        def arch(self, tensor):
            return "gfx950"

        def stream(self, tensor, stream):
            return stream

        def run(self, variant, args, stream, tensor):
            self.variant, self.args = variant, args

    runner = Runner()
    mx.launch(a, b, scale_a, scale_b, None, out, CONFIGS[0], runner=runner, layout=LAYOUT)
    assert (runner.variant.layout, runner.variant.dtype, runner.variant.op) == (
        LAYOUT, DTYPE, "mm")
    assert runner.args[5].shape == (2, 4)
    with pytest.raises(ValueError, match="32x32 block"):
        mx.launch(a, b, scale_a, expand_block_scales(scale_b, 40), None, out, CONFIGS[0],
                  runner=runner, layout=LAYOUT)


def test_the_reference_expands_block_scales_to_rows() -> None:
    m, n, k = 5, 72, 128
    a, b, scale_a, scale_b, _, _ = make_mx_operands(DTYPE, "mm", m, n, k, seed=1,
                                                    layout=LAYOUT)
    raw = scale_b.view(torch.uint8)
    # every block row differs from its neighbours in every entry
    assert bool((raw[1:] != raw[:-1]).all())
    expanded = raw.repeat_interleave(32, 0)[:n]
    block = mx_reference(a, b.t(), scale_a, scale_b, layout=LAYOUT)
    assert torch.equal(block, mx_reference(a, b.t(), scale_a, expanded))
    # the first block rows read as per-row scales: another product
    assert not torch.equal(block, mx_reference(a, b.t(), scale_a, raw[:3].repeat(24, 1)))


# ---------------------------------------------------------------------------
# Compiled kernels in the emulator
# ---------------------------------------------------------------------------


def _compiled_isa(tmp_path, config, layout: str) -> str:
    result = compile_and_emulate("gemm_mx", config, arch="gfx950", dtype=DTYPE,
                                 layout=layout, op="mm", dump_dir=tmp_path / layout)
    assert result.ok and result.emulation["ok"], (result.error, result.emulation)
    return open(result.isa_path).read()


def test_the_layouts_really_differ(tmp_path) -> None:
    """The block kernel reads scale row n // 32: given block scales it agrees bit for bit
    with the per-row kernel given the same scales expanded to rows; given per-row scales
    (bypassing the shape check) it reads their first rows as blocks, which the per-row
    reference rejects; and a kernel reading a neighbouring block's row would fail."""
    _needs_compiler()
    from inductor_flydsl.emulator.gemm import run_kernel

    isa = {layout: _compiled_isa(tmp_path, TWO_PER_STEP, layout) for layout in ("nt", LAYOUT)}
    m, n, k = 20, 104, 256 * 3  # N: 3 full block rows and a partial one, 2 column tiles
    a, b, scale_a, scale_b, _, out = make_mx_operands(DTYPE, "mm", m, n, k, seed=5,
                                                      layout=LAYOUT)
    expanded = expand_block_scales(scale_b.view(torch.uint8), n).contiguous()

    def run(layout: str, sb, args_layout: str):
        args = mx.launcher_args(a, b, scale_a, sb, None, out, layout=args_layout)
        _, bindings = run_kernel(isa[layout], *mx.kernel_launch(TWO_PER_STEP, args))
        return bindings.read_back(out)

    block = run(LAYOUT, scale_b, LAYOUT)
    assert check_mx(block, a, b.t(), scale_a, scale_b, layout=LAYOUT).ok
    assert check_mx(block, a, b.t(), scale_a, expanded).ok
    assert torch.equal(block, run("nt", expanded, "nt"))
    # a neighbouring block row's scales (rolled by one block row) would be caught
    assert not check_mx(block, a, b.t(), scale_a, scale_b.roll(1, dims=0), layout=LAYOUT).ok
    # per-row scales handed to the block kernel: it reads rows 0..3 as the blocks' scales
    per_row = make_mx_operands(DTYPE, "mm", m, n, k, seed=6)[3]
    misread = run(LAYOUT, per_row, "nt")
    assert not check_mx(misread, a, b.t(), scale_a, per_row).ok
    assert check_mx(misread, a, b.t(), scale_a, per_row[:4], layout=LAYOUT).ok


def test_the_main_loop_is_the_per_row_layouts(tmp_path) -> None:
    """The block row is computed once per lane, outside the main loop: the loop's
    instructions are those of the per-row layout."""
    _needs_compiler()
    from inductor_flydsl.flydsl_backend.builds.cross_compile import compile_config

    config = FAST[0]
    loops = {}
    for layout in ("nt", LAYOUT):
        result = compile_config("gemm_mx", config, arch="gfx950", dtype=DTYPE, layout=layout,
                                op="mm")
        assert result.ok, result.error
        loops[layout] = result.loop_analysis
    assert loops[LAYOUT]["main_loop"]
    assert loops[LAYOUT]["mix"] == loops["nt"]["mix"]


@pytest.mark.parametrize("config", FAST,
                         ids=lambda c: f"{c.tile_m}x{c.tile_n}x{c.tile_k}s{c.stages}")
def test_a_covering_sample_is_correct_in_the_emulator(tmp_path, config) -> None:
    _needs_compiler()
    result = compile_and_emulate("gemm_mx", config, arch="gfx950", dtype=DTYPE,
                                 layout=LAYOUT, op="mm", dump_dir=tmp_path)
    _check_compiled(result, config)


@pytest.mark.parametrize(("dtype", "op"), [("e4m3xe4m3_fp16", "addmm")])
def test_fp16_out_and_bias(tmp_path, dtype: str, op: str) -> None:
    _needs_compiler()
    config = TWO_PER_STEP
    result = compile_and_emulate("gemm_mx", config, arch="gfx950", dtype=dtype,
                                 layout=LAYOUT, op=op, dump_dir=tmp_path)
    _check_compiled(result, config)
    # a seed other than the tail problem's, on a problem of its own
    run = emulate_mx(open(result.isa_path).read(), mx, config, dtype=dtype, op=op, m=33,
                     n=132, k=256 * 4, seed=9, layout=LAYOUT)
    assert run.ok, run.error


@pytest.mark.full_catalog  # ~35 s on 2 cores (10 compiles and emulations): the shipped
# catalog records the same run (its 13 nt_b32 rows, all correct in the emulator), which
# tests/test_shipped_catalog.py checks against the current template and samples; the
# covering sample above runs every time
def test_every_default_config_is_correct_in_the_emulator(tmp_path) -> None:
    """Every DEFAULT MX config of e4m3 x e4m3 (bf16 out, mm) in the block layout: compiled
    without spills, correct in the emulator on its tail problem (M tail, N = tile_n + 8:
    an N tail and a partial last block row; every block row's scales differ from its
    neighbours')."""
    _needs_compiler()
    jobs = catalog.build_jobs(["gfx950"], template="gemm_mx", dtypes=[DTYPE],
                              layouts=[LAYOUT], ops=["mm"])
    assert len(jobs) == len(CONFIGS) == len(DEFAULT_MX) - 1
    run = catalog.run_catalog(jobs, workers=2, db_path=tmp_path / "c.db", progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    assert len(run.results) == len(jobs)
    for item in run.results:
        config = mx.MxConfig.from_json(item.job.config_json)
        assert item.status == catalog.OK, item.result.error
        _check_compiled(item.result, config)
