"""The error a caller outside ``db/`` catches when a read or write of a tuning DB file
fails (locked, corrupt, a table or column missing): SQLite's own, named here so that no
module outside ``db/`` imports ``sqlite3``. A file that cannot be opened as a tuning DB
at all raises ``open.UnusableDB``."""

from __future__ import annotations

import sqlite3

DBError = sqlite3.Error
