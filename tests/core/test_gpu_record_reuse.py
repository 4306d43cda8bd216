"""GPU end to end (skipped without a GPU): max-autotune on CUDA or ROCm records ATen and
Triton candidates (and FlyDSL on ROCm gfx950/gfx942), and a second process reuses the
winners without benchmarking."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlite_utils
import torch

from tests.conftest import isolated_env, run_compile_model

GPU_MODEL = ["--device", "cuda", "--dtype", "bfloat16", "--freezing", "0",
             "--dims", "1024,2048,1024", "--batch", "256"]


def _record_then_reuse(tmp_path: Path, backends: str) -> sqlite_utils.Database:
    db = tmp_path / "gpu.db"
    args = ["--mode", "max-autotune-no-cudagraphs", "--plugin", "--db", str(db),
            "--backends", backends, *GPU_MODEL]
    cold = run_compile_model([*args, "--out", str(tmp_path / "cold.pt")],
                             isolated_env(tmp_path / "cold"))
    assert cold["stats"]["recorded"] >= 2 and cold["stats"]["errors"] == 0
    warm = run_compile_model([*args, "--out", str(tmp_path / "warm.pt")],
                             isolated_env(tmp_path / "warm"))
    assert warm["stats"]["hits"] == cold["stats"]["recorded"]
    assert warm["autotune_runs"] == 0
    assert torch.equal(torch.load(tmp_path / "cold.pt"), torch.load(tmp_path / "warm.pt"))
    return sqlite_utils.Database(db)


@pytest.mark.cuda
def test_cuda_records_aten_and_triton_and_reuses(tmp_path: Path) -> None:
    db = _record_then_reuse(tmp_path, "ATEN,TRITON")
    backends = {r["backend"] for r in db.query("select distinct backend from results")}
    assert {"aten", "triton"} <= backends


@pytest.mark.rocm
def test_rocm_records_flydsl_candidates_and_reuses(tmp_path: Path) -> None:
    db = _record_then_reuse(tmp_path, "ATEN,TRITON,FLYDSL")
    rows = list(db.query("select status, error from results where backend = 'flydsl'"))
    assert rows, "FlyDSL candidates were offered on a supported ROCm GPU"
    assert not [r for r in rows if r["status"] == "invalid"], rows
