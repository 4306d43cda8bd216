"""MX ``scaled_mm`` problems in the tuning DB, the sweep and the report: keyed with their
formats and scale layout, served from a real SQLite DB, reported apart from dense GEMMs
with their own geomean, and reproduced as sweep items."""

from __future__ import annotations

from pathlib import Path

import pytest

from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.flydsl_backend.offer.mx_eligibility import synthetic_mx_problem
from inductor_flydsl.problems.problem import Problem, synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo, template_source_hash
from inductor_flydsl.settings import Mode, Settings
from inductor_flydsl.sweep.items import ItemError, SweepItem
from inductor_flydsl.sweep.presets import item_from_problem, preset

MI355X = DeviceInfo(kind="rocm", arch="gfx950", name="AMD Instinct MI355X", compute_units=256)
NOW = SoftwareInfo(torch="2.13.0+rocm7.0", triton="3.7.0", flydsl="0.5.0", templates="v1-x",
                   blas="hipblaslt")
FP8 = ("float8_e4m3fn", "float8_e4m3fn")
FP4 = ("float4_e2m1fn_x2", "float4_e2m1fn_x2")
FLYDSL = {"template": "gemm_mx", "template_hash": template_source_hash("gemm_mx"),
          "tile_m": 256, "tile_n": 128, "tile_k": 128, "waves_m": 2, "waves_n": 2,
          "stages": 2, "group_m": 8}


def _record(path: Path, problem: Problem, fly_ms: float, aten_ms: float) -> None:
    db = TuningDB.open(path, writable=True)
    try:
        db.record_selection(MI355X, NOW, problem, [
            CandidateResult("fly", "flydsl", "flydsl_scaled_mm_256x128x128", FLYDSL, fly_ms),
            CandidateResult("aten", "aten", "_scaled_mm", {}, aten_ms)])
    finally:
        db.close()


def test_mx_problems_are_keyed_by_format_and_scale_layout(tmp_path: Path) -> None:
    fp8 = synthetic_mx_problem(4096, 4096, 4096, formats=FP8)
    fp4 = synthetic_mx_problem(4096, 4096, 4096, formats=FP4)
    swizzled = synthetic_mx_problem(4096, 4096, 4096, formats=FP8, swizzled_scales=True)
    assert len({fp8.id, fp4.id, swizzled.id}) == 3
    assert Problem.from_spec(fp4.spec()).id == fp4.id  # round trip through the DB's JSON
    user = tmp_path / "u.db"
    _record(user, fp8, 1.0, 1.6)
    layered = LayeredTuningDB(Settings(db_path=user, mode=Mode.READWRITE, use_shipped=False),
                              shipped_paths=[])
    winner = layered.lookup(MI355X, NOW, fp8)
    assert winner is not None and winner.candidate_id == "fly"
    assert layered.lookup(MI355X, NOW, fp4) is None
    layered.close()


def test_report_lists_scaled_gemms_apart(tmp_path: Path) -> None:
    from inductor_flydsl.report import load_report, render_markdown

    user = tmp_path / "u.db"
    _record(user, synthetic_mx_problem(4096, 4096, 4096, formats=FP8), 1.0, 1.6)
    _record(user, synthetic_mx_problem(128, 4096, 4096, formats=FP4), 0.5, 0.4)
    dense = synthetic_problem("mm", 512, 4096, 4096, dtype="bfloat16", layout="nt")
    db = TuningDB.open(user, writable=True)
    db.record_selection(MI355X, NOW, dense, [
        CandidateResult("aten-mm", "aten", "mm", {}, 2.0),
        CandidateResult("tri", "triton", "triton_mm", {"BLOCK_M": 64}, 1.6)])
    db.close()
    report = load_report(user)
    families = dict(zip(report.problems["problem"], report.problems["family"], strict=True))
    assert sorted(families.values()) == ["dense", "scaled", "scaled"]
    geomeans = {g["family"]: g for g in report.summary()["geomeans"]}
    assert set(geomeans) == {"dense", "scaled"}
    text = render_markdown(report)
    dense_part, scaled_part = text.split("## Scaled GEMM (MXFP8 / MXFP4 / FP8) winners")
    assert "scaled_mm" not in dense_part.split("## Winners per problem")[1]
    table = scaled_part.split("##")[0]
    assert "scaled_mm float8_e4m3fn 4096x4096x4096" in table
    assert "scaled_mm float4_e2m1fn_x2 128x4096x4096" in table  # K in elements


def test_mx_sweep_items_and_presets() -> None:
    items = preset("mx-llama3-8b")
    assert {i.dtype for i in items} == {"mxfp8", "mxfp4"} and {i.op for i in items} == {
        "scaled_mm"}
    assert {i.m for i in items} == {128, 512, 4096}
    assert len(items) == 5 * 3 * 2  # five distinct layers, three M, two formats
    assert all(i.m % 128 == 0 for i in preset("mx-dense-suite"))
    problem = synthetic_mx_problem(512, 14336, 4096, formats=FP4)
    assert item_from_problem(problem) == SweepItem.from_values(
        {"op": "scaled_mm", "m": 512, "n": 14336, "k": 4096, "dtype": "mxfp4"})
    with pytest.raises(ItemError, match="MX dtypes"):
        SweepItem.from_values({"op": "mm", "m": 1, "n": 8, "k": 8, "dtype": "mxfp8"})
    with pytest.raises(ItemError, match="layout"):
        SweepItem.from_values({"op": "scaled_mm", "m": 1, "n": 8, "k": 8, "dtype": "mxfp8",
                               "layout": "nn"})
