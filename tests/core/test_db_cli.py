"""``inductor-flydsl db ...`` on real DB files, through real subprocesses."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from inductor_flydsl.db.store import STATUS_FAILED, CandidateResult, TuningDB
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import current_software

DEVICE = DeviceInfo(kind="rocm", arch="gfx950", name="AMD Instinct MI355X", compute_units=256)
OTHER_DEVICE = DeviceInfo(kind="cuda", arch="sm_90", name="NVIDIA H200", compute_units=132)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inductor_flydsl", *args],
                          capture_output=True, text=True, check=check)


def make_db(path: Path, entries: list[tuple], tool: str = "test") -> None:
    """entries: (device, M, {candidate: ms or None for failed})"""
    db = TuningDB.open(path, writable=True, tool=tool)
    for device, m, times in entries:
        problem = synthetic_problem("mm", m, 4096, 4096, dtype="bfloat16", layout="nt")
        results = [CandidateResult(c, c.split("-")[0], c, {"c": c}, t) if t is not None else
                   CandidateResult(c, c.split("-")[0], c, {"c": c}, None, STATUS_FAILED, "boom")
                   for c, t in times.items()]
        db.record_selection(device, current_software(), problem, results)
    db.record_miss(DEVICE, current_software(),
                   synthetic_problem("mm", 3, 4096, 4096, dtype="bfloat16", layout="nt"))
    db.close()


@pytest.fixture
def two_dbs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, [(DEVICE, 8, {"aten-mm": 2.0, "flydsl-x": 1.5}),
                (DEVICE, 16, {"aten-mm": 2.0, "flydsl-y": 1.0}),
                (DEVICE, 32, {"aten-mm": 3.0, "triton-t": 2.0, "flydsl-z": None})])
    make_db(b, [(DEVICE, 8, {"aten-mm": 2.0, "flydsl-w": 1.2}),  # faster: replaces A's
                (DEVICE, 16, {"aten-mm": 2.0, "flydsl-v": 1.0}),  # tie: A keeps its own
                (DEVICE, 64, {"aten-mm": 4.0}),  # new problem
                (OTHER_DEVICE, 8, {"aten-mm": 0.5})])  # other device: separate winner
    return a, b


def test_stats_list_show_json(two_dbs: tuple[Path, Path]) -> None:
    a, _ = two_dbs
    stats = json.loads(cli("db", "stats", "--db", str(a), "--json").stdout)
    assert stats["problems"] == 3 and stats["results"] == 7 and stats["misses"] == 1
    assert stats["results_by_status"] == {"ok": 6, "failed": 1}
    assert stats["winners_by_backend"] == {"flydsl": 2, "triton": 1}
    rows = json.loads(cli("db", "list", "--db", str(a), "--json", "--op", "mm",
                          "--device", "gfx950", "--shape", "16x4096x4096").stdout)
    assert [(r["winner"], r["time_ms"], r["candidates"]) for r in rows] == [("flydsl-y", 1.0, 2)]
    assert json.loads(cli("db", "list", "--db", str(a), "--json", "--device", "sm_90").stdout) == []
    shown = json.loads(cli("db", "show", "--db", str(a), "32x4096", "--json").stdout)
    statuses = {r["name"]: (r["status"], r["is_winner"]) for r in shown[0]["results"]}
    assert statuses == {"triton-t": ("ok", 1), "aten-mm": ("ok", 0), "flydsl-z": ("failed", 0)}
    assert shown[0]["bucket"]["bucket_m"] == 32
    bad = cli("db", "list", "--db", str(a), "--shape", "8x8", check=False)
    assert bad.returncode == 2 and "MxNxK" in bad.stderr


def test_export_csv_has_every_result(two_dbs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = two_dbs
    out = tmp_path / "all.csv"
    cli("db", "export", "--db", str(a), "--csv", str(out))
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 7
    assert {r["name"] for r in rows if r["is_winner"] == "1"} == {"flydsl-x", "flydsl-y",
                                                                   "triton-t"}
    assert all(r["arch"] == "gfx950" and r["torch"] for r in rows)


def test_merge_rule_faster_wins_ties_keep_dst(two_dbs: tuple[Path, Path]) -> None:
    a, b = two_dbs
    report = json.loads(cli("db", "merge", str(b), "--into", str(a), "--json").stdout)
    assert report["winners_replaced"] == 1 and report["winners_kept"] == 1
    assert report["winners_added"] == 2
    db = sqlite_utils.Database(a)
    winners = {(r["arch"], r["m"]): r["winner"] for r in db.query(
        "select d.arch, p.m, w.name as winner from winners w join problems p on"
        " p.id = w.problem_id join devices d on d.id = w.device_id")}
    assert winners == {("gfx950", 8): "flydsl-w", ("gfx950", 16): "flydsl-y",
                       ("gfx950", 32): "triton-t", ("gfx950", 64): "aten-mm",
                       ("sm_90", 8): "aten-mm"}
    assert db.table("results").count == 7 + 4  # DST rows kept, SRC's 4 new ones added
    misses = list(db.query("select count from misses"))
    assert misses == [{"count": 2}]
    provenance = [r["merged_from"] for r in db.query("select merged_from from runs")]
    assert any(p.startswith(f"{b}#run") for p in provenance)
    assert cli("db", "verify", str(a)).returncode == 0


def test_merge_refuses_bad_source_and_leaves_dst(two_dbs: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    a, b = two_dbs
    conn = sqlite3.connect(b)
    conn.execute("update results set status = 'weird'")
    conn.commit()
    conn.close()
    before = a.read_bytes()
    proc = cli("db", "merge", str(b), "--into", str(a), check=False)
    assert proc.returncode == 2 and "fails verification" in proc.stderr
    assert a.read_bytes() == before
    junk = tmp_path / "junk.db"
    junk.write_text("not a db")
    proc = cli("db", "merge", str(junk), "--into", str(a), check=False)
    assert proc.returncode == 2 and "not an SQLite database" in proc.stderr


def test_verify_finds_row_problems(two_dbs: tuple[Path, Path]) -> None:
    a, _ = two_dbs
    assert cli("db", "verify", str(a)).returncode == 0
    conn = sqlite3.connect(a)
    conn.execute("update results set time_ms = -1 where name = 'aten-mm'")
    conn.execute("update results set config = '[1' where name = 'flydsl-x'")
    conn.execute("update problems set spec = '{}' where m = 16")
    conn.execute("update winners set candidate_id = 'ghost' where candidate_id = 'flydsl-y'")
    conn.commit()
    conn.close()
    proc = cli("db", "verify", str(a), check=False)
    assert proc.returncode == 1
    for needle in ("bad time_ms", "not a JSON object", "bad spec", "no ok result"):
        assert needle in proc.stdout, needle


def test_missing_db_is_a_clear_error(tmp_path: Path) -> None:
    proc = cli("db", "stats", "--db", str(tmp_path / "nope.db"), check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
