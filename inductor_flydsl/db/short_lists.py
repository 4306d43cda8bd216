"""The ``predicted_short_lists`` table (``schema.PREDICTED_SHORT_LISTS``, schema version
5): rows of the performance model's short lists, written by
``scripts/build_predicted_db.py`` and read by ``performance/short_lists.py``, which decides
what a row means (its model version, its config's validity)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from typing import Any

from .open import Database, open_db, reading
from .schema import PREDICTED_SHORT_LISTS

TABLE = "predicted_short_lists"
PRIMARY_KEY = PREDICTED_SHORT_LISTS[1]


def _has_table(db: Database) -> bool:
    return TABLE in db.table_names()


def read_list(path: str | os.PathLike[str], problem_id: str,
              device: str) -> list[dict[str, Any]]:
    """The ``kind = 'predicted'`` rows of ``problem_id`` on ``device``, by rank (rank,
    config, predicted_us, tflops, roofline_share, bound, model_version); empty when the
    file has no such table. Raises ``sqlite3.Error`` (``errors.DBError``) when the file
    cannot be read (or opened as a tuning DB). Read as a file nobody writes (a shipped
    DB): no -wal/-shm files."""
    with reading(path, immutable=True) as db:
        if not _has_table(db):  # a DB without predicted short lists
            return []
        return list(db.query(
            f"SELECT rank, config, predicted_us, tflops, roofline_share, bound, "
            f"model_version FROM {TABLE} WHERE problem_id = ? AND device = ? "
            "AND kind = 'predicted' ORDER BY rank", (problem_id, device)))


def read_all(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row, by shape, label and rank (empty when the file cannot be read or has no
    such table): for reports."""
    try:
        with reading(path, immutable=True) as db:
            if not _has_table(db):
                return []
            return list(db.query(f"SELECT * FROM {TABLE} ORDER BY shape, label, rank"))
    except sqlite3.Error:
        return []


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
