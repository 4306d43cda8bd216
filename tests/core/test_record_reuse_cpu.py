"""CPU end to end: a first process records every GEMM autotune, a second one (same DB;
no Inductor cache answers for it, only C++ builds are shared: conftest ``isolated_env``)
reuses the winners without benchmarking and gets the same outputs. Real
torch.compile(mode="max-autotune") with freezing, real SQLite files."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
import sqlite_utils
import torch

from tests.conftest import isolated_env, run_compile_model

MODEL = ["--dims", "64,128,96,48", "--batch", "16"]  # 3 GEMMs of distinct shapes


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> dict:
    root = tmp_path_factory.mktemp("cold")
    db = root / "tuning.db"
    result = run_compile_model(["--mode", "max-autotune", "--plugin", "--db", str(db),
                                "--out", str(root / "y.pt"), *MODEL],
                               isolated_env(root, shared_builds))
    return {"root": root, "db": db, "result": result, "y": torch.load(root / "y.pt")}


def test_cold_compile_records_every_candidate(cold: dict) -> None:
    stats = cold["result"]["stats"]
    assert stats["errors"] == 0
    assert stats["hits"] == 0 and stats["misses"] == 3
    assert stats["recorded"] == 3 and stats["benchmarked"] == 3
    db = sqlite_utils.Database(cold["db"])
    winners = list(db.query("select * from winners"))
    assert len(winners) == 3
    for w in winners:
        results = list(db.query("select * from results where problem_id = ?",
                                [w["problem_id"]]))
        assert len(results) >= 2, "every candidate is stored, losers included"
        fastest = min((r for r in results if r["status"] == "ok"), key=lambda r: r["time_ms"])
        assert fastest["candidate_id"] == w["candidate_id"]
        assert {r["backend"] for r in results} >= {"aten"}
    problems = {r["op"] for r in db.query("select op from problems")}
    assert problems == {"packed_linear"}
    misses = list(db.query("select count from misses"))
    assert len(misses) == 3 and all(m["count"] == 1 for m in misses)
    runs = list(db.query("select * from runs"))
    assert len(runs) == 1 and runs[0]["tool"] == "torch.compile" and runs[0]["host"]


def test_warm_process_reuses_winners_without_benchmarking(cold: dict, tmp_path: Path,
                                                          shared_builds: Path) -> None:
    warm = run_compile_model(["--mode", "max-autotune", "--plugin", "--db", str(cold["db"]),
                              "--out", str(tmp_path / "y.pt"), *MODEL],
                             isolated_env(tmp_path, shared_builds))
    stats = warm["stats"]
    assert stats["hits"] == 3 and stats["misses"] == 0 and stats["errors"] == 0
    assert stats["benchmarked"] == 0 and warm["autotune_runs"] == 0
    db = sqlite_utils.Database(cold["db"])
    recorded = {w["problem_id"]: w["candidate_id"] for w in db.query("select * from winners")}
    chosen = {d["problem_id"]: d["candidate_id"] for d in stats["decisions"]}
    assert chosen == recorded
    assert all(d["source"] == f"db:{cold['db']}" for d in stats["decisions"])
    assert torch.equal(torch.load(tmp_path / "y.pt"), cold["y"])


@pytest.mark.slow  # > 20 s on 2 cores
def test_readonly_mode_reuses_and_never_writes(cold: dict, tmp_path: Path,
                                               shared_builds: Path) -> None:
    db_copy = tmp_path / "copy.db"
    shutil.copy(cold["db"], db_copy)
    before = _sha(db_copy)
    # a shape the DB lacks (batch 8) and the recorded ones (batch 16) in two runs
    for batch in ("16", "8"):
        result = run_compile_model(
            ["--mode", "max-autotune", "--plugin", "--db", str(db_copy), "--db-mode",
             "readonly", "--dims", "64,128,96,48", "--batch", batch],
            isolated_env(tmp_path / batch, shared_builds))
        assert result["stats"]["errors"] == 0
        if batch == "16":
            assert result["stats"]["hits"] == 3
        else:
            assert result["stats"]["misses"] == 3 and result["stats"]["recorded"] == 0
    assert _sha(db_copy) == before


def test_readonly_db_on_readonly_mount(cold: dict, tmp_path: Path,
                                       shared_builds: Path) -> None:
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    shutil.copy(cold["db"], ro_dir / "tuning.db")
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(ro_dir), str(ro_dir)],
                             capture_output=True, check=False).returncode == 0
    if not mounted:
        ro_dir.chmod(0o555)
        if (ro_dir / "probe").parent.stat().st_mode & 0o200 and not _cannot_write(ro_dir):
            pytest.skip("cannot make a read-only directory here (no mount, running as root)")
    try:
        result = run_compile_model(["--mode", "max-autotune", "--plugin", "--db",
                                    str(ro_dir / "tuning.db"), "--db-mode", "readonly",
                                    *MODEL], isolated_env(tmp_path, shared_builds))
        assert result["stats"]["hits"] == 3 and result["stats"]["errors"] == 0
        assert "TuningDBWarning" not in result["stderr"]
    finally:
        if mounted:
            subprocess.run(["umount", str(ro_dir)], check=False)
        else:
            ro_dir.chmod(0o755)


def _cannot_write(directory: Path) -> bool:
    try:
        (directory / ".probe").write_text("x")
    except OSError:
        return True
    (directory / ".probe").unlink()
    return False


@pytest.mark.slow  # > 20 s on 2 cores
def test_stale_record_falls_back_to_autotuning(cold: dict, tmp_path: Path,
                                               shared_builds: Path) -> None:
    """A record whose candidates are all gone (say, renamed by a new plugin version) serves
    nothing: that selection is benchmarked and recorded again, and the next compile is
    served in full."""
    db_copy = tmp_path / "stale.db"
    shutil.copy(cold["db"], db_copy)
    db = sqlite_utils.Database(db_copy)
    first = next(iter(db.query("select * from winners limit 1")))
    for table in ("results", "winners"):
        db.execute(f"update {table} set candidate_id = 'gone-' || candidate_id"
                   " where problem_id = ?", [first["problem_id"]])
    db.conn.commit()
    db.close()
    result = run_compile_model(["--mode", "max-autotune", "--plugin", "--db", str(db_copy),
                                *MODEL], isolated_env(tmp_path, shared_builds))
    stats = result["stats"]
    assert stats["stale"] == 1 and stats["hits"] == 2 and stats["benchmarked"] == 1
    again = run_compile_model(["--mode", "max-autotune", "--plugin", "--db", str(db_copy),
                               *MODEL], isolated_env(tmp_path, shared_builds))["stats"]
    assert again["stale"] == 0 and again["hits"] == 3 and again["benchmarked"] == 0


def test_unseen_m_is_served_from_its_bucket(cold: dict, tmp_path: Path,
                                            shared_builds: Path) -> None:
    """Batch 12 was never tuned; its bucket (M=16) was: with buckets turned on (opt-in),
    the bucket's winners are reused."""
    db_copy = tmp_path / "bucket.db"
    shutil.copy(cold["db"], db_copy)
    result = run_compile_model(["--mode", "max-autotune", "--plugin", "--db", str(db_copy),
                                "--dims", "64,128,96,48", "--batch", "12"],
                               isolated_env(tmp_path, shared_builds,
                                            INDUCTOR_FLYDSL_BUCKETS="1"))
    stats = result["stats"]
    assert stats["bucket_hits"] == 3 and stats["misses"] == 3 and stats["hits"] == 0
    assert stats["benchmarked"] == 0 and result["autotune_runs"] == 0
    assert all(d["source"].startswith("db-bucket:M=16:") for d in stats["decisions"])
    db = sqlite_utils.Database(db_copy)
    # the exact problems are recorded as misses, for a later sweep to tune them
    assert db.table("misses").count == 6
