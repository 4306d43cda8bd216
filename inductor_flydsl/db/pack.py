"""``db pack``: make a DB file self-contained for shipping or sharing.

Checkpoints the WAL into the file, vacuums it, switches it to the rollback journal (so a
reader of a read-only copy needs no -wal/-shm files) and verifies it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .migrations import migrate
from .open import check_file, check_schema
from .schema import SCHEMA_VERSION
from .verify import verify_db


def pack_db(path: Path) -> list[str]:
    """Pack ``path`` in place; returns the problems ``db verify`` finds (empty: ok)."""
    import sqlite_utils

    check_file(path)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db = sqlite_utils.Database(conn, execute_plugins=False)
        if check_schema(db, path) < SCHEMA_VERSION:
            migrate(db, path)  # a packed file is always current (old one kept as .bak)
        conn.execute("pragma wal_checkpoint(truncate)")
        conn.execute("pragma journal_mode=delete")
        conn.execute("vacuum")
        return verify_db(db)
    finally:
        conn.close()
