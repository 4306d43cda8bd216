"""The ``predicted_short_lists`` table (``schema.PREDICTED_SHORT_LISTS``, schema version
5): rows of the performance model's short lists, written by
``scripts/build_predicted_db.py`` and read by ``performance/short_lists.py``, which decides
what a row means (its model version, its config's validity)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from typing import Any

from .open import open_db
from .schema import PREDICTED_SHORT_LISTS

TABLE = "predicted_short_lists"
PRIMARY_KEY = PREDICTED_SHORT_LISTS[1]


def _connect_immutable(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection to a file nobody writes (a shipped DB): no -wal/-shm."""
    con = sqlite3.connect(f"file:{os.fspath(path)}?mode=ro&immutable=1", uri=True)
    con.row_factory = sqlite3.Row
    return con


def _has_table(con: sqlite3.Connection) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (TABLE,)).fetchone() is not None


def read_list(path: str | os.PathLike[str], problem_id: str,
              device: str) -> list[dict[str, Any]]:
    """The ``kind = 'predicted'`` rows of ``problem_id`` on ``device``, by rank (rank,
    config, predicted_us, tflops, roofline_share, bound, model_version); empty when the
    file has no such table. Raises ``sqlite3.Error`` (``errors.DBError``) when the file
    cannot be read."""
    con = _connect_immutable(path)
    try:
        if not _has_table(con):  # a DB without predicted short lists
            return []
        return [dict(r) for r in con.execute(
            f"SELECT rank, config, predicted_us, tflops, roofline_share, bound, "
            f"model_version FROM {TABLE} WHERE problem_id = ? AND device = ? "
            "AND kind = 'predicted' ORDER BY rank", (problem_id, device)).fetchall()]
    finally:
        con.close()


def read_all(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row, by shape, label and rank (empty when the file cannot be read or has no
    such table): for reports."""
    try:
        con = _connect_immutable(path)
    except sqlite3.Error:
        return []
    try:
        if not _has_table(con):
            return []
        return [dict(r) for r in con.execute(
            f"SELECT * FROM {TABLE} ORDER BY shape, label, rank")]
    except sqlite3.Error:
        return []
    finally:
        con.close()


def write_rows(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]],
               problem_rows: Iterable[dict[str, Any]] = ()) -> int:
    """Upsert ``rows`` into the tuning DB at ``path`` (created if missing, migrated to the
    current schema, which declares the table), with ``problem_rows`` (``Problem.as_row``:
    the problems they key, so ``db show`` finds them); returns how many rows were
    written."""
    rows = list(rows)
    unknown = set().union(*(row.keys() for row in rows)) - set(PREDICTED_SHORT_LISTS[0])
    if unknown:
        raise ValueError(f"{TABLE} has no column {', '.join(sorted(unknown))}")
    db = open_db(path, writable=True)
    try:
        with db.conn:
            db.table("problems").upsert_all(list(problem_rows), pk="id")
            db.table(TABLE).upsert_all(rows, pk=PRIMARY_KEY)
        return len(rows)
    finally:
        db.close()
