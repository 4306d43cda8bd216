"""Schema migrations in place (1 -> 2 -> 3 -> 4 -> 5) of a real version-1 DB, and
old-file reads.

The version-1 file is ``tuning_db/cpu_smoke_winners.db``: written by the code of schema
version 1 (the cpu-smoke sweep, torch 2.13.0+cpu, an older template source) and shipped as
it is, so it is a real old file.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.migrations import MIGRATIONS, backup_path
from inductor_flydsl.db.open import open_db
from inductor_flydsl.db.schema import SCHEMA_VERSION
from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.db.verify import verify_db
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo
from inductor_flydsl.settings import Mode, Settings

REPO = Path(__file__).resolve().parents[2]
SHIPPED_V1 = REPO / "tuning_db" / "cpu_smoke_winners.db"


def _version(path: Path) -> int:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("select value from meta where key = 'schema_version'")
                   .fetchone()[0])
    finally:
        conn.close()


def _winners(path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("select device_id, software_id, problem_id, candidate_id,"
                            " time_ms from winners order by problem_id").fetchall()
    finally:
        conn.close()


def _keys(path: Path, software_id: str) -> tuple[DeviceInfo, SoftwareInfo]:
    """The device and software rows of the first winner, as the plugin describes them."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        kind, arch, name, cus = conn.execute(
            "select kind, arch, name, compute_units from devices").fetchone()
        torch, triton, flydsl, templates = conn.execute(
            "select torch, triton, flydsl, templates from software where id = ?",
            [software_id]).fetchone()
    finally:
        conn.close()
    return DeviceInfo(kind, arch, name, cus), SoftwareInfo(torch, triton, flydsl, templates)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_steps_form_one_chain_to_the_current_version() -> None:
    versions = [m.to_version for m in MIGRATIONS]
    assert versions == list(range(2, SCHEMA_VERSION + 1))


def test_writer_migrates_a_v1_file_in_place_and_keeps_a_backup(tmp_path: Path) -> None:
    db_path = tmp_path / "old.db"
    shutil.copy(SHIPPED_V1, db_path)
    assert _version(db_path) == 1
    before = _winners(db_path)
    original = _sha(db_path)
    assert before, "the shipped v1 DB has winners"

    db = TuningDB.open(db_path, writable=True)
    try:
        assert db.has_confidence
        assert {"blas"} <= set(db.db.table("software").columns_dict)  # v3
        assert {"prior", "deferred"} <= set(db.db.table("winners").columns_dict)
        assert db.has_measured and db.has_epilogues  # v4
        assert verify_db(db.db) == []
        device_id, software_id, problem_id, candidate_id, time_ms = before[0]
        device, software = _keys(db_path, software_id)
        assert device.id == device_id and software.id == software_id  # ids unchanged
        winner = db.lookup(device, software, problem_id)
        assert (winner.candidate_id, winner.time_ms) == (candidate_id, time_ms)
        assert winner.confidence is None  # recorded before spreads existed: unknown
    finally:
        db.close()
    assert _version(db_path) == SCHEMA_VERSION
    assert _winners(db_path) == before
    backup = backup_path(db_path, 1)
    assert _sha(backup) == original  # the untouched version-1 file, byte for byte
    assert _version(backup) == 1

    # a second writer finds it current: nothing migrated again, the backup is not replaced
    open_db(db_path, writable=True).close()
    assert _sha(backup) == original
    assert sorted(p.name for p in tmp_path.iterdir() if ".bak" in p.name) == [backup.name]


def test_read_only_open_of_a_v1_file_reads_it_without_changing_it(tmp_path: Path) -> None:
    shipped_dir = tmp_path / "shipped"
    shipped_dir.mkdir()
    v1 = shipped_dir / "winners.db"
    shutil.copy(SHIPPED_V1, v1)
    original = _sha(v1)
    shipped_dir.chmod(0o555)
    try:
        layered = LayeredTuningDB(Settings(db_path=tmp_path / "user.db", mode=Mode.READONLY,
                                           use_shipped=True), shipped_paths=[v1])
        (db,) = layered.shipped_dbs()
        assert not db.has_confidence and not db.has_measured and not db.has_epilogues
        assert db.epilogue_decisions("any") == []
        _, software_id, problem_id, candidate_id, _ = _winners(v1)[0]
        device, software = _keys(v1, software_id)
        winner = db.lookup(device, software, problem_id)
        assert winner is not None and winner.candidate_id == candidate_id
        assert winner.confidence is None and winner.repeats is None
        layered.close()
    finally:
        shipped_dir.chmod(0o755)
    assert _sha(v1) == original
    assert _version(v1) == 1
    assert not backup_path(v1, 1).exists()


def test_writer_migrates_a_v2_file_keeping_a_v2_backup(tmp_path: Path) -> None:
    """A version-2 file (the v1 file after the v2 step alone, as the code of schema
    version 2 left it) gains the v3 and v4 columns and tables; its rows and ids are
    untouched."""
    db_path = tmp_path / "v2.db"
    shutil.copy(SHIPPED_V1, db_path)
    conn = sqlite3.connect(db_path)
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    MIGRATIONS[0].step(db)
    db.execute("update meta set value = '2' where key = 'schema_version'")
    conn.commit()
    conn.close()
    before, v2 = _winners(db_path), _sha(db_path)
    TuningDB.open(db_path, writable=True).close()
    assert _version(db_path) == SCHEMA_VERSION == 5
    assert _winners(db_path) == before
    assert _sha(backup_path(db_path, 2)) == v2


def _as_v4(db_path: Path, *, short_lists: bool) -> None:
    """The v1 file after steps 2-4 only, as the code of schema version 4 left a file: its
    compile_catalog without the emulator's and the loop's columns (compile-check added
    them on write then), optionally with the predicted_short_lists table that
    build_predicted_db.py created itself."""
    import sqlite_utils

    conn = sqlite3.connect(db_path)
    db = sqlite_utils.Database(conn)
    for migration in MIGRATIONS[:3]:
        migration.step(db)
    db.execute("update meta set value = '4' where key = 'schema_version'")
    if short_lists:
        db.table("predicted_short_lists").create(
            {"device": str, "problem_id": str, "rank": int, "config": str},
            pk=("device", "problem_id", "rank"))
        db.table("predicted_short_lists").insert(
            {"device": "MI355X", "problem_id": "p", "rank": 1, "config": "{}"})
    conn.commit()
    conn.close()


def test_writer_migrates_a_v4_file_to_the_declared_catalog_and_short_lists(
        tmp_path: Path) -> None:
    """Version 5 declares compile_catalog's later columns and predicted_short_lists: a
    version-4 file gains both, keeps its rows, and the catalog and short-list writers
    (db/catalog.py, db/short_lists.py) then write without adding anything themselves."""
    from inductor_flydsl.db.catalog import CatalogStore
    from inductor_flydsl.db.schema import COMPILE_CATALOG_V5_COLUMNS, PREDICTED_SHORT_LISTS
    from inductor_flydsl.db.short_lists import read_all, write_rows
    from inductor_flydsl.problems.keys import stable_id

    for short_lists in (False, True):
        db_path = tmp_path / f"v4-{short_lists}.db"
        shutil.copy(SHIPPED_V1, db_path)
        _as_v4(db_path, short_lists=short_lists)
        assert not set(COMPILE_CATALOG_V5_COLUMNS) & set(
            sqlite_utils_columns(db_path, "compile_catalog"))
        before, v4 = _winners(db_path), _sha(db_path)
        store = CatalogStore(db_path)  # a writer: migrates
        try:
            store.write(lambda run_id: [{
                "arch": "gfx950", "template": "t", "template_hash": "h", "config_id": stable_id({}),
                "config": "{}", "op": "mm", "dtype": "bf16", "layout": "nt",
                "flydsl": "0.5", "ok": 1, "run_id": run_id, "loop_found": 1,
                "loop_cycles": 12.5}])
        finally:
            store.close()
        assert _version(db_path) == SCHEMA_VERSION == 5
        assert _winners(db_path) == before and _sha(backup_path(db_path, 4)) == v4
        assert set(COMPILE_CATALOG_V5_COLUMNS) <= set(
            sqlite_utils_columns(db_path, "compile_catalog"))
        assert set(PREDICTED_SHORT_LISTS[0]) <= set(
            sqlite_utils_columns(db_path, "predicted_short_lists"))
        kept = [r["problem_id"] for r in read_all(db_path)]
        assert kept == (["p"] if short_lists else [])
        write_rows(db_path, [{"device": "MI355X", "problem_id": "q", "rank": 1,
                              "config": "{}", "kind": "predicted", "predicted_us": 3.0}])
        assert sorted(r["problem_id"] for r in read_all(db_path)) == sorted([*kept, "q"])
        check = open_db(db_path, writable=False)
        try:
            assert verify_db(check) == []
        finally:
            check.close()


def sqlite_utils_columns(path: Path, table: str) -> list[str]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [row[1] for row in conn.execute(f"pragma table_info({table})")]
    finally:
        conn.close()


def test_an_undeclared_catalog_column_is_refused(tmp_path: Path) -> None:
    from inductor_flydsl.db.catalog import CatalogStore

    store = CatalogStore(tmp_path / "c.db")
    try:
        with pytest.raises(ValueError, match="compile_catalog has no column new_metric"):
            store.write(lambda run_id: [{"arch": "gfx950", "new_metric": 1}])
    finally:
        store.close()


def test_a_backup_keeps_what_only_the_wal_holds(tmp_path: Path) -> None:
    """A version-4 file whose last commit is still in its WAL (another process has it
    open, nothing checkpointed): the writer's backup is a snapshot with that commit, taken
    by the writer's own connection (``VACUUM INTO``), at version 4; the file migrates."""
    db_path = tmp_path / "wal-v4.db"
    shutil.copy(SHIPPED_V1, db_path)
    _as_v4(db_path, short_lists=False)
    other = sqlite3.connect(db_path)  # the other process's connection, kept open
    try:
        other.execute("pragma journal_mode=wal")
        other.execute("pragma wal_autocheckpoint=0")
        other.execute("insert into meta (key, value) values ('only_in_wal', 'yes')")
        other.commit()
        assert db_path.with_name(db_path.name + "-wal").stat().st_size > 0
        TuningDB.open(db_path, writable=True).close()
    finally:
        other.close()
    backup = backup_path(db_path, 4)
    assert _version(backup) == 4 and _version(db_path) == SCHEMA_VERSION
    conn = sqlite3.connect(f"{backup.resolve().as_uri()}?mode=ro", uri=True)
    try:
        assert conn.execute("select value from meta where key = 'only_in_wal'"
                            ).fetchone() == ("yes",)
    finally:
        conn.close()
