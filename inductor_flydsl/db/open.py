"""Open a tuning DB file safely: check it before use, never overwrite or delete it.

A file that is empty, truncated, not SQLite, of a foreign schema or of a newer schema
raises :class:`UnusableDB` with a one-line reason; the caller warns once and carries on
without it. A missing file is created (atomically, so concurrent first writers agree)
only when the caller may write.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from .migrations import OLDEST_MIGRATABLE, MigrationError, migrate
from .schema import APPLICATION, SCHEMA_VERSION, create_schema, required_tables
from .transactions import BUSY_TIMEOUT_MS

SQLITE_MAGIC = b"SQLite format 3\x00"
# What open_db returns: the name callers outside db/ give its type (they pass it back to
# db/'s functions; none runs SQL on it).
Database = sqlite_utils.Database
SQLITE_VERSION = sqlite3.sqlite_version  # the SQLite library this Python links (doctor)


class UnusableDB(Exception):
    """The file cannot be used as a tuning DB; ``str(exc)`` says why."""


def check_file(path: Path) -> None:
    """Cheap structural checks on an existing file, before SQLite touches it."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise UnusableDB(f"cannot read {path}: {exc.strerror or exc}") from exc
    if size == 0:
        raise UnusableDB(f"{path} is an empty file (0 bytes), not a tuning DB")
    if not header.startswith(SQLITE_MAGIC):
        raise UnusableDB(f"{path} is not an SQLite database (bad header)")
    if len(header) < 100:
        raise UnusableDB(f"{path} is truncated ({size} bytes, shorter than the SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    change_counter = int.from_bytes(header[24:28], "big")
    pages = int.from_bytes(header[28:32], "big")
    version_valid_for = int.from_bytes(header[92:96], "big")
    if page_size < 512 or page_size & (page_size - 1):
        raise UnusableDB(f"{path} has a corrupt SQLite header (page size {page_size})")
    wal = path.with_name(path.name + "-wal")
    if (pages and change_counter == version_valid_for and size < pages * page_size
            and not wal.exists()):
        raise UnusableDB(f"{path} is truncated ({size} bytes, header says {pages} pages "
                         f"of {page_size})")


def _connect(path: Path, *, writable: bool, immutable: bool = False,
             busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    if writable:
        conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000,
                               check_same_thread=False)
    else:
        uri = path.resolve().as_uri() + "?mode=ro"
        if immutable or (not can_write_beside(path) and not _has_unmerged_wal(path)):
            # A WAL database in a read-only place cannot create its -shm file; immutable
            # mode reads it without one (safe: nobody can write there either). Immutable
            # mode ignores a -wal file, so one holding changes not yet merged into the
            # file is read through SQLite's read-only WAL support instead (it needs the
            # -shm file beside it).
            uri += "&immutable=1"
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000,
                               check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    return conn


def can_write_beside(path: Path) -> bool:
    """Whether this process may write ``path`` and create files next to it (SQLite's
    -wal/-shm/-journal files). False on a read-only mount, even for root."""
    return os.access(path.parent, os.W_OK) and os.access(path, os.W_OK)


def _has_unmerged_wal(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False


def is_read_only_place(path: str | os.PathLike[str]) -> bool:
    """An existing DB file that cannot be written here (file or folder read-only, e.g. a
    shared read-only mount): it can still be opened read-only and served."""
    path = Path(path)
    return path.is_file() and not can_write_beside(path)


def check_schema(db: sqlite_utils.Database, path: Path) -> int:
    """Raise UnusableDB unless ``db`` is a tuning DB this package can read; return its
    schema version (older versions are readable and migrated by writers)."""
    try:
        names = set(db.table_names())
    except sqlite3.DatabaseError as exc:
        raise UnusableDB(f"{path} is corrupt or not a database ({exc})") from exc
    if "meta" not in names:
        raise UnusableDB(f"{path} is an SQLite file of another application "
                         f"(tables: {', '.join(sorted(names)) or 'none'})")
    meta = {row["key"]: row["value"] for row in db.query("select key, value from meta")}
    if meta.get("application") != APPLICATION:
        raise UnusableDB(f"{path} is an SQLite file of another application "
                         f"({meta.get('application')!r})")
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise UnusableDB(f"{path} has no valid schema_version") from None
    if version > SCHEMA_VERSION:
        raise UnusableDB(f"{path} has schema version {version}, newer than this "
                         f"inductor_flydsl understands ({SCHEMA_VERSION}); upgrade the package")
    if version < OLDEST_MIGRATABLE:
        raise UnusableDB(f"{path} has schema version {version}, older than "
                         f"{OLDEST_MIGRATABLE}, and no migration exists")
    missing = required_tables(version) - names
    if missing:
        raise UnusableDB(f"{path} lacks tables: {', '.join(sorted(missing))}")
    return version


def _create_new(path: Path) -> None:
    """Build a fresh DB next to ``path`` and link it into place unless one appeared."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()
        conn = sqlite3.connect(str(tmp))
        try:
            db = sqlite_utils.Database(conn)
            db.enable_wal()
            with db.atomic():
                create_schema(db)
        finally:
            conn.close()
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # atomic: fails if another process created it first
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def open_db(path: str | os.PathLike[str], *, writable: bool, immutable: bool = False,
            busy_timeout_ms: int = BUSY_TIMEOUT_MS, create: bool = True,
            autocommit: bool = False) -> sqlite_utils.Database:
    """Open (and, if writable and missing, create) a tuning DB; raise UnusableDB if bad.
    Every connection to a DB file the package or its scripts make comes from here
    (``tests/test_db_boundary.py``).

    ``immutable`` (read-only opens of files nobody writes, like the shipped DBs) reads
    without creating -wal/-shm files next to the DB. ``create=False``: a missing file is
    :class:`UnusableDB` even when writable (``db pack``). ``autocommit``: the connection
    runs each statement on its own, outside any implicit transaction (``VACUUM`` and
    ``journal_mode`` switches need it: ``db pack``).
    """
    path = Path(path)
    if not path.exists():
        if not writable or not create:
            raise UnusableDB(f"{path} does not exist")
        try:
            _create_new(path)
        except (OSError, sqlite3.Error) as exc:
            raise UnusableDB(f"cannot create {path}: {getattr(exc, 'strerror', None) or exc}"
                             ) from exc
    if path.is_dir():
        raise UnusableDB(f"{path} is a directory, not a tuning DB file")
    check_file(path)
    side_files = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    preexisting = {p for p in side_files if p.exists()}
    try:
        conn = _connect(path, writable=writable, immutable=immutable and not writable,
                        busy_timeout_ms=busy_timeout_ms)
    except sqlite3.DatabaseError as exc:
        raise UnusableDB(f"{path} cannot be opened: {exc}") from exc
    if autocommit:
        conn.isolation_level = None
    try:
        db = sqlite_utils.Database(conn, execute_plugins=False)
        version = check_schema(db, path)
        if writable and version < SCHEMA_VERSION:
            migrate(db, path)  # backs the old file up next to it first, as it was
        if writable and str(db.journal_mode).lower() != "wal":
            db.enable_wal()  # e.g. after `db pack` switched it to the rollback journal
    except (sqlite3.DatabaseError, UnusableDB, MigrationError) as exc:
        conn.close()
        # SQLite may have created empty -wal/-shm files next to a file we refuse: remove
        # those (and only those) so a bad file is left exactly as it was found.
        for side in side_files:
            if side not in preexisting and side.exists() and (
                    side.name.endswith("-shm") or side.stat().st_size == 0):
                with contextlib.suppress(OSError):
                    side.unlink()
        if isinstance(exc, UnusableDB):
            raise
        if isinstance(exc, MigrationError):
            raise UnusableDB(str(exc)) from exc
        raise UnusableDB(f"{path} cannot be opened: {exc}") from exc
    return db


@contextlib.contextmanager
def reading(path: str | os.PathLike[str], *,
            immutable: bool = False) -> Iterator[sqlite_utils.Database]:
    """:func:`open_db` read-only (never created) for the block, closed after, for readers
    that treat a file they cannot open like one they cannot read: :class:`UnusableDB` is
    raised as ``sqlite3.DatabaseError`` (``errors.DBError``), with its reason."""
    try:
        db = open_db(path, writable=False, immutable=immutable)
    except UnusableDB as exc:
        raise sqlite3.DatabaseError(str(exc)) from exc
    try:
        yield db
    finally:
        db.close()
