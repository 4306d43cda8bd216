"""A partial hit converges (issue 33, point 5): the exact record comes from a shipped DB
and lacks a candidate (as after a backend or config was added), so the new candidate is
benchmarked while the others are served. The served candidates' results are recorded
again with the new one in the user's DB, so the next compile is served in full, with
nothing benchmarked, whichever candidate won. Real torch.compile in fresh processes, the
shipped DB found as the package finds its own (an ``inductor_flydsl_tuning_db`` package
first on PYTHONPATH), real SQLite files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.conftest import builds_only_vars, run_for_result

pytestmark = pytest.mark.slow

COMPILE = r"""
import json, sys, torch
import torch._inductor.config as ic
import inductor_flydsl
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.freezing = True
ic.autotune_local_cache = False  # the test run's shared cache dir: no timings from it
ic.max_autotune_gemm_backends = "ATEN,CPP"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(),
                            torch.nn.Linear(96, 32)).eval()
x = torch.randn(24, 64)
with torch.no_grad():
    torch.testing.assert_close(torch.compile(model, mode="max-autotune")(x), model(x))
print("RESULT " + json.dumps(inductor_flydsl.stats()))
"""


def compile_once(db: Path, shipped_root: Path | None = None) -> dict:
    """One compile in a fresh process; Inductor's cache dir the test run's (only its C++
    builds reused: every cache that could answer in place of lowering or benchmarking
    is off)."""
    env = {**os.environ, **builds_only_vars(),
           "INDUCTOR_FLYDSL_SHIPPED": "0" if shipped_root is None else "1"}
    if shipped_root is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(shipped_root), *filter(None, [os.environ.get("PYTHONPATH")])])
    return run_for_result([sys.executable, "-c", COMPILE, str(db)], env, 600, "compile")


def _drop_one_loser_per_problem(db: Path) -> int:
    """Forget one non-winning candidate of each problem: the record no longer knows it."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "select r.problem_id, min(r.candidate_id) from results r join winners w on"
            " w.problem_id = r.problem_id and w.device_id = r.device_id and"
            " w.software_id = r.software_id where r.candidate_id != w.candidate_id"
            " group by r.problem_id").fetchall()
        for problem_id, candidate in rows:
            conn.execute("delete from results where problem_id = ? and candidate_id = ?",
                         [problem_id, candidate])
        conn.commit()
        return len(rows)
    finally:
        conn.close()


def test_partial_hit_is_served_in_full_next_time(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded.db"
    first = compile_once(recorded)
    assert first["recorded"] == 2 and first["errors"] == 0
    dropped = _drop_one_loser_per_problem(recorded)
    assert dropped == 2
    package = tmp_path / "shipped" / "inductor_flydsl_tuning_db"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(recorded, package / "test.db")

    user = tmp_path / "user.db"
    second = compile_once(user, package.parent)
    assert (second["partial_hits"], second["benchmarked"], second["recorded"]) == (2, 2, 2)
    third = compile_once(user, package.parent)
    assert (third["hits"], third["partial_hits"], third["benchmarked"]) == (2, 0, 0)
    # the served candidates' rows say where they came from
    conn = sqlite3.connect(user)
    try:
        notes = [e for (e,) in conn.execute("select error from results where status = 'ok'")]
    finally:
        conn.close()
    assert sum(n.startswith("carried from ") and "test.db" in n for n in notes) >= 2
