"""A DB recorded with one torch release, then compiled with another: priors, not misses.

Two real torch releases: the other one is a Python environment named by
``INDUCTOR_FLYDSL_OTHER_PYTHON``. ``scripts/install.sh`` makes ``.venv-torch-next`` with
the newest torch installable here (2.14.1), and ``scripts/run_tests.sh`` runs this test
there with the variable naming the main environment (torch 2.13.0): recorded with the
older release, compiled with the newer, as an upgrade goes. Every compile is real
``torch.compile(mode="max-autotune")`` in its own process (only the C++ builds of the test run
shared), on a real SQLite file.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import builds_only_vars, run_for_result

ENV_OTHER = "INDUCTOR_FLYDSL_OTHER_PYTHON"

COMPILE = r"""
import json, sys, torch
import torch._inductor.config as ic
import inductor_flydsl
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.freezing = True
ic.autotune_local_cache = False  # the test run's shared cache dir: no timings from it
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 32)).eval()
x = torch.randn(16, 64)
with torch.no_grad():
    y = torch.compile(model, mode="max-autotune")(x)
    torch.testing.assert_close(y, model(x))
print("RESULT " + json.dumps({"torch": torch.__version__, "stats": inductor_flydsl.stats()}))
"""


def other_python() -> str:
    path = os.environ.get(ENV_OTHER, "")
    if not path:  # scripts/run_tests.sh sets it (and fails in CI without the second env)
        pytest.skip(f"{ENV_OTHER} not set: no second torch release to upgrade from")
    return path


def compile_with(python: str, db: Path, **env: str) -> dict:
    """One compile in a fresh process of ``python``; Inductor's cache dir the test run's
    (only its C++ builds reused: every cache that could answer in place of lowering or
    benchmarking is off; the builds of two torch releases never share a key)."""
    return run_for_result(
        [python, "-c", COMPILE, str(db)],
        {**os.environ, **builds_only_vars(), "INDUCTOR_FLYDSL_SHIPPED": "0",
         "INDUCTOR_FLYDSL_PRIORS": "1", **env}, 1200, f"{python} compile")


def test_upgraded_torch_benchmarks_the_priors_short_list_then_serves_exact(
        tmp_path: Path) -> None:
    other = other_python()
    db = tmp_path / "t.db"
    old = compile_with(other, db)
    if old["torch"] == torch.__version__:
        pytest.skip(f"{other} has the same torch ({old['torch']})")
    assert old["stats"]["recorded"] == 2 and old["stats"]["prior_hits"] == 0
    untouched = tmp_path / "untouched.db"
    shutil.copy(db, untouched)

    # the upgraded compile: no exact winner (the ATen and C++ rows depend on torch), so
    # each GEMM benchmarks the prior's short list and records exact rows for this torch
    new = compile_with(sys.executable, db)["stats"]
    assert (new["hits"], new["misses"], new["prior_hits"]) == (0, 2, 2)
    assert new["benchmarked"] == 2 and new["recorded"] == 2 and new["errors"] == 0
    assert all(d["source"] == f"prior:{db}" for d in new["decisions"])
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "select s.torch, w.prior from winners w join software s on s.id = w.software_id"
            ).fetchall()
    finally:
        conn.close()
    by_torch = {t: p for t, p in rows}
    assert set(by_torch) == {old["torch"], torch.__version__}
    assert by_torch[old["torch"]] is None  # a full autotune
    for t, prior in rows:
        if t == torch.__version__:
            recorded = json.loads(prior)
            assert recorded["software"]["torch"] == old["torch"] and recorded["same_device"]
            assert any("torch" in change for change in recorded["changes"])

    # the next compile with this torch is served exactly: nothing benchmarked
    again = compile_with(sys.executable, db)["stats"]
    assert (again["hits"], again["prior_hits"], again["benchmarked"]) == (2, 0, 0)

    # db show names the record that served as the prior and its versions
    shown = subprocess.run([sys.executable, "-m", "inductor_flydsl", "db", "show",
                            conn_first_problem(db), "--db", str(db), "--json"],
                           capture_output=True, text=True, check=True)
    (detail,) = json.loads(shown.stdout)
    records = {r["software"]["torch"]: r for r in detail["records"]}
    assert not records[old["torch"]]["exact"]
    assert f"aten: torch {old['torch']} -> {torch.__version__}" in \
        records[old["torch"]]["changes"]
    assert records[torch.__version__]["exact"]
    assert records[torch.__version__]["chosen_from_prior"]["software"]["torch"] == \
        old["torch"]

    # priors off (the default): the upgraded compile autotunes everything
    off = compile_with(sys.executable, untouched, INDUCTOR_FLYDSL_PRIORS="0")["stats"]
    assert (off["prior_hits"], off["misses"], off["benchmarked"]) == (0, 2, 2)


def conn_first_problem(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("select problem_id from winners order by problem_id"
                            ).fetchone()[0]
    finally:
        conn.close()
