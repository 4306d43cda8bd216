"""Split-K kernels in the emulator: each split's fp32 partial, the bias added once, the
template's own host reduction, tails, both archs; and the refusals around it."""

import pytest

from inductor_flydsl.emulator.gemm import emulate_gemm, tail_shape
from inductor_flydsl.flydsl_backend.builds import toolchain
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.template_loader import load_template

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

gemm = load_template("gemm_dense")


@pytest.mark.parametrize("arch,config,layout,op", [
    ("gfx950", gemm.GemmConfig(16, 32, 256, 1, 1, 2, 1, 4), "nt", "addmm"),
    ("gfx950", gemm.GemmConfig(32, 64, 128, 1, 2, 2, 1, 2), "tn", "mm"),
    ("gfx950", gemm.GemmConfig(16, 64, 128, 1, 2, 2, 1, 2), "nn", "addmm"),
    ("gfx942", gemm.GemmConfig(16, 64, 128, 1, 2, 2, 1, 4), "tt", "addmm"),
])
def test_split_k_variant_is_correct(arch, config, layout, op, tmp_path):
    result = compile_and_emulate("gemm_dense", config, arch=arch, dtype="bf16", layout=layout,
                                 op=op, dump_dir=tmp_path)
    assert result.ok, result.error
    emulation = result.emulation
    assert emulation["ok"], emulation["error"]
    m, n, k = tail_shape(config, op, layout)
    assert tuple(emulation["shape"]) == (m, n, k) and k == config.tile_k * 4 * config.split_k
    tiles = -(-m // config.tile_m) * -(-n // config.tile_n)
    assert emulation["workgroups"] == tiles * config.split_k
    # the same ISA with alpha and beta that a wrong bias or alpha placement would break
    run = emulate_gemm(open(result.isa_path).read(), gemm, config, op=op, dtype="bf16",
                       layout=layout, m=m, n=n, k=k, alpha=0.5, beta=-2.0, seed=3)
    assert run.ok, run.error


def test_split_k_host_reduction_is_what_the_emulation_checks(tmp_path):
    """Dropping a split from the reduction must fail the check: the emulator compares the
    sum of every split's partial, not one slice."""
    config = gemm.GemmConfig(16, 32, 256, 1, 1, 2, 1, 2)
    result = compile_and_emulate("gemm_dense", config, arch="gfx950", dtype="bf16",
                                 layout="nt", op="mm", dump_dir=tmp_path)
    assert result.ok and result.emulation["ok"], result.emulation

    class FirstSplitOnly:
        def __getattr__(self, name):
            return getattr(gemm, name)

        @staticmethod
        def reduce_split_k(workspace, out):
            out.copy_(workspace[0])

    m, n, k = tail_shape(config, "mm", "nt")
    run = emulate_gemm(open(result.isa_path).read(), FirstSplitOnly(), config, op="mm",
                       dtype="bf16", layout="nt", m=m, n=n, k=k)
    assert not run.ok and "outside atol" in run.error


def test_split_k_refuses_bmm_and_batched_workspaces():
    import torch

    config = gemm.GemmConfig(16, 32, 256, 1, 1, 2, 1, 2)
    assert "not bmm" in gemm.split_k_reason(config, "bmm")
    assert gemm.split_k_reason(config, "addmm") is None
    with pytest.raises(ValueError, match="not bmm"):
        gemm.make_launcher(config, dtype="bf16", layout="nt", op="bmm", arch="gfx950")
    with pytest.raises(ValueError, match="2-D out"):
        gemm.split_k_workspace(config, torch.empty(2, 16, 32))
    assert gemm.split_k_workspace(gemm.GemmConfig(), torch.empty(16, 32)) is None
    ws = gemm.split_k_workspace(config, torch.empty(16, 32, dtype=torch.bfloat16))
    assert ws.shape == (2, 16, 32) and ws.dtype == torch.float32


@pytest.mark.parametrize("config,op", [
    (gemm.GemmConfig(16, 64, 64, 1, 2, 6, 1, 8, 1), "addmm"),  # 6 stages, 2 waves
    (gemm.GemmConfig(16, 32, 128, 1, 1, 4, 1, 16, 1), "mm"),  # split-K 16
    (gemm.GemmConfig(32, 32, 64, 2, 2, 4, 1, 16, 1), "mm"),  # 2x2 waves: 4 counters a tile
    (gemm.GemmConfig(32, 64, 128, 2, 2, 4, 1, 2, 1), "addmm"),  # 2x2 waves, 2 slices
])
def test_split_k_reduced_in_the_launch_is_right_in_any_workgroup_order(config, op, tmp_path):
    """The last-arriving wave of each sub-tile adds the partials (an atomic arrival
    counter): correct whichever workgroup arrives last, counters back at 0 after the
    launch (the runner checks), one compile."""
    result = compile_and_emulate("gemm_dense", config, arch="gfx950", dtype="bf16",
                                 layout="nt", op=op, dump_dir=tmp_path)
    assert result.ok, result.error
    assert result.emulation["ok"], result.emulation["error"]
    isa = open(result.isa_path).read()
    assert "global_atomic_add" in isa and "buffer_wbl2 sc1" in isa and "buffer_inv sc1" in isa
    m, n, k = tail_shape(config, op, "nt")
    errors = set()
    for order in ("forward", "reverse", 11):
        run = emulate_gemm(isa, gemm, config, op=op, dtype="bf16", layout="nt", m=m, n=n,
                           k=k, alpha=0.5, beta=-2.0, seed=5, order=order)
        assert run.ok, (order, run.error)
        errors.add(run.max_abs_err)
    # the partials are added in slice order whoever arrives last: the same output (so the
    # same error against the float64 reference) in every order, as deterministic mode needs
    assert len(errors) == 1


def test_reduce_in_launch_is_its_own_config_key_and_needs_split_k():
    import torch

    plain = gemm.GemmConfig(16, 32, 128, 1, 1, 4, 1, 8)
    inside = gemm.GemmConfig(16, 32, 128, 1, 1, 4, 1, 8, 1)
    assert "reduce_in_launch" not in plain.to_json()  # older configs keep their keys
    assert inside.to_json()["reduce_in_launch"] == 1
    assert gemm.GemmConfig.from_json(inside.to_json()) == inside != plain
    with pytest.raises(ValueError, match="needs split_k"):
        gemm.GemmConfig(16, 32, 128, 1, 1, 4, 1, 1, 1).validate()
    with pytest.raises(ValueError, match="more than 4 stages only for tiles"):
        gemm.GemmConfig(128, 128, 64, 2, 2, 5, 8).validate()
    with pytest.raises(ValueError, match="vmcnt"):
        gemm.GemmConfig(64, 64, 256, 1, 1, 7, 1).validate()
    out = torch.empty(16, 32, dtype=torch.bfloat16)
    assert gemm.split_k_counters(plain, out) is None
    counters = gemm.split_k_counters(inside, out, stream=12345)
    assert counters.dtype == torch.int32 and int(counters.count_nonzero()) == 0
    assert gemm.split_k_counters(inside, out, stream=12345) is counters  # kept
    assert "arrival counters" in gemm.counters_reason(inside, 16 * 300, 32 * 300)
