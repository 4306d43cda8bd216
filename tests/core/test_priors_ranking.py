"""Which record is exact, and which older record is the nearest prior (real SQLite files).

The versions are those of real releases (torch 2.13.0 and 2.14.1, triton 3.8.0) written
as the rows another process would have written; the compile-level tests
(test_upgrade_priors.py, tests/flydsl/test_template_change.py) run real releases and a
real template change.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.priors import describe_records, find_prior
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo, template_source_hash
from inductor_flydsl.settings import ENV_PRIOR_TOP_K, Mode, Settings, settings_from_env

MI355X = DeviceInfo(kind="rocm", arch="gfx950", name="AMD Instinct MI355X", compute_units=256)
MI350X = replace(MI355X, name="AMD Instinct MI350X")
PROBLEM = synthetic_problem("mm", 512, 4096, 4096, dtype="bfloat16", layout="nt")
NOW = SoftwareInfo(torch="2.14.1+rocm7.0", triton="3.8.0", flydsl="0.5.0", templates="v1-x",
                   blas="hipblaslt")
OLD_TORCH = replace(NOW, torch="2.13.0+rocm7.0", triton="3.7.0")
FLYDSL = {"template": "gemm_dense", "template_hash": template_source_hash("gemm_dense"),
          "tile_m": 256}


def results(winner: str = "flydsl") -> list[CandidateResult]:
    rows = [CandidateResult("fly-a", "flydsl", "flydsl_a", FLYDSL, 1.0),
            CandidateResult("tri-a", "triton", "triton_mm_1", {"BLOCK_M": 128}, 1.2),
            CandidateResult("aten", "aten", "mm", {}, 1.5)]
    return rows if winner == "flydsl" else [replace(rows[0], time_ms=2.0), *rows[1:]]


def record(path: Path, device: DeviceInfo, software: SoftwareInfo,
           rows: list[CandidateResult]) -> None:
    db = TuningDB.open(path, writable=True)
    try:
        db.record_selection(device, software, PROBLEM, rows)
    finally:
        db.close()


def layered(user: Path, shipped: list[Path] | None = None) -> LayeredTuningDB:
    return LayeredTuningDB(Settings(db_path=user, mode=Mode.READWRITE, use_shipped=True),
                           shipped_paths=shipped or [])


def test_flydsl_rows_survive_a_torch_upgrade_but_the_selection_does_not(tmp_path: Path):
    record(tmp_path / "u.db", MI355X, OLD_TORCH, results())
    db = layered(tmp_path / "u.db")
    assert db.lookup(MI355X, NOW, PROBLEM) is None  # Triton and ATen rows changed
    prior = find_prior(db, MI355X, NOW, PROBLEM)
    assert prior is not None and prior.same_device
    assert prior.changes == ("triton: torch 2.13.0+rocm7.0 -> 2.14.1+rocm7.0",
                             "triton: triton 3.7.0 -> 3.8.0",
                             "aten: torch 2.13.0+rocm7.0 -> 2.14.1+rocm7.0")
    assert [r.candidate_id for r in prior.selection.results] == ["fly-a", "tri-a", "aten"]
    # with the old torch itself the record is exact
    assert db.lookup(MI355X, OLD_TORCH, PROBLEM).candidate_id == "fly-a"
    # a flydsl-only change leaves ATen- and Triton-only selections exact
    record(tmp_path / "u.db", MI350X, NOW, results()[1:])
    assert db.lookup(MI350X, replace(NOW, flydsl="0.6.0"), PROBLEM).candidate_id == "tri-a"
    db.close()


def test_gpu_blas_library_is_part_of_atens_validity(tmp_path: Path) -> None:
    record(tmp_path / "u.db", MI355X, NOW, [*results()[2:], results()[1]])
    db = layered(tmp_path / "u.db")
    assert db.lookup(MI355X, NOW, PROBLEM) is not None
    other_blas = replace(NOW, blas="rocblas")
    assert db.lookup(MI355X, other_blas, PROBLEM) is None
    assert "aten: BLAS hipblaslt -> rocblas" in find_prior(db, MI355X, other_blas,
                                                              PROBLEM).changes
    db.close()


def test_same_device_first_then_same_arch_and_shipped_dbs_count(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped.db"
    record(shipped, MI355X, OLD_TORCH, results(winner="triton"))
    db = layered(tmp_path / "u.db", [shipped])
    # only the shipped DB has a record: it is the prior
    prior = find_prior(db, MI355X, NOW, PROBLEM)
    assert prior.source == str(shipped) and prior.same_device
    db.close()
    # a same-arch record on another product (in the user's DB, with this very software)
    # is farther than the same device's record with other software
    record(tmp_path / "u.db", MI350X, NOW, results())
    db = layered(tmp_path / "u.db", [shipped])
    prior = find_prior(db, MI355X, NOW, PROBLEM)
    assert prior.same_device and prior.source == str(shipped)
    # another device of the arch is the prior when the device has none
    mi325 = replace(MI355X, name="another gfx950 board", compute_units=304)
    prior = find_prior(db, mi325, NOW, PROBLEM)
    assert not prior.same_device and prior.changes == ()  # same software, other device
    assert prior.selection.device["name"] == "AMD Instinct MI350X"
    # no record on another arch is ever a prior
    gfx942 = replace(MI355X, arch="gfx942")
    assert find_prior(db, gfx942, NOW, PROBLEM) is None
    db.close()


def test_a_selection_with_no_ok_result_is_not_a_prior(tmp_path: Path) -> None:
    record(tmp_path / "u.db", MI355X, OLD_TORCH,
           [CandidateResult("aten", "aten", "mm", {}, None, status="failed")])
    db = layered(tmp_path / "u.db")
    assert find_prior(db, MI355X, NOW, PROBLEM) is None
    db.close()


def test_describe_records_says_exact_or_prior(tmp_path: Path) -> None:
    record(tmp_path / "u.db", MI355X, OLD_TORCH, results())
    record(tmp_path / "u.db", MI355X, NOW, results())
    db = TuningDB.open(tmp_path / "u.db", writable=False)
    rows = {r["software"]["torch"]: r for r in describe_records(
        db.recorded_selections(PROBLEM.id), NOW)}
    db.close()
    assert rows["2.14.1+rocm7.0"]["exact"] and not rows["2.13.0+rocm7.0"]["exact"]
    assert rows["2.13.0+rocm7.0"]["changes"][0].startswith("triton: torch 2.13.0")


def test_prior_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # priors and buckets narrow the candidates by records that are not this problem's
    # valid timings: opt-in, so the final code is Inductor's own pick by default
    assert settings_from_env().prior_top_k == 2 and not settings_from_env().use_priors
    assert not settings_from_env().use_buckets
    monkeypatch.setenv(ENV_PRIOR_TOP_K, "3")
    monkeypatch.setenv("INDUCTOR_FLYDSL_PRIORS", "1")
    monkeypatch.setenv("INDUCTOR_FLYDSL_BUCKETS", "1")
    assert settings_from_env().prior_top_k == 3 and settings_from_env().use_priors
    assert settings_from_env().use_buckets
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(ENV_PRIOR_TOP_K, bad)
        with pytest.raises(ValueError, match="INDUCTOR_FLYDSL_PRIOR_TOP_K"):
            settings_from_env()


def test_explain_names_the_prior_and_its_versions(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    record(tmp_path / "u.db", MI355X, OLD_TORCH, results())
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "explain", "--op", "mm", "--shape",
         "512x4096x4096", "--dtype", "bf16", "--layout", "nt", "--db", str(tmp_path / "u.db"),
         "--json"], capture_output=True, text=True, check=True)
    info = json.loads(proc.stdout)["tuning_db"]
    assert "torch 2.13.0+rocm7.0" in info["prior"] and "AMD Instinct MI355X" in info["prior"]
    (row,) = info["records"]
    assert not row["exact"] and row["software"]["torch"] == "2.13.0+rocm7.0"
