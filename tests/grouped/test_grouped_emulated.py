"""The grouped (MoE) GEMM template's real compiled kernels in the ISA emulator: every
DEFAULT config on gfx950 and gfx942 is correct on ragged groups (empty, one-token, one
group larger than the others together, a single group, N tails), and a kernel given the
wrong group offsets is caught."""

from __future__ import annotations

import dataclasses

import pytest

from inductor_flydsl.emulator.grouped import emulate_grouped, grouped_scenarios
from inductor_flydsl.flydsl_backend.builds import catalog, catalog_summary, toolchain
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_GROUPED
from inductor_flydsl.template_loader import load_template

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

grouped = load_template("gemm_grouped")
SMALL = DEFAULT_GROUPED[0]  # 16x64x128: cheap to emulate


@pytest.mark.full_catalog  # the shipped catalog records this run; CI checks it is current and
# re-runs a covering sample (tests/test_shipped_catalog.py)
@pytest.mark.slow
def test_every_default_grouped_config_is_correct_in_the_emulator(tmp_path) -> None:
    jobs = catalog.build_jobs(["gfx950", "gfx942"], template="gemm_grouped")
    run = catalog.run_catalog(jobs, workers=2, db_path=tmp_path / "c.db", progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    summary = catalog_summary.summarize(run)
    assert summary["template"] == "gemm_grouped" and summary["clean"], summary
    accepted = [i for i in run.results if i.accepted]
    # every DEFAULT config for the main variant on gfx950, plus 3 other variants
    gfx950 = summary["archs"]["gfx950"]
    assert gfx950["ok"] == gfx950["emulated_ok"] == len(DEFAULT_GROUPED) + 3
    # gfx942 (64 KiB LDS) takes the configs that fit; the others are recorded as rejected
    gfx942 = summary["archs"]["gfx942"]
    assert gfx942["ok"] == gfx942["emulated_ok"] >= 5 + 3
    assert gfx942["ok"] + gfx942["rejected"] == gfx942["jobs"]
    for item in accepted:
        scenarios = {s["scenario"]: s["ok"] for s in item.result.emulation["scenarios"]}
        assert set(scenarios) == set(grouped_scenarios(SMALL)) and all(scenarios.values())
        assert not item.spilled and item.result.scratch_bytes == 0


@pytest.fixture(scope="module")
def small_isa(tmp_path_factory):
    result = compile_and_emulate("gemm_grouped", SMALL, arch="gfx950", dtype="bf16",
                                 layout="nt", op="grouped_mm",
                                 dump_dir=tmp_path_factory.mktemp("isa"))
    assert result.ok and result.emulation["ok"], result.emulation
    return open(result.isa_path).read()


def test_idle_workgroups_past_the_tiles_write_nothing(small_isa) -> None:
    # 3 groups of 1 row: the grid covers (3 + 3 * 15) // 16 = 3 M tiles; 30 empty groups
    # around them add 30 * 15 // 16 idle ones, which must exit without a store
    rows = [0] * 10 + [1] + [0] * 10 + [1] + [0] * 10 + [1]
    run = emulate_grouped(small_isa, grouped, SMALL, dtype="bf16", layout="nt",
                          group_rows=rows, n=72, k=SMALL.tile_k * 4)
    assert run.ok, run.error
    tiles_n = -(-72 // SMALL.tile_n)
    assert run.workgroups == (3 + len(rows) * (SMALL.tile_m - 1)) // SMALL.tile_m * tiles_n


def test_wrong_group_offsets_are_caught(small_isa) -> None:
    """The kernel gets offsets one row off from what the reference uses: wrong rows."""

    def shifted_args(a, b, offs, out):
        args = list(grouped.launcher_args(a, b, offs, out))
        args[16] = (offs - 1).clamp(min=0).to(offs.dtype)
        return tuple(args)

    broken = type("Broken", (), {"launcher_args": staticmethod(shifted_args),
                                 "kernel_launch": staticmethod(grouped.kernel_launch)})
    run = emulate_grouped(small_isa, broken, SMALL, dtype="bf16", layout="nt",
                          group_rows=[5, 9, 4], n=72, k=SMALL.tile_k * 4)
    assert not run.ok and run.error


def test_config_with_split_k_is_refused() -> None:
    with pytest.raises(ValueError, match="does not split K"):
        grouped.make_launcher(dataclasses.replace(SMALL, split_k=2), dtype="bf16",
                              layout="nt", arch="gfx950")


def test_groups_ending_at_t_and_malformed_offsets(small_isa) -> None:
    # the last group ends exactly at T (no spare row)
    run = emulate_grouped(small_isa, grouped, SMALL, dtype="bf16", layout="nt",
                          group_rows=[7, 0, 20], n=72, k=SMALL.tile_k * 4, spare_rows=0)
    assert run.ok, run.error
    # decreasing, negative and past-T ends: clamped to [previous end, T] by the kernel,
    # never an access outside A or out (the emulator fails the run on one)
    for bad in ([5, 2, 40], [-3, 9, 1000], [30, 30, 30]):
        run = emulate_grouped(small_isa, grouped, SMALL, dtype="bf16", layout="nt",
                              group_rows=[5, 9, 4], n=72, k=SMALL.tile_k * 4, offs=bad)
        assert run.ok, (bad, run.error)
