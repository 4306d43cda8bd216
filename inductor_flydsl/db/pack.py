"""``db pack``: make a DB file self-contained for shipping or sharing.

Checkpoints the WAL into the file, vacuums it, switches it to the rollback journal (so a
reader of a read-only copy needs no -wal/-shm files) and verifies it.
"""

from __future__ import annotations

from pathlib import Path

from .open import open_db
from .verify import verify_db


def pack_db(path: Path) -> list[str]:
    """Pack ``path`` in place; returns the problems ``db verify`` finds (empty: ok).
    Raises ``open.UnusableDB`` when ``path`` is missing or no tuning DB."""
    # open_db checks the file and its schema and migrates an older one (a packed file
    # is always current; the old one kept as .bak)
    db = open_db(path, writable=True, create=False, autocommit=True,
                 busy_timeout_ms=30_000)
    try:
        db.execute("pragma wal_checkpoint(truncate)")
        db.execute("pragma journal_mode=delete")
        db.execute("vacuum")
        return verify_db(db)
    finally:
        db.close()
