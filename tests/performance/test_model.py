"""The performance model: its device table and sources, the parts of a prediction, the
ranking from the shipped compile catalog, top-k preselection, and ``inductor-flydsl
predict`` (for template configs and for an ISA file), all on CPU with real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.cli.explanation import config_fields, explain
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT, prune_for_shape
from inductor_flydsl.flydsl_backend.offer.offering import (
    candidate_configs,
    offered_configs,
    ranked_candidates,
)
from inductor_flydsl.isa import loop_analysis
from inductor_flydsl.performance.devices import DEVICES, SOURCES, device_spec
from inductor_flydsl.performance.kernel_profile import (
    KernelProfile,
    mfma_flops,
    profile_from_isa,
)
from inductor_flydsl.performance.model import mfma_cycles, predict
from inductor_flydsl.performance.occupancy import occupancy
from inductor_flydsl.performance.ranking import catalog_profile, shipped_catalog_path
from inductor_flydsl.performance.traffic import GemmShape, traffic
from inductor_flydsl.problems.problem import synthetic_problem

ROOT = Path(__file__).resolve().parents[2]
STORED_ISA = ROOT / "tests" / "flydsl" / "data" / "gfx950_bf16_nt_mm_64x64x64_w2x2_s2.s"
MI355X = device_spec("MI355X")
needs_mca = pytest.mark.skipif(loop_analysis.find_llvm_mca() is None,
                               reason="llvm-mca-22 not installed")


def _config(m: int, n: int, k: int, wm: int, wn: int, stages: int, group_m: int,
            split_k: int = 1):
    return next(c for c in DEFAULT if (c.tile_m, c.tile_n, c.tile_k, c.waves_m, c.waves_n,
                                       c.stages, c.group_m, c.split_k)
                == (m, n, k, wm, wn, stages, group_m, split_k))


def _profile(config, arch: str = "gfx950") -> KernelProfile:
    found = catalog_profile(config, arch=arch, template="gemm_dense", op="mm", dtype="bf16",
                            layout="nt")
    assert found is not None, f"the shipped catalog has no row of {config}"
    profile, borrowed = found
    assert borrowed is None
    return profile


def test_every_device_figure_names_a_known_source() -> None:
    for device in DEVICES.values():
        assert device.sources
        for figure, source in device.sources.items():
            assert source in SOURCES, (device.name, figure, source)
        for _, _, url in device.source_rows():
            assert url.startswith("https://")
    # the published dense BF16 peaks (AMD: MI355X 2.5 PF, MI300X 1307.4 TF)
    assert MI355X.peak("bf16") == pytest.approx(2516.6e12, rel=1e-3)
    assert device_spec("mi300x").peak("bf16") == pytest.approx(1307.4e12, rel=1e-4)
    with pytest.raises(ValueError, match="known: MI355X"):
        device_spec("MI999")
    with pytest.raises(ValueError, match="no published dense fp4"):
        device_spec("MI300X").peak("fp4")


def test_mfma_cycles_from_the_peak_match_the_published_cycle_counts() -> None:
    # AMD's matrix-core blog: 16x16x32 bf16 (gfx950) and 16x16x16 bf16 (gfx942) take 16
    # cycles; 16x16x128 f8f6f4 16 with FP4 operands, 32 with FP8 ones
    base = _profile(_config(64, 64, 64, 2, 2, 2, 8))
    assert mfma_cycles(base, MI355X) == pytest.approx(16)
    gfx942 = KernelProfile(**{**base.to_json(), "mfma": "v_mfma_f32_16x16x16_bf16"})
    assert mfma_cycles(gfx942, device_spec("MI300X")) == pytest.approx(16, rel=1e-3)
    fp4 = KernelProfile(**{**base.to_json(), "mfma": "v_mfma_scale_f32_16x16x128_f8f6f4",
                           "a_dtype": "e2m1", "b_dtype": "e2m1"})
    fp8 = KernelProfile(**{**fp4.to_json(), "a_dtype": "e4m3"})
    assert mfma_cycles(fp4, MI355X) == pytest.approx(16)
    assert mfma_cycles(fp8, MI355X) == pytest.approx(32)
    assert mfma_flops("v_mfma_f32_32x32x16_bf16") == 2 * 32 * 32 * 16
    with pytest.raises(ValueError, match="not an MFMA"):
        mfma_flops("v_add_f32")


def test_occupancy_is_set_by_the_scarcest_resource() -> None:
    base = _profile(_config(64, 64, 64, 2, 2, 2, 8))
    big_regs = KernelProfile(**{**base.to_json(), "vgprs": 200, "agprs": 56, "lds_bytes": 1024})
    occ = occupancy(big_regs, MI355X)  # 256 registers: 2 waves per SIMD, 4-wave groups
    assert occ.limited_by == "registers" and occ.workgroups_per_cu == 2
    big_lds = KernelProfile(**{**base.to_json(), "vgprs": 32, "agprs": 0,
                               "lds_bytes": 100 * 1024})
    assert occupancy(big_lds, MI355X).workgroups_per_cu == 1  # 160 KiB LDS: one fits
    assert occupancy(big_lds, MI355X).limited_by == "lds"
    assert occupancy(big_lds, device_spec("MI300X")).workgroups_per_cu == 1  # never 0


def test_a_large_gemm_is_compute_bound_and_a_decode_gemm_is_not() -> None:
    large = _profile(_config(256, 256, 64, 2, 4, 2, 8))
    big = predict(large, GemmShape(4096, 4096, 4096), MI355X)
    assert big.bound in ("compute", "issue")
    assert 0 < big.roofline_share <= 1 and big.tflops * 1e12 <= MI355X.peak("bf16")
    # twice the K: about twice the time (the fixed costs are small at this size)
    deeper = predict(large, GemmShape(4096, 4096, 8192), MI355X)
    assert deeper.us / big.us == pytest.approx(2, rel=0.1)
    decode = predict(_profile(_config(16, 64, 256, 1, 1, 2, 1)), GemmShape(16, 4096, 4096),
                     MI355X)
    assert decode.bound in ("memory", "latency", "launch", "tail")
    assert decode.roofline_share < 0.6
    assert decode.to_json()["kind"] == "predicted"
    with pytest.raises(ValueError, match="multiple of split_k"):
        predict(_profile(_config(16, 64, 256, 1, 1, 2, 1, 4)), GemmShape(16, 64, 1002),
                MI355X)


def test_panels_follow_the_swizzle_and_the_round_robin_over_xcds() -> None:
    """Workgroup i runs on XCD i mod 8 and each XCD has its own L2. A 2048x1024 output in
    128x128 tiles (16 x 8 tiles, one round): without the swizzle XCD x gets column x of
    every row (16 A panels, 1 B panel); with group_m = 8 it gets rows x and 8 + x of every
    column (2 A panels, 8 B panels)."""
    from inductor_flydsl.performance.traffic import _panel_fetches

    grouped = _profile(_config(128, 128, 64, 2, 2, 2, 8))
    plain = KernelProfile(**{**grouped.to_json(), "group_m": 1})
    shape = GemmShape(2048, 1024, 4096)
    slots = MI355X.compute_units
    assert _panel_fetches(plain, shape, MI355X, slots) == (16 * 8, 1 * 8)
    assert _panel_fetches(grouped, shape, MI355X, slots) == (2 * 8, 8 * 8)
    moved = traffic(grouped, shape, MI355X, slots)
    panel = 128 * 4096 * 2
    assert moved.mall_bytes == (16 + 64) * panel + 2048 * 1024 * 2
    assert moved.l2_bytes == 128 * 2 * panel + 2048 * 1024 * 2  # every workgroup's panels
    assert moved.unique_bytes <= moved.hbm_bytes <= moved.mall_bytes


def test_split_k_pays_for_its_partials() -> None:
    one = _profile(_config(16, 64, 256, 1, 1, 2, 1))
    four = _profile(_config(16, 64, 256, 1, 1, 2, 1, 4))
    shape = GemmShape(16, 4096, 8192)
    p4 = predict(four, shape, MI355X)
    assert p4.parts["reduce_us"] > 0 and p4.parts["launch_us"] == pytest.approx(
        3 * MI355X.launch_cost_us("graph"), abs=1e-3)  # the kernel, torch.sum, the copy
    assert predict(four, shape, MI355X, "eager").parts["launch_us"] == pytest.approx(
        3 * MI355X.launch_us)
    p1 = predict(one, shape, MI355X)
    assert p1.parts["reduce_us"] == 0 and p1.parts["k_steps"] == 4 * p4.parts["k_steps"]
    atomic = KernelProfile(**{**four.to_json(), "split_k_reduction": "atomic"})
    assert predict(atomic, shape, MI355X).parts["launch_us"] == pytest.approx(
        MI355X.launch_cost_us("graph"), abs=1e-3)  # parts are rounded to 1e-3
    # the in-launch reductions pay their round trips instead of two kernels
    counter = KernelProfile(**{**four.to_json(), "split_k_reduction": "counter"})
    pa, pc = predict(atomic, shape, MI355X), predict(counter, shape, MI355X)
    assert pa.parts["reduce_us"] == pc.parts["reduce_us"] == 0
    assert pa.parts["compute_us"] < pc.parts["compute_us"]


def test_timing_modes_and_pipeline_depth() -> None:
    """kernel (a profiler's duration) charges the fixed in-kernel cost, graph (the default)
    adds the gap between back-to-back kernels, eager the event-timed host launch; a kernel
    that also prefetches into registers hides latency over one more K step."""
    profile = _profile(_config(16, 64, 256, 1, 1, 2, 1))
    shape = GemmShape(1, 1024, 4096)
    graph, eager = predict(profile, shape, MI355X), predict(profile, shape, MI355X, "eager")
    kernel = predict(profile, shape, MI355X, "kernel")
    assert graph.timing == "graph" and eager.to_json()["timing"] == "eager"
    assert kernel.timing == "kernel"
    assert graph.us - kernel.us == pytest.approx(MI355X.graph_gap_us)
    assert eager.us - kernel.us == pytest.approx(MI355X.launch_us - MI355X.kernel_overhead_us)
    with pytest.raises(ValueError, match="timing"):
        predict(profile, shape, MI355X, "cpu")
    one_stage = KernelProfile(**{**profile.to_json(), "stages": 1})
    prefetching = KernelProfile(**{**one_stage.to_json(), "register_prefetch": True})
    assert (one_stage.prefetch_depth, prefetching.prefetch_depth) == (0, 1)
    assert predict(prefetching, shape, MI355X).us < predict(one_stage, shape, MI355X).us


def test_kernel_overhead_is_derived_from_aiters_fastest_kernel() -> None:
    """The fixed in-kernel cost is AITER's fastest published kernel on the arch less the
    fill and drain latencies the model charges any kernel (devices.py, aiter-floor): never
    negative, under the eager launch (which holds an empty kernel's duration)."""
    from inductor_flydsl.performance.devices import AITER_FASTEST_US

    for device in DEVICES.values():
        expected = AITER_FASTEST_US[device.arch] - 2 * device.memory_latency_ns / 1e3
        assert device.kernel_overhead_us == pytest.approx(expected)
        assert 0 < device.kernel_overhead_us < device.launch_cost_us("graph") < device.launch_us
        assert "aiter-floor" in device.sources.values()


def _pipeline_profile(stages: int, k_steps_per_trip: int = 1) -> KernelProfile:
    """A one-wave bf16 16x16x32 kernel whose trip is exactly its one MFMA per K step."""
    return KernelProfile(
        tile_m=16, tile_n=16, tile_k=32 * k_steps_per_trip, waves=1, stages=stages,
        group_m=1, split_k=1, mfma="v_mfma_f32_16x16x32_bf16", loop_mfma=k_steps_per_trip,
        loop_cycles=4.0 * k_steps_per_trip, mca_cycles_per_mfma=4.0, vgprs=32, agprs=0,
        lds_bytes=4096, outside_instructions=0)


def test_pipeline_fill_steps_and_drain() -> None:
    """depth >= 1: one latency of fill, max(compute, latency / depth) per step except the
    last ``depth`` (their loads already in flight), one latency of drain; a kernel with no
    more steps than its depth waits on memory once. depth 0: every step after the first
    waits a whole latency, hidden by the other waves' MFMAs on the SIMD."""
    from inductor_flydsl.performance.model import _k_loop_cycles, _round_cycles

    latency = 600.0
    c = mfma_cycles(_pipeline_profile(2), MI355X)  # one wave's step: its one MFMA
    for stages, k in ((2, 10), (4, 10), (6, 3)):
        depth = stages - 1
        cycles, _ = _k_loop_cycles(_pipeline_profile(stages), MI355X, 1, latency, k)
        assert cycles == pytest.approx(latency + max(k - depth, 0) * max(c, latency / depth)
                                       + min(k, depth) * c)
        full, _ = _round_cycles(_pipeline_profile(stages), MI355X, k, 1, latency)
        assert full == pytest.approx(cycles + latency)  # + the drain
    alone, limit = _k_loop_cycles(_pipeline_profile(1), MI355X, 1, latency, 10)
    assert alone == pytest.approx(latency + 9 * (c + latency) + c) and limit == "latency"
    # 64 waves on the SIMD: their MFMAs (64 c per step) cover one wave's wait
    crowded, _ = _k_loop_cycles(_pipeline_profile(1), MI355X, 64, latency, 10)
    assert crowded == pytest.approx(latency + 9 * max(64 * c, c + latency) + 64 * c)


def test_fp8_mfma_holds_its_real_cycles_not_llvm_mcas() -> None:
    """A trip is llvm-mca's cycles x 4 clocks; an MFMA llvm-mca counts shorter than its
    published length adds the difference (16x16x128 with FP8 operands: 32 clocks where the
    model says 4 cycles, 16 clocks), a bf16 16x16x32 adds nothing."""
    from inductor_flydsl.performance.model import _trip_cycles

    bf16 = _pipeline_profile(2, k_steps_per_trip=4)
    assert _trip_cycles(bf16, MI355X, 1)[1] == pytest.approx(4 * bf16.loop_cycles)
    fp8 = KernelProfile(**{**bf16.to_json(), "mfma": "v_mfma_scale_f32_16x16x128_f8f6f4",
                           "a_dtype": "e4m3", "b_dtype": "e4m3", "loop_cycles": 40.0})
    assert mfma_cycles(fp8, MI355X) == pytest.approx(32)
    assert _trip_cycles(fp8, MI355X, 1)[1] == pytest.approx(4 * 40 + 4 * (32 - 16))


def test_ranking_reads_the_shipped_catalog_and_borrows_across_variants() -> None:
    assert shipped_catalog_path() is not None
    only_mm = _config(16, 32, 128, 1, 1, 2, 1)  # catalogued for mm bf16 nt only
    found = catalog_profile(only_mm, arch="gfx950", template="gemm_dense", op="addmm",
                            dtype="fp16", layout="tn")
    assert found is not None
    profile, borrowed = found
    assert borrowed == "mm bf16 nt" and profile.loop_mfma > 0 and profile.loop_cycles
    every_variant = _config(64, 128, 64, 2, 2, 2, 8)  # catalogued in every variant
    assert catalog_profile(every_variant, arch="gfx950", template="gemm_dense", op="addmm",
                           dtype="fp16", layout="tn")[1] is None


@pytest.mark.parametrize("mnk", [(16, 4096, 4096), (4096, 4096, 4096), (256, 14336, 4096)])
def test_top_k_offers_the_models_best_configs(mnk: tuple[int, int, int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    problem = synthetic_problem("mm", *mnk, dtype="bfloat16", layout="nt")
    ranked = ranked_candidates(problem, "gfx950")
    assert ranked and all(r.prediction is not None for r in ranked)
    times = [r.prediction.us for r in ranked]
    assert times == sorted(times)
    # every eligible config was ranked, not only the 12 the pruning keeps
    eligible = prune_for_shape(list(DEFAULT), *mnk, limit=64)
    assert {json.dumps(r.config.to_json()) for r in ranked} == {
        json.dumps(c.to_json()) for c in eligible}
    offered, k = offered_configs(problem, "gfx950")
    best = [r.config for r in ranked[:4]]
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOP_K", "0")  # no preselection: the pruned list
    pruned = candidate_configs(problem, "gfx950")
    assert offered_configs(problem, "gfx950")[1] == 0
    assert len(pruned) == min(12, len(ranked)) and ranked_candidates(problem, "gfx950") is None
    # the model's four first, then the rest of the pruned list (a record of any of them
    # is still served)
    assert k == 4 and offered == best + [c for c in pruned if c not in best]
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOP_K", "2")
    assert offered_configs(problem, "gfx950")[0][:2] == best[:2]
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOP_K", "many")  # bad: logged, default 4
    assert offered_configs(problem, "gfx950") == (offered, 4)


def test_without_catalog_figures_there_is_no_preselection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from inductor_flydsl.performance import ranking

    monkeypatch.setattr(ranking, "shipped_catalog_path", lambda: None)
    problem = synthetic_problem("mm", 8000, 8192, 8192, dtype="bfloat16", layout="nt")
    assert ranked_candidates(problem, "gfx950") is None
    configs, k = offered_configs(problem, "gfx950")
    assert k == 0 and len(configs) == 12


def test_explain_marks_what_top_k_drops() -> None:
    problem = synthetic_problem("mm", 32, 8192, 7168, dtype="bfloat16", layout="nt")
    result = explain(problem, "gfx950")
    offered = [c for c in result.configs if c["offered"]]
    assert len(offered) == 4 and result.configs[:4] == offered
    assert all(c["predicted_us"] > 0 and c["bound"] for c in result.configs)
    times = [c["predicted_us"] for c in offered]
    assert times == sorted(times)
    configs, k = offered_configs(problem, "gfx950")
    assert k == 4 and [config_fields(c) for c in result.configs] == [
        c.to_json() for c in configs]
    assert result.model and result.model["kind"] == "predicted"
    assert result.model["device"] == "MI355X"


@needs_mca
def test_profile_from_an_isa_file_matches_the_catalog() -> None:
    text = STORED_ISA.read_text()
    profile = profile_from_isa(text, "gfx950", tile_m=64, tile_n=64, tile_k=64, stages=2,
                               group_m=8)
    assert profile.waves == 4  # from the kernel's workgroup size
    assert profile.mfma == "v_mfma_f32_16x16x32_bf16"
    assert profile.loop_mfma % profile.mfma_per_k_step == 0
    assert profile.outside_instructions and profile.outside_instructions > 0
    assert profile.loop_cycles and profile.mca_cycles_per_mfma == pytest.approx(4.0)
    shape = GemmShape(1024, 1024, 4096)
    assert predict(profile, shape, MI355X).us > 0
    with pytest.raises(ValueError, match="no kernel metadata"):
        profile_from_isa("v_add_f32 v0, v1, v2\n", "gfx950", tile_m=16, tile_n=16, tile_k=32)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inductor_flydsl", "predict", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)


def test_predict_cli_for_template_configs() -> None:
    proc = _cli("--op", "mm", "--shape", "16x4096x4096", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["kind"] == "predicted" and out["device"] == "MI355X"
    rows = out["predictions"]
    assert [r["predicted_us"] for r in rows] == sorted(r["predicted_us"] for r in rows)
    assert sum(r["offered"] == "benchmarked" for r in rows) == 4
    assert {r["offered"] for r in rows} <= {"benchmarked", "served from a record only",
                                           "not offered"}
    assert set(out["sources"]) and all(u.startswith("https://") for u in out["sources"].values())
    table = _cli("--op", "mm", "--shape", "4096x4096x4096", "--device", "MI300X")
    assert table.returncode == 0 and "PREDICTED" in table.stdout and "MI300X" in table.stdout
    one = _cli("--op", "mm", "--shape", "4096x4096x4096", "--config",
               json.dumps(_config(128, 128, 64, 2, 2, 2, 8).to_json()), "--json")
    assert len(json.loads(one.stdout)["predictions"]) == 1


@needs_mca
def test_predict_cli_for_an_isa_file() -> None:
    proc = _cli("--isa", str(STORED_ISA), "--tile", "64x64x64", "--group-m", "8",
                "--shape", "2048x2048x2048", "--json")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["predictions"][0]
    assert row["predicted_us"] > 0 and row["profile"]["waves"] == 4


@pytest.mark.parametrize(("args", "named"), [
    (("--shape", "16x4096x4096", "--device", "MI999"), "--device"),
    (("--shape", "16x4096", "--op", "mm"), "--shape"),
    (("--shape", "16x64x64", "--isa", "missing.s"), "--tile"),
    (("--shape", "16x64x64", "--isa", "missing.s", "--tile", "16x64x64"), "--isa"),
    (("--shape", "16x64x64", "--config", "{not json"), "--config"),
    (("--shape", "16x64x64", "--arch", "gfx950", "--device", "MI300X"), "--arch"),
])
def test_predict_cli_names_the_wrong_argument(args: tuple[str, ...], named: str) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2 and f"error: {named}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_fused_epilogue_is_ranked_with_its_traffic_and_its_constraints() -> None:
    from inductor_flydsl.performance.traffic import epilogue_bytes
    from inductor_flydsl.problems.epilogue_spec import EpilogueSpec

    residual = EpilogueSpec.from_json({
        "operands": [{"kind": "tile", "dtype": "bfloat16"}],
        "steps": [["add", "acc", "x0"]], "out_dtype": "float32"})
    assert epilogue_bytes(residual) == (2.0, 2.0)  # the tile read, fp32 stores over bf16
    problem = synthetic_problem("mm", 16, 4096, 4096, dtype="bfloat16", layout="nt")
    from inductor_flydsl.performance.ranking import rank
    from inductor_flydsl.performance.traffic import model_shape

    fused = ranked_candidates(problem, "gfx950", epilogue=residual)
    plain = rank([r.config for r in fused], model_shape(problem), arch="gfx950",
                 template="gemm_dense", op="mm", dtype="bf16", layout="nt")
    by_config = {json.dumps(r.config.to_json()): r.prediction for r in plain}
    for r in fused:
        base = by_config[json.dumps(r.config.to_json())]
        assert r.prediction.parts["hbm_mb"] > base.parts["hbm_mb"]
        assert not r.stored  # the shipped lists rank the plain GEMM only
    # a constraint (no split-K under an epilogue) applies before top-k, not after
    offered, k = offered_configs(problem, "gfx950", epilogue=residual,
                                 accept=lambda c: c.split_k == 1)
    assert k == 4 and all(c.split_k == 1 for c in offered)
