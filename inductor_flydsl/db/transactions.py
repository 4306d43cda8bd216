"""Write transactions on a tuning DB connection: take the lock up front, retry while
another writer holds it, roll back on any failure. Used by every writer (compiles, the
sweep, merge, pack, migrations)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator

import sqlite_utils

BUSY_TIMEOUT_MS = 30_000
# Retries of a write that still meets "database is locked" after the busy timeout.
LOCK_RETRIES = 8


def is_locked_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))


@contextlib.contextmanager
def write_transaction(db: sqlite_utils.Database,
                      retries: int = LOCK_RETRIES) -> Iterator[sqlite_utils.Database]:
    """``BEGIN IMMEDIATE`` so a writer waits for the lock up front instead of failing to
    upgrade a read lock later; retried with backoff while the DB stays locked. A failed
    body or COMMIT rolls back, so the connection never stays inside a transaction."""
    for attempt in range(retries + 1):
        try:
            db.conn.execute("BEGIN IMMEDIATE")
            break
        except sqlite3.OperationalError as exc:
            if not is_locked_error(exc) or attempt == retries:
                raise
            time.sleep(min(0.05 * 2 ** attempt, 2.0))
    try:
        yield db
        db.conn.execute("COMMIT")
    except BaseException:
        db.rollback()
        raise
