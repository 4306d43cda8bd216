"""The ``compile_catalog`` table (``schema.COMPILE_CATALOG``): what ``compile-check``
cross-compiled, read by the performance model's ranking (``report`` summarizes it in
``report_queries``)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from .open import reading
from .schema import COMPILE_CATALOG
from .store import TuningDB

TABLE = "compile_catalog"
PRIMARY_KEY = COMPILE_CATALOG[1]


class CatalogStore:
    """A tuning DB open for writing catalog rows (created and migrated as needed)."""

    def __init__(self, path: str | os.PathLike[str], tool: str = "compile-check") -> None:
        self.tdb = TuningDB.open(path, writable=True, tool=tool)

    def write(self, make_rows: Callable[[int], Iterable[dict[str, Any]]]) -> int:
        """Upsert ``make_rows(run_id)`` in one transaction (``run_id``: this process's
        ``runs`` row); returns how many rows were written."""
        with self.tdb.transaction():
            rows = list(make_rows(self.tdb.run_id()))
            unknown = set().union(*(row.keys() for row in rows)) - set(COMPILE_CATALOG[0])
            if unknown:
                raise ValueError(f"compile_catalog has no column {', '.join(sorted(unknown))}"
                                 " (declare it in db/schema.py, with a migration)")
            self.tdb.db.table(TABLE).upsert_all(rows, pk=PRIMARY_KEY)
        return len(rows)

    def close(self) -> None:
        """Fold the WAL into the main file (the DB may be shipped as one file), close."""
        try:
            with contextlib.suppress(sqlite3.Error):
                self.tdb.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.tdb.close()


def read_usable_rows(path: str | os.PathLike[str], arch: str,
                     template: str) -> list[dict[str, Any]]:
    """The rows of ``arch`` and ``template`` that compiled and had their main loop found,
    from the catalog file at ``path`` (read-only, never created). Raises ``sqlite3.Error``
    (``errors.DBError``) when the file cannot be read (or opened as a tuning DB)."""
    with reading(path) as db:
        return list(db.query(
            f"SELECT * FROM {TABLE} WHERE arch = ? AND template = ? AND ok = 1 "
            "AND loop_found = 1", (arch, template)))

