"""What the offline sweep reads and writes in a tuning DB: its per-item progress
(``sweep_status``), the misses and noisy winners it turns into items, and the winners a
finished item produced."""

from __future__ import annotations

import json
import os
from typing import Any

import sqlite_utils

from .open import open_db
from .schema import TABLES
from .store import TuningDB

SWEEP_STATUS_KEY = TABLES["sweep_status"][1]


# ---- progress: sweep_status -------------------------------------------------------------
def register(db: TuningDB, device_row: dict[str, Any], software_row: dict[str, Any]) -> None:
    """Store the sweep's device and software rows (its items' keys)."""
    with db.transaction():
        db.db.table("devices").upsert(device_row, pk="id")
        db.db.table("software").upsert(software_row, pk="id")


def statuses(db: TuningDB, device_id: str, software_id: str) -> dict[str, str]:
    """item_id -> its recorded status, for this device and software."""
    return {row["item_id"]: row["status"] for row in db.db.query(
        "select item_id, status from sweep_status where device_id = ? and software_id = ?",
        [device_id, software_id])}


def recorded_problem_ids(db: sqlite_utils.Database, device_id: str) -> dict[str, list[str]]:
    """item_id -> the ids of the problems its last finished run on this device recorded
    (any software: a problem's id does not depend on it), for ``sweep --list``."""
    found: dict[str, list[str]] = {}
    for row in db.query("select item_id, problem_ids from sweep_status where device_id = ?"
                        " and problem_ids is not null and problem_ids != '[]'"
                        " order by updated_at", [device_id]):
        try:
            ids = json.loads(row["problem_ids"])
        except ValueError:
            continue
        if isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids):
            found[str(row["item_id"])] = ids
    return found


def record_status(db: TuningDB, row: dict[str, Any], *, keep_status: str | None = None
                  ) -> bool:
    """Upsert one ``sweep_status`` row, unless the stored row's status is ``keep_status``
    (an earlier run finished the item: an interrupted one does not replace it). Returns
    whether it was written."""
    with db.transaction():
        if keep_status is not None:
            current = list(db.db.query(
                "select status from sweep_status where device_id = ? and software_id = ?"
                " and item_id = ?", [row["device_id"], row["software_id"], row["item_id"]]))
            if current and current[0]["status"] == keep_status:
                return False
        db.db.table("sweep_status").upsert(row, pk=SWEEP_STATUS_KEY)
    return True


def winner_backends(db: TuningDB, device_id: str, software_id: str) -> list[tuple[str, str]]:
    """(problem_id, winning backend) of every winner for this device and software."""
    return [(str(row["problem_id"]), str(row["backend"])) for row in db.db.query(
        "select problem_id, backend from winners where device_id = ? and software_id = ?",
        [device_id, software_id])]


def low_confidence_ids(db: TuningDB, device_id: str, software_id: str) -> list[str]:
    """The problems whose winner for this device and software is low-confidence (none in
    a file of schema version 1)."""
    if not db.has_confidence:
        return []
    return [str(row["problem_id"]) for row in db.db.query(
        "select problem_id from winners where device_id = ? and software_id = ? and"
        " confidence = 'low'", [device_id, software_id])]


# ---- what to sweep ----------------------------------------------------------------------
def missed_problems(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every missed problem (any device): problem_id, total count, summary and spec, most
    frequently missed first."""
    return list(db.query(
        "select m.problem_id, sum(m.count) as count, p.summary, p.spec from misses m"
        " join problems p on p.id = m.problem_id group by m.problem_id, p.summary, p.spec"
        " order by count desc, p.summary"))


def has_winner(db: sqlite_utils.Database, device_id: str, software_id: str,
               problem_id: str) -> bool:
    return bool(list(db.query(
        "select 1 from winners where device_id = ? and software_id = ? and problem_id = ?",
        [device_id, software_id, problem_id])))


def noisy_problems(db: sqlite_utils.Database, device_id: str,
                   software_id: str) -> list[dict[str, Any]]:
    """Summary and spec of every problem whose winner for this device and software is
    low-confidence (none in a file of schema version 1)."""
    if "confidence" not in db.table("winners").columns_dict:
        return []
    return list(db.query(
        "select p.summary, p.spec from winners w join problems p on p.id = w.problem_id"
        " where w.device_id = ? and w.software_id = ? and w.confidence = 'low'"
        " order by p.summary", [device_id, software_id]))


def problem_sizes(path: str | os.PathLike[str], ids: list[str]) -> list[dict[str, Any]]:
    """id, m, n, k and batch of each of the problems ``ids`` in the DB at ``path``."""
    if not ids:
        return []
    db = open_db(path, writable=False)
    try:
        marks = ",".join("?" * len(ids))
        return list(db.query(f"select id, m, n, k, batch from problems where id in ({marks})",
                             ids))
    finally:
        db.close()
