"""The epilogue rule on a GPU: Triton templates against ATen, and Inductor's deferred
choice (``benchmark_epilogue_fusion``: a ``MultiTemplateBuffer`` the scheduler settles by
benchmarking the best template with its epilogue fused against the GEMM-only winner plus
a separate epilogue kernel). Plugin off, on with a fresh DB and on with it warm must run
the same kernels; the warm compile serves every GEMM-only time (no GEMM benchmarking)
and replays every fusion decision the fresh compile benchmarked from its record
(``fusion_replay.py``: nothing compiled or benchmarked for it), and the record holds the
deferred decision. The CPU version of the replay (Inductor's scheduler code through
Triton's interpreter, with recorded decisions both ways) is test_fusion_replay_cpu.py.

Marked for CUDA and ROCm; skipped on a machine without either. Never run here so far
(no GPU in this project's CI); the CPU version of every check is
epilogue_agreement.py (run by test_epilogue_agreement_template.py and
test_epilogue_agreement_extern.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import sqlite_utils

from inductor_flydsl.inductor.fusion.fusion_replay import KIND
from tests.conftest import isolated_env, run_for_result

CHILD = Path(__file__).with_name("epilogue_cases.py")
GPU_CASES = "linear_relu,linear_gelu,linear_relu_add,bmm_div,bmm_mul_add"


def _run(mode: str, root: Path, db: Path) -> dict:
    out = root / mode
    args = [sys.executable, str(CHILD), "--prefer", "template", "--out", str(out),
            "--device", "cuda", "--cases", GPU_CASES]
    if mode != "off":
        args += ["--plugin", "--db", str(db)]
    result = run_for_result(args, isolated_env(out), 1800, f"the {mode} run")
    del result["stderr"]  # the rest is keyed by case
    return result


def _check(tmp_path: Path) -> None:
    db = tmp_path / "tuning.db"
    runs = {mode: _run(mode, tmp_path, db) for mode in ("off", "fresh", "warm")}
    for case in GPU_CASES.split(","):
        off = runs["off"][case]
        assert runs["fresh"][case]["kernels"] == off["kernels"], case
        assert runs["warm"][case]["kernels"] == off["kernels"], case
        assert runs["warm"][case]["autotune"] == 0, case
        # steered towards the templates: the relu/add epilogues end inside a Triton one
        assert any("triton_tem" in k for k in off["kernels"][0]), (case, off["kernels"])
    fresh, warm = runs["fresh"]["stats"], runs["warm"]["stats"]
    assert fresh["errors"] == 0 and warm["errors"] == 0
    assert warm["misses"] == 0 and warm["benchmarked"] == 0
    assert warm["epilogue_changed"] == 0
    # every fusion the fresh compile benchmarked is replayed warm, none benchmarked again
    assert fresh["fusions_benchmarked"] > 0, fresh
    assert warm["fusions_benchmarked"] == 0 and warm["fusions_replayed"] > 0, warm
    all_rows = list(sqlite_utils.Database(db).query("select * from epilogue_decisions"))
    benchmarks = [r for r in all_rows if json.loads(r["epilogue"]).get("kind") == KIND]
    assert benchmarks and all(json.loads(r["epilogue"])["epilogue_ms"] is not None
                              for r in benchmarks), benchmarks
    rows = [r for r in all_rows if r not in benchmarks]  # the observer's
    assert rows and all(r["decided_by"].startswith("benchmark_epilogue_fusion")
                        for r in rows), rows
    assert any(r["fused"] == 1 and r["fused_ms"] is not None for r in rows)
    deferred = [w["deferred"] for w in sqlite_utils.Database(db).query(
        "select deferred from winners")]
    assert deferred and all(d == 1 for d in deferred)


@pytest.mark.cuda
@pytest.mark.slow
def test_same_kernels_with_deferred_epilogue_choice_cuda(tmp_path: Path) -> None:
    _check(tmp_path)


@pytest.mark.rocm
@pytest.mark.slow
def test_same_kernels_with_deferred_epilogue_choice_rocm(tmp_path: Path) -> None:
    _check(tmp_path)
