"""Dynamic-shape compiles record and reuse the tuning DB (issue 13).

A Llama-style decoder block (scripts/compile_model.py ``--model llama-block``: q/k/v/o
projections, SDPA, SwiGLU MLP) with its batch and sequence dims marked dynamic is
compiled with ``max-autotune`` in two fresh processes sharing one DB (no Inductor cache
answers for either; they share only C++ builds: conftest ``isolated_env``). Each process
then runs the compiled block at two more sizes, one of them with batch 1, which
recompiles with the batch specialized (M = seq instead of M = batch*seq: other kernels,
other problems). The second process must autotune nothing and serve every GEMM from the
first one's records, with outputs equal to eager."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlite_utils

from tests.conftest import isolated_env, run_compile_model

pytestmark = pytest.mark.slow

BLOCK = ["--mode", "max-autotune", "--plugin", "--model", "llama-block", "--dynamic",
         "--batch", "2x16", "--also", "3x7,1x24"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> dict:
    root = tmp_path_factory.mktemp("dynamic_block")
    db = root / "tuning.db"
    cold = run_compile_model([*BLOCK, "--db", str(db)],
                             isolated_env(root / "cold", shared_builds))
    warm = run_compile_model([*BLOCK, "--db", str(db)],
                             isolated_env(root / "warm", shared_builds))
    return {"db": db, "cold": cold, "warm": warm}


def test_cold_process_records_the_dynamic_problems(runs: dict) -> None:
    cold = runs["cold"]
    stats = cold["stats"]
    assert stats["errors"] == 0 and stats["refused"] == 0
    assert cold["autotune_runs"] > 0 and stats["recorded"] == stats["benchmarked"] > 0
    db = sqlite_utils.Database(runs["db"])
    summaries = sorted(r["summary"] for r in db.query(
        "select p.summary from winners w join problems p on p.id = w.problem_id"))
    assert summaries and all("dynamic[" in s for s in summaries)
    # batch*seq (the first graph) and seq alone (the batch-1 recompile) are both keyed
    assert any("dynamic[M=a*b]" in s for s in summaries)
    assert any(s.endswith("dynamic[M]") for s in summaries)
    # keyed at the exact hints: 2 * 16 = 32 rows, and the batch-1 recompile's 24
    assert all(" 32x" in s for s in summaries if "M=a*b" in s)
    assert all(" 24x" in s for s in summaries if s.endswith("dynamic[M]"))
    for run in ("cold",):
        assert all(a["match"] for a in runs[run]["also"]), runs[run]["also"]


def test_second_process_autotunes_nothing_and_serves_every_gemm(runs: dict) -> None:
    warm, cold = runs["warm"], runs["cold"]
    stats = warm["stats"]
    assert warm["autotune_runs"] == 0 and stats["benchmarked"] == 0
    assert stats["misses"] == 0 and stats["stale"] == 0 and stats["errors"] == 0
    decisions = stats["decisions"]
    assert decisions and stats["dynamic_hits"] == len(decisions)
    assert all(d["source"].startswith("db:") for d in decisions)
    assert len(decisions) == len(cold["stats"]["decisions"])  # the same GEMM selections
    assert [a["size"] for a in warm["also"]] == ["3x7", "1x24"]
    assert all(a["match"] for a in warm["also"]), warm["also"]
    # the winners served are the ones the first process recorded
    db = sqlite_utils.Database(runs["db"])
    recorded = {r["problem_id"]: r["candidate_id"] for r in
                db.query("select problem_id, candidate_id from winners")}
    assert {d["problem_id"]: d["candidate_id"] for d in decisions} == recorded
