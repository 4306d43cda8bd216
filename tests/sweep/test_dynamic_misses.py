"""``sweep --from-misses`` tunes a dynamic-shape miss into exactly the record a dynamic
compile looks up (issue 13): real compiles in fresh processes, a real sweep worker, real
SQLite files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from tests.sweep.conftest import run_cli, sweep_env, sweep_json

pytestmark = pytest.mark.slow

# A frozen bias-free linear (what the CPU sweep's op=linear compiles), batch dynamic.
USER_COMPILE = r"""
import json, sys, torch, torch._inductor.config as ic
import inductor_flydsl
ic.freezing = True
inductor_flydsl.enable(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Linear(64, 48, bias=False).eval()
with torch.no_grad():
    compiled = torch.compile(model, mode="max-autotune", dynamic=True)
    for batch in (16, 9):
        x = torch.randn(batch, 64)
        torch.testing.assert_close(compiled(x), model(x))
from torch._dynamo.utils import counters
print(json.dumps({"stats": inductor_flydsl.stats(),
                  "autotune_runs": counters["inductor"]["select_algorithm_autotune"]}))
"""


def user_compile(db: Path, root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", USER_COMPILE, str(db)], env=sweep_env(root),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sweep_from_a_dynamic_miss_records_what_the_dynamic_compile_looks_up(
        tmp_path: Path) -> None:
    first = tmp_path / "first.db"
    cold = user_compile(first, tmp_path / "cold")
    assert cold["stats"]["recorded"] == 1 and cold["autotune_runs"] == 1
    db = sqlite_utils.Database(first)
    problem = next(iter(db.query("select id, summary, spec from problems")))
    assert problem["summary"].endswith("dynamic[M]")
    assert json.loads(problem["spec"])["symbolic"]["exprs"] == ["a", "a"]
    db.close()
    # Keep only the miss: the sweep must reproduce the key from it, not from the results.
    swept = tmp_path / "swept.db"
    shutil.copy(first, swept)
    db = sqlite_utils.Database(swept)
    for table in ("winners", "results"):
        db.execute(f"delete from {table}")
    db.conn.commit()
    db.close()
    env = sweep_env(tmp_path / "sweep")
    listed = run_cli(["sweep", "--from-misses", "--db", str(swept), "--list"], env)
    assert listed.returncode == 0, listed.stderr
    # listed by the id and name the DB gives the problem
    assert listed.stdout.strip().splitlines()[-1] == f"{problem['id']}  {problem['summary']}"
    proc = run_cli(["sweep", "--from-misses", "--db", str(swept), "--json"], env)
    summary = sweep_json(proc)
    assert proc.returncode == 0 and summary["done"] == 1, summary
    db = sqlite_utils.Database(swept)
    winners = [r["problem_id"] for r in db.query("select problem_id from winners")]
    db.close()
    assert winners == [problem["id"]], "the sweep recorded the dynamic compile's own key"
    warm = user_compile(swept, tmp_path / "warm")
    assert warm["autotune_runs"] == 0 and warm["stats"]["dynamic_hits"] == 1
    assert warm["stats"]["misses"] == 0
