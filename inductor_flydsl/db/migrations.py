"""In-place schema migrations of tuning DB files, one small step per version.

``MIGRATIONS`` lists the steps in order; step ``to_version = N`` turns a version ``N - 1``
file into a version ``N`` one. A writer that opens an older file (``open_db(...,
writable=True)``, ``db pack``) first copies it to ``<name>.v<old>.bak`` next to it (the
SQLite backup API, so a WAL's committed pages are included), then runs every pending
step in one ``BEGIN IMMEDIATE`` transaction, re-reading the version inside it so two
processes opening the same old file migrate it once. A failed step rolls back and leaves
the file as it was. Read-only opens never migrate: the read path treats the columns an
older file lacks as unknown.

To add version N: append ``Migration(N, "what changes", step)`` with a step that only
adds (columns, tables, indexes), bump ``schema.SCHEMA_VERSION`` and describe the new
columns in ``schema.TABLES`` (fresh files are created from ``TABLES`` directly).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from .schema import (
    COMPILE_CATALOG_V5_COLUMNS,
    EPILOGUE_DECISIONS,
    PREDICTED_SHORT_LISTS,
    RESULT_SPREAD_COLUMNS,
    RESULT_V4_COLUMNS,
    SCHEMA_VERSION,
    SOFTWARE_V3_COLUMNS,
    WINNER_CONFIDENCE_COLUMNS,
    WINNER_PRIOR_COLUMNS,
    WINNER_V4_COLUMNS,
)
from .transactions import write_transaction


@dataclass(frozen=True)
class Migration:
    to_version: int
    description: str
    step: Callable[[sqlite_utils.Database], None]


def _add_columns(db: sqlite_utils.Database, table: str, columns: dict[str, type]) -> None:
    existing = set(db.table(table).columns_dict)
    for name, kind in columns.items():
        if name not in existing:
            db.table(table).add_column(name, kind)


def _v2_spread_and_confidence(db: sqlite_utils.Database) -> None:
    _add_columns(db, "results", RESULT_SPREAD_COLUMNS)
    _add_columns(db, "winners", WINNER_CONFIDENCE_COLUMNS)


def _v3_validity_per_backend(db: sqlite_utils.Database) -> None:
    # Rows keep their software ids; validity is decided per backend at read time from the
    # software row and each result's config (validity.py), so nothing is rewritten.
    _add_columns(db, "software", SOFTWARE_V3_COLUMNS)
    _add_columns(db, "winners", WINNER_PRIOR_COLUMNS)


def _v4_inductor_decisions(db: sqlite_utils.Database) -> None:
    # Older rows keep their meaning: time_ms was Inductor's time or a re-measured median,
    # measured_ms stays NULL (served as time_ms), deferred NULL (not known).
    _add_columns(db, "results", RESULT_V4_COLUMNS)
    _add_columns(db, "winners", WINNER_V4_COLUMNS)
    columns, pk = EPILOGUE_DECISIONS
    table = db.table("epilogue_decisions")
    if not table.exists():
        table.create(columns, pk=pk, not_null={"epilogue", "candidate_id", "recorded_at"})
    table.create_index(["problem_id"], if_not_exists=True)


def _v5_catalog_columns_and_short_lists(db: sqlite_utils.Database) -> None:
    # Catalogs written before the emulator's and the loop analysis' columns (which
    # compile-check used to add with ``alter=True``) gain them, NULL: not measured.
    _add_columns(db, "compile_catalog", COMPILE_CATALOG_V5_COLUMNS)
    columns, pk = PREDICTED_SHORT_LISTS
    table = db.table("predicted_short_lists")
    if not table.exists():  # a v4 file written by build_predicted_db.py already has it
        table.create(columns, pk=pk)
    else:
        _add_columns(db, "predicted_short_lists", columns)


MIGRATIONS: list[Migration] = [
    Migration(2, "results: repeats, median/IQR/CV, samples, confidence; winners: "
                 "confidence, reason, spread, runner-up, machine load",
              _v2_spread_and_confidence),
    Migration(3, "software: the GPU BLAS library ATen used; winners: the prior record a "
                 "short re-tune started from", _v3_validity_per_backend),
    Migration(4, "results: the time Inductor's benchmark measured; winners: whether the "
                 "choice was deferred to epilogue fusion; epilogue_decisions: what the "
                 "scheduler finally ran for a GEMM and its epilogue",
              _v4_inductor_decisions),
    Migration(5, "compile_catalog: the emulator's and the main loop's columns (declared, "
                 "no longer added on write); predicted_short_lists: the performance model's "
                 "short lists, declared", _v5_catalog_columns_and_short_lists),
]
OLDEST_MIGRATABLE = MIGRATIONS[0].to_version - 1


class MigrationError(Exception):
    """A migration step failed; the file was left at its old version."""


def read_version(db: sqlite_utils.Database) -> int:
    rows = list(db.query("select value from meta where key = 'schema_version'"))
    return int(rows[0]["value"]) if rows else 0


def pending(version: int) -> list[Migration]:
    return [m for m in MIGRATIONS if version < m.to_version <= SCHEMA_VERSION]


def backup_path(path: Path, version: int) -> Path:
    return path.with_name(f"{path.name}.v{version}.bak")


def write_backup(conn: sqlite3.Connection, path: Path, version: int) -> Path:
    """Copy the DB to ``<name>.v<version>.bak`` unless one exists: the file's own bytes,
    or, when a WAL holds committed pages, a snapshot written by ``conn`` itself (``VACUUM
    INTO``: no second connection; every connection is ``open.open_db``'s)."""
    target = backup_path(path, version)
    if target.exists():
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    wal = path.with_name(path.name + "-wal")
    try:
        if wal.exists() and wal.stat().st_size > 0:
            conn.execute("VACUUM INTO ?", (str(tmp),))
        else:
            shutil.copyfile(path, tmp)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, target)  # another process's identical backup may be there first
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def migrate(db: sqlite_utils.Database, path: Path) -> int:
    """Bring ``db`` (the file ``path``, open for writing) to ``SCHEMA_VERSION``; returns
    the version it had. No-op for a current file."""
    version = read_version(db)
    if not pending(version):
        return version
    write_backup(db.conn, path, version)
    with write_transaction(db):
        start = read_version(db)  # another process may have migrated it meanwhile
        for migration in pending(start):
            try:
                migration.step(db)
            except sqlite3.Error as exc:
                raise MigrationError(f"{path}: migration to schema version "
                                     f"{migration.to_version} failed ({exc}); the file "
                                     f"is unchanged") from exc
            db.execute("update meta set value = ? where key = 'schema_version'",
                       [str(migration.to_version)])
    return version
