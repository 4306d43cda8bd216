"""The user's DB over the shipped, read-only DBs: the user's winner wins on conflict."""

from __future__ import annotations

from pathlib import Path

from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.pack import pack_db
from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import current_software, template_source_hash
from inductor_flydsl.settings import Mode, Settings

DEVICE = DeviceInfo(kind="rocm", arch="gfx950", name="MI355X", compute_units=256)
# what a FlyDSL candidate records: its template and that template's source hash
FLYDSL = {"template": "gemm_dense", "template_hash": template_source_hash("gemm_dense")}


def _db_with(path: Path, m: int, candidate: str) -> None:
    db = TuningDB.open(path, writable=True)
    problem = synthetic_problem("mm", m, 4096, 4096, dtype="bfloat16", layout="nt")
    db.record_selection(DEVICE, current_software(), problem,
                        [CandidateResult(candidate, "flydsl", candidate, FLYDSL, 1.0)])
    db.close()


def test_user_db_wins_and_shipped_fills_gaps(tmp_path: Path) -> None:
    shipped_dir = tmp_path / "shipped"
    shipped_dir.mkdir()
    shipped = shipped_dir / "winners.db"
    _db_with(shipped, 8, "shipped-8")
    _db_with(shipped, 16, "shipped-16")
    assert pack_db(shipped) == []
    shipped_dir.chmod(0o555)
    user = tmp_path / "user.db"
    _db_with(user, 8, "user-8")
    layered = LayeredTuningDB(Settings(db_path=user, mode=Mode.READWRITE, use_shipped=True),
                              shipped_paths=[shipped])
    software = current_software()

    def lookup(m: int) -> tuple[str, str] | None:
        w = layered.lookup(DEVICE, software,
                           synthetic_problem("mm", m, 4096, 4096, dtype="bfloat16",
                                             layout="nt"))
        return (w.candidate_id, Path(w.source).name) if w else None

    assert lookup(8) == ("user-8", "user.db")
    assert lookup(16) == ("shipped-16", "winners.db")
    assert lookup(32) is None
    layered.close()
    shipped_dir.chmod(0o755)
    assert sorted(p.name for p in shipped_dir.iterdir()) == ["winners.db"]  # no side files
    off = LayeredTuningDB(Settings(db_path=user, mode=Mode.READWRITE, use_shipped=False),
                          shipped_paths=[shipped])
    assert off.lookup(DEVICE, software, synthetic_problem(
        "mm", 16, 4096, 4096, dtype="bfloat16", layout="nt")) is None
    off.close()


def test_pack_then_write_returns_to_wal(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    _db_with(path, 8, "a")
    assert pack_db(path) == []
    import sqlite3

    conn = sqlite3.connect(path)
    assert conn.execute("pragma journal_mode").fetchone()[0] == "delete"
    conn.close()
    _db_with(path, 16, "b")  # a writer switches it back to WAL
    conn = sqlite3.connect(path)
    assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert conn.execute("select count(*) from winners").fetchone()[0] == 2
    conn.close()


def test_partial_autotune_keeps_the_faster_winner(tmp_path: Path) -> None:
    """A later autotune over fewer candidates (a backend turned off) does not replace a
    faster winner recorded before for the same device, software and problem."""
    db = TuningDB.open(tmp_path / "t.db", writable=True)
    problem = synthetic_problem("mm", 64, 4096, 4096, dtype="bfloat16", layout="nt")
    software = current_software()
    db.record_selection(DEVICE, software, problem,
                        [CandidateResult("fast", "flydsl", "fast", FLYDSL, 1.0),
                         CandidateResult("aten", "aten", "aten", {}, 2.0)])
    db.record_selection(DEVICE, software, problem,
                        [CandidateResult("aten", "aten", "aten", {}, 1.9)])
    winner = db.lookup(DEVICE, software, problem.id)
    assert winner is not None and winner.candidate_id == "fast"
    db.record_selection(DEVICE, software, problem,
                        [CandidateResult("aten", "aten", "aten", {}, 0.5)])
    assert db.lookup(DEVICE, software, problem.id).candidate_id == "aten"
    db.close()
