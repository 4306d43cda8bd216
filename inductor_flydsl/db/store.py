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
from ..noise import CONFIDENT, LOW, Confidence, Spread
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
    spread: Spread | None = None  # repeated timings, for the finalists a selection re-measured

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
    confidence: str | None = None  # "high", "low", None: unknown (recorded before v2)
    repeats: int | None = None
    iqr_ms: float | None = None


@dataclass(frozen=True)
class RecordedSelection:
    """One recorded autotune of a problem on one device with one software stack."""

    source: str  # path of the DB file
    problem_id: str
    device_id: str
    device: dict[str, Any]  # kind, arch, name, compute_units
    software_id: str
    software: dict[str, Any]  # torch, triton, flydsl, templates, blas (None: unrecorded)
    winner: Winner
    recorded_at: str
    prior: str | None  # JSON: the prior its short list came from, if one did
    results: tuple[CandidateResult, ...]  # every candidate measured, ok ones fastest first

    def changes(self, software: SoftwareInfo) -> list[str]:
        """What changed since, per backend; empty when every result still holds."""
        from ..validity import selection_changes

        return selection_changes(((r.backend, r.config) for r in self.results),
                                 self.software, software, str(self.device["kind"]))


def pick_winner(results: list[CandidateResult]) -> CandidateResult | None:
    usable = [r for r in results if r.usable]
    return min(usable, key=lambda r: (r.time_ms, r.candidate_id)) if usable else None


# Confidence rank of a stored result: high > unknown (NULL) > low.
RANKS = {CONFIDENT: 2, None: 1, LOW: 0}
RANK_SQL = "(case confidence when 'high' then 2 when 'low' then 0 else 1 end)"


def rank_of(level: str | None) -> int:
    return RANKS.get(level, 1)


def _result_row(keys: dict[str, str], r: CandidateResult, level: str | None, run_id: int,
                now: str) -> dict[str, Any]:
    spread = r.spread if r.usable else None
    return {**keys, "candidate_id": r.candidate_id, "backend": r.backend, "name": r.name,
            "config": canonical_json(r.config),
            "time_ms": (spread.median if spread else r.time_ms) if r.usable else None,
            "status": r.status, "error": r.error[:4000], "run_id": run_id,
            "recorded_at": now, "repeats": spread.repeats if spread else None,
            "median_ms": spread.median if spread else None,
            "iqr_ms": spread.iqr if spread else None, "cv": spread.cv if spread else None,
            "samples": json.dumps([round(x, 6) for x in spread.samples]) if spread else None,
            "confidence": level}


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
        # a read-only file of schema version 1 lacks the spread/confidence columns, one of
        # version 1 or 2 the validity ones (software.blas, winners.prior)
        winner_columns = db.table("winners").columns_dict
        self.has_confidence = "confidence" in winner_columns
        self.has_prior = "prior" in winner_columns
        self.has_blas = "blas" in db.table("software").columns_dict

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
    def recorded_selections(self, problem_id: str, kind: str | None = None,
                            arch: str | None = None) -> list[RecordedSelection]:
        """Every recorded selection of ``problem_id`` on devices of this kind and arch (None:
        any), any software: the winner, the stack it was measured with and every
        candidate's row."""
        extra = (", w.confidence, w.repeats, w.iqr_ms" if self.has_confidence else
                 ", null as confidence, null as repeats, null as iqr_ms")
        extra += ", w.prior" if self.has_prior else ", null as prior"
        extra += ", s.blas" if self.has_blas else ", null as blas"
        with self._lock:
            winners = list(self.db.query(
                "select w.device_id, w.software_id, w.candidate_id, w.backend, w.name,"
                " w.time_ms, w.recorded_at" + extra + ", d.kind, d.arch, d.name as"
                " device_name, d.compute_units, s.torch, s.triton, s.flydsl, s.templates"
                " from winners w join devices d on d.id = w.device_id"
                " join software s on s.id = w.software_id"
                " where w.problem_id = ? and d.kind = coalesce(?, d.kind)"
                " and d.arch = coalesce(?, d.arch)", [problem_id, kind, arch]))
            selections = []
            for w in winners:
                results = tuple(CandidateResult(
                    str(r["candidate_id"]), str(r["backend"]), str(r["name"] or ""),
                    decode_config(r["config"]), r["time_ms"], str(r["status"]))
                    for r in self.db.query(
                        "select candidate_id, backend, name, config, time_ms, status from"
                        " results where device_id = ? and software_id = ? and"
                        " problem_id = ? order by status != 'ok', time_ms is null, time_ms,"
                        " candidate_id", [w["device_id"], w["software_id"], problem_id]))
                config = next((r.config for r in results
                               if r.candidate_id == w["candidate_id"]), {})
                selections.append(RecordedSelection(
                    source=str(self.path), problem_id=problem_id, device_id=w["device_id"],
                    device={"kind": w["kind"], "arch": w["arch"], "name": w["device_name"],
                            "compute_units": w["compute_units"]},
                    software_id=w["software_id"],
                    software={k: w[k] for k in ("torch", "triton", "flydsl", "templates",
                                                "blas")},
                    winner=Winner(candidate_id=str(w["candidate_id"]),
                                  backend=str(w["backend"]), name=str(w["name"] or ""),
                                  time_ms=w["time_ms"], source=str(self.path), config=config,
                                  confidence=w["confidence"], repeats=w["repeats"],
                                  iqr_ms=w["iqr_ms"]),
                    recorded_at=str(w["recorded_at"] or ""), prior=w["prior"],
                    results=results))
        return selections

    def lookup_winner(self, device: DeviceInfo, problem_id: str,
                      software: SoftwareInfo) -> Winner | None:
        """The exact winner of ``problem_id`` on ``device``: recorded with any software
        under which every candidate's result still holds for ``software``
        (``validity.py``). The one recorded with ``software`` itself comes first, then
        the best-ranked, then the newest."""
        selection = self.exact_selection(device, problem_id, software)
        return selection.winner if selection is not None else None

    def exact_selection(self, device: DeviceInfo, problem_id: str,
                        software: SoftwareInfo) -> RecordedSelection | None:
        """The recorded selection :meth:`lookup_winner` takes its winner from."""
        exact = [s for s in self.recorded_selections(problem_id, device.kind, device.arch)
                 if s.device_id == device.id and not s.changes(software)]
        if not exact:
            return None
        exact.sort(key=lambda s: s.recorded_at, reverse=True)  # newest first, then:
        return min(exact, key=lambda s: (s.software_id != software.id,
                                         -rank_of(s.winner.confidence)))

    # ---- writes ---------------------------------------------------------------------
    def record_selection(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem,
                         results: list[CandidateResult],
                         confidence: Confidence | None = None,
                         prior: str | None = None) -> None:
        """Store every candidate's result, then the winner, in one commit.

        Confidence ranks results: ``high`` over unknown (rows from before schema v2, or a
        caller that measured no spread) over ``low``. A result never replaces a stored
        result of the same candidate with a higher rank, and the winner is the fastest
        ``ok`` result of the highest rank recorded for the problem on this device and
        software, these results and earlier ones alike: a noisy autotune never replaces
        a confident winner, a confident one replaces a noisy one, and a partial autotune
        (a backend turned off) never replaces a faster winner of the same rank.

        ``prior``: the JSON of the prior whose short list was benchmarked (``priors.py``),
        kept with a winner this selection measured.
        """
        now = utc_now()
        level = confidence.level if confidence is not None else None
        with self.transaction():
            run_id = self.run_id()
            self._upsert_keys(device, software, problem)
            keys = {"device_id": device.id, "software_id": software.id, "problem_id": problem.id}
            stored = {row["candidate_id"]: rank_of(row["confidence"]) for row in self.db.query(
                "select candidate_id, confidence from results where device_id = ? and"
                " software_id = ? and problem_id = ?", [device.id, software.id, problem.id])}
            rows = [_result_row(keys, r, level, run_id, now) for r in results
                    if stored.get(r.candidate_id, -1) <= rank_of(level)]
            self.db.table("results").upsert_all(
                rows, pk=("device_id", "software_id", "problem_id", "candidate_id"))
            best = list(self.db.query(
                "select candidate_id, backend, name, time_ms, run_id, recorded_at, repeats,"
                " iqr_ms, confidence from results where device_id = ? and software_id = ?"
                " and problem_id = ? and status = 'ok' and time_ms is not null order by "
                f"{RANK_SQL} desc, time_ms, candidate_id limit 1",
                [device.id, software.id, problem.id]))
            if best:
                self._store_winner(keys, best[0], confidence, now, prior)

    def _store_winner(self, keys: dict[str, str], best: dict[str, Any],
                      confidence: Confidence | None, now: str,
                      prior: str | None = None) -> None:
        current = list(self.db.query(
            "select candidate_id from winners where device_id = ? and software_id = ? and"
            " problem_id = ?", [keys["device_id"], keys["software_id"], keys["problem_id"]]))
        fresh = best.pop("recorded_at") == now  # measured by this selection
        if not fresh and current and current[0]["candidate_id"] == best["candidate_id"]:
            return  # an earlier, better-ranked winner stays as it was recorded
        row = {**keys, **best, "recorded_at": now}
        if fresh:
            row["prior"] = prior
        if fresh and confidence is not None:
            machine = confidence.machine
            row.update(confidence_reason=confidence.reason,
                       runner_up_ms=confidence.runner_up_ms,
                       busy=int(machine.busy) if machine is not None else None,
                       machine=machine.to_text() if machine is not None else None)
        elif not fresh:
            row["confidence_reason"] = "kept: an earlier result of a higher rank"
        self.db.table("winners").upsert(row, pk=("device_id", "software_id", "problem_id"))

    def record_miss(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem) -> None:
        now = utc_now()
        with self.transaction():
            self._upsert_keys(device, software, problem)
            self._count_miss(device, software, problem.id, now)

    def record_refusal(self, device: DeviceInfo, software: SoftwareInfo, op: str,
                       reason: str) -> None:
        """A problem outside the definition of a valid problem: never written to
        ``problems``; counted in ``misses`` under ``refusal_id(op, reason)``."""
        now = utc_now()
        with self.transaction():
            self.db.table("devices").upsert(device.as_row(), pk="id")
            self.db.table("software").upsert(software.as_row(), pk="id")
            self._count_miss(device, software, refusal_id(op, reason), now)

    def _count_miss(self, device: DeviceInfo, software: SoftwareInfo, problem_id: str,
                    now: str) -> None:
        self.db.execute(
            "insert into misses (device_id, software_id, problem_id, count, first_seen,"
            " last_seen) values (?, ?, ?, 1, ?, ?) on conflict (device_id, software_id,"
            " problem_id) do update set count = count + 1, last_seen = excluded.last_seen",
            [device.id, software.id, problem_id, now, now])


REFUSED_PREFIX = "refused:"


def refusal_id(op: str, reason: str) -> str:
    """The ``misses.problem_id`` of a refused problem: it carries the op and the reason
    (there is no ``problems`` row to point at)."""
    text = " ".join(f"{op}: {reason}".split())
    return f"{REFUSED_PREFIX}{''.join(c if c.isprintable() else '?' for c in text)[:300]}"


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
