"""Concurrent writers: several processes recording into one DB file at once lose no rows
and never fail on "database is locked". Real processes, real SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlite_utils

from tests.conftest import (
    compile_model_command,
    isolated_env,
    result_of,
    run_compile_model,
)

WRITER = r"""
import json, sys, time, warnings
from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.store import CandidateResult
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.settings import Mode, Settings
from inductor_flydsl.provenance.software import current_software

path, worker, count, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
db = LayeredTuningDB(Settings(db_path=__import__("pathlib").Path(path), mode=Mode.READWRITE,
                              use_shipped=False))
device = DeviceInfo(kind="cpu", arch="test-arch", name="test", compute_units=1)
software = current_software()
while time.time() < start_at:  # all writers start together, on a DB nobody created yet
    time.sleep(0.001)
ok = 0
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for i in range(count):
        problem = synthetic_problem("mm", 16 * (worker + 1), 8 * (i + 1), 64, dtype="bfloat16")
        results = [CandidateResult(f"cand-{j}", "aten", f"c{j}", {"j": j}, 1.0 + j + i)
                   for j in range(3)]
        ok += db.record_selection(device, software, problem, results)
        db.record_miss(device, software, synthetic_problem("mm", 8, 8, 64 * (i + 1),
                                                           dtype="bfloat16"))
db.close()
print(json.dumps({"ok": ok, "warnings": [str(w.message) for w in caught]}))
"""


def test_four_writer_processes_lose_no_rows(tmp_path: Path) -> None:
    db_path = tmp_path / "shared" / "tuning.db"
    writers, count = 4, 120
    start_at = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), str(w), str(count),
                               str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for w in range(writers)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        report = json.loads(out.strip().splitlines()[-1])
        assert report == {"ok": count, "warnings": []}
    db = sqlite_utils.Database(db_path)
    assert db.table("winners").count == writers * count
    assert db.table("results").count == writers * count * 3
    assert db.table("runs").count == writers
    misses = list(db.query("select count from misses"))
    assert len(misses) == count and all(m["count"] == writers for m in misses)
    assert not [f for f in db_path.parent.iterdir() if f.name.endswith(".new")]


@pytest.mark.slow  # > 20 s on 2 cores
def test_four_compiling_processes_share_one_db(tmp_path: Path, shared_builds: Path) -> None:
    """Four real max-autotune compiles at once, recording into the same new DB (sharing
    only C++ builds of identical kernel sources: conftest ``isolated_env``)."""
    db = tmp_path / "tuning.db"
    shapes = ["32,48,24", "32,40,24", "32,56,24", "32,64,24"]  # 2 GEMMs each, 8 distinct
    procs = []
    for i, dims in enumerate(shapes):
        command, env = compile_model_command(
            ["--mode", "max-autotune", "--plugin", "--db", str(db), "--dims", dims,
             "--batch", "8"], isolated_env(tmp_path / f"p{i}", shared_builds))
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        result = result_of(out, err, proc.returncode, f"compile {i}")
        assert result["stats"]["errors"] == 0 and result["stats"]["recorded"] == 2
        assert "could not write" not in err and "locked" not in err
    con = sqlite_utils.Database(db)
    assert con.table("winners").count == 8
    assert con.table("runs").count == 4
    # and a fifth process reuses all of them
    warm = run_compile_model(["--mode", "max-autotune", "--plugin", "--db", str(db),
                              "--dims", shapes[2], "--batch", "8"],
                             isolated_env(tmp_path / "w", shared_builds))
    assert warm["stats"]["hits"] == 2 and warm["autotune_runs"] == 0
