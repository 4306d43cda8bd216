"""What the user is told about the path of their tuning DB: where it came from
(``INDUCTOR_FLYDSL_DB``, ``enable(db_path=...)`` or the default per-user path:
``Settings.db_source``) and how to fix it.

A path the user gives whose folder does not exist is not used and its folder is not
created (a mistyped folder would otherwise silently become a new tree and a new, empty
DB; docs/decisions.md); the default per-user path's folder is created. A file that is no
tuning DB is never written, whatever the path's source (``open.py``).
"""

from __future__ import annotations

from ..settings import DB, DBSource, Mode, Settings


def missing_folder(settings: Settings) -> str | None:
    """The problem with an explicit path whose folder does not exist (None: no such
    problem), naming the path's source and the fix."""
    path = settings.db_path
    folder = path.parent
    if settings.db_source is DBSource.DEFAULT or path.exists() or folder.exists():
        return None  # a folder that is a file: open_db says so
    return (f"the folder {folder} of {settings.db_source.describe(path)} does not exist "
            f"(a folder you give is never created): create it (mkdir -p {folder}) or "
            "correct the path")


def unusable_fix(settings: Settings) -> str:
    """What to do about a DB file the plugin cannot use: where its path came from, and
    the fix (the file itself is left as it is)."""
    path = settings.db_path
    new = ("" if settings.mode is not Mode.READWRITE
           else ", or at a new file name (the first compile creates it)")
    if settings.db_source is DBSource.ENV:
        return f"The path is {DB.name}'s: point {DB.name} at a tuning DB{new}."
    if settings.db_source is DBSource.ARGUMENT:
        return f"The path is enable(db_path={str(path)!r}): give db_path a tuning DB{new}."
    return (f"The path is the default per-user DB: move {path} away (a new one is then "
            f"created), or set {DB.name} to another file.")
