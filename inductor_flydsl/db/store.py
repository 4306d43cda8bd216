"""Reads and writes of one tuning DB file."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import socket
import sqlite3
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from ..device import DeviceInfo
from ..keys import canonical_json
from ..problem import Problem
from ..software import SoftwareInfo
from .open import BUSY_TIMEOUT_MS, LOCK_RETRIES, open_db, write_transaction

STATUS_OK = "ok"
STATUS_FAILED = "failed"  # benchmark raised or returned inf
STATUS_INVALID = "invalid"  # numeric validation against ATen failed
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_INVALID)


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class CandidateResult:
    candidate_id: str
    backend: str
    name: str
    config: dict[str, Any]
    time_ms: float | None
    status: str = STATUS_OK
    error: str = ""

    @property
    def usable(self) -> bool:
        return self.status == STATUS_OK and self.time_ms is not None and math.isfinite(
            self.time_ms)


@dataclass(frozen=True)
class Winner:
    candidate_id: str
    backend: str
    name: str
    time_ms: float | None
    source: str  # path of the DB that held it
    config: dict[str, Any] = field(default_factory=dict)  # the winner's stored config


def pick_winner(results: list[CandidateResult]) -> CandidateResult | None:
    usable = [r for r in results if r.usable]
    return min(usable, key=lambda r: (r.time_ms, r.candidate_id)) if usable else None


class TuningDB:
    """One DB file. Thread-safe: a lock serializes use of the connection."""

    def __init__(self, db: sqlite_utils.Database, path: Path, *, writable: bool,
                 tool: str = "torch.compile", lock_retries: int = LOCK_RETRIES) -> None:
        self.db = db
        self.path = path
        self.writable = writable
        self.tool = tool
        self.lock_retries = lock_retries
        self._lock = threading.RLock()
        self._run_id: int | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, writable: bool, tool: str = "torch.compile",
             immutable: bool = False, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
             lock_retries: int = LOCK_RETRIES) -> TuningDB:
        db = open_db(path, writable=writable, immutable=immutable,
                     busy_timeout_ms=busy_timeout_ms)
        return cls(db, Path(path), writable=writable, tool=tool, lock_retries=lock_retries)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction; a run row created inside it is forgotten on rollback."""
        had_run = self._run_id is not None
        try:
            with self._lock, write_transaction(self.db, retries=self.lock_retries) as db:
                yield db
        except BaseException:
            if not had_run:
                self._run_id = None
            raise

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # ---- provenance -----------------------------------------------------------------
    def run_id(self) -> int:
        """The row of ``runs`` for this process, created on the first write."""
        if self._run_id is None:
            from ..version import __version__

            table = self.db.table("runs")
            table.insert({"started_at": utc_now(), "host": socket.gethostname(),
                          "tool": self.tool, "tool_version": __version__,
                          "command": " ".join(sys.argv)[:2000], "pid": os.getpid(),
                          "merged_from": ""})
            self._run_id = int(table.last_pk)
        return self._run_id

    def _upsert_keys(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem) -> None:
        self.db.table("devices").upsert(device.as_row(), pk="id")
        self.db.table("software").upsert(software.as_row(), pk="id")
        self.db.table("problems").upsert(problem.as_row(), pk="id")

    # ---- reads ----------------------------------------------------------------------
    def lookup_winner(self, device_id: str, software_id: str, problem_id: str) -> Winner | None:
        with self._lock:
            rows = list(self.db.query(
                "select w.candidate_id, w.backend, w.name, w.time_ms, r.config from winners w"
                " left join results r on r.device_id = w.device_id and"
                " r.software_id = w.software_id and r.problem_id = w.problem_id and"
                " r.candidate_id = w.candidate_id where w.device_id = ? and w.software_id = ?"
                " and w.problem_id = ?", [device_id, software_id, problem_id]))
        if not rows:
            return None
        row = rows[0]
        return Winner(candidate_id=str(row["candidate_id"]), backend=str(row["backend"]),
                      name=str(row["name"] or ""), time_ms=row["time_ms"], source=str(self.path),
                      config=decode_config(row["config"]))

    # ---- writes ---------------------------------------------------------------------
    def record_selection(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem,
                         results: list[CandidateResult]) -> None:
        """Store every candidate's result, then the winner, in one commit.

        The winner is the fastest ``ok`` result recorded for the problem on this device and
        software, these results and earlier ones alike: a partial autotune (a backend
        turned off) never replaces a faster winner measured before.
        """
        now = utc_now()
        with self.transaction():
            run_id = self.run_id()
            self._upsert_keys(device, software, problem)
            keys = {"device_id": device.id, "software_id": software.id, "problem_id": problem.id}
            self.db.table("results").upsert_all(
                [{**keys, "candidate_id": r.candidate_id, "backend": r.backend,
                  "name": r.name, "config": canonical_json(r.config),
                  "time_ms": r.time_ms if r.usable else None, "status": r.status,
                  "error": r.error[:4000], "run_id": run_id, "recorded_at": now}
                 for r in results],
                pk=("device_id", "software_id", "problem_id", "candidate_id"))
            best = list(self.db.query(
                "select candidate_id, backend, name, time_ms, run_id from results where"
                " device_id = ? and software_id = ? and problem_id = ? and status = 'ok'"
                " and time_ms is not null order by time_ms, candidate_id limit 1",
                [device.id, software.id, problem.id]))
            if best:
                self.db.table("winners").upsert(
                    {**keys, **best[0], "recorded_at": now},
                    pk=("device_id", "software_id", "problem_id"))

    def record_miss(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem) -> None:
        now = utc_now()
        with self.transaction():
            self._upsert_keys(device, software, problem)
            self.db.execute(
                "insert into misses (device_id, software_id, problem_id, count, first_seen,"
                " last_seen) values (?, ?, ?, 1, ?, ?) on conflict (device_id, software_id,"
                " problem_id) do update set count = count + 1, last_seen = excluded.last_seen",
                [device.id, software.id, problem.id, now, now])


def decode_config(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()
