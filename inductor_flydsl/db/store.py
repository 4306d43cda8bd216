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

from ..problems.keys import canonical_json
from ..problems.problem import Problem
from ..provenance.device import DeviceInfo
from ..provenance.noise import CONFIDENT, LOW, Confidence, Spread
from ..provenance.software import SoftwareInfo
from .open import open_db
from .transactions import BUSY_TIMEOUT_MS, LOCK_RETRIES, write_transaction

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
    # what Inductor's benchmark returned; ``time_ms`` is the time Inductor selected with
    # (the same, unless a ``lookup`` customisation adjusted it). None: not benchmarked here
    measured_ms: float | None = None

    @property
    def usable(self) -> bool:
        return self.status == STATUS_OK and self.time_ms is not None and math.isfinite(
            self.time_ms)

    @property
    def served_ms(self) -> float:
        """The time a later compile is handed in place of benchmarking this candidate:
        what the benchmark measured (Inductor's ``lookup`` then adjusts it as it did),
        inf for a candidate that failed or was invalid."""
        if not self.usable:
            return math.inf
        measured = self.measured_ms
        if measured is not None and math.isfinite(measured):
            return float(measured)
        return float(self.time_ms)  # type: ignore[arg-type]


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
        from ..provenance.validity import selection_changes

        return selection_changes(((r.backend, r.config) for r in self.results),
                                 self.software, software, str(self.device["kind"]))


def pick_winner(results: list[CandidateResult]) -> CandidateResult | None:
    usable = [r for r in results if r.usable]
    return min(usable, key=lambda r: (r.time_ms, r.candidate_id)) if usable else None


# Confidence rank of a stored result: high > unknown (NULL) > low.
RANKS = {CONFIDENT: 2, None: 1, LOW: 0}


def rank_of(level: str | None) -> int:
    return RANKS.get(level, 1)


def _result_row(keys: dict[str, str], r: CandidateResult, level: str | None, run_id: int,
                now: str) -> dict[str, Any]:
    spread = r.spread if r.usable else None
    measured = r.measured_ms if r.usable and r.measured_ms is not None and math.isfinite(
        r.measured_ms) else None
    return {**keys, "candidate_id": r.candidate_id, "backend": r.backend, "name": r.name,
            "config": canonical_json(r.config),
            # the time Inductor selected with; the re-measured spread is kept beside it
            "time_ms": r.time_ms if r.usable else None, "measured_ms": measured,
            "status": r.status, "error": r.error[:4000], "run_id": run_id,
            "recorded_at": now, "repeats": spread.repeats if spread else None,
            "median_ms": spread.median if spread else None,
            "iqr_ms": spread.iqr if spread else None, "cv": spread.cv if spread else None,
            "samples": json.dumps([round(x, 6) for x in spread.samples]) if spread else None,
            "confidence": level}


class TuningDB:
    """One DB file. Thread-safe: a lock serializes use of the connection.

    Its methods take their keys in the order of :class:`LayeredTuningDB`'s, with the same
    names (device, software, then the problem); reads take the problem's id (a file is
    read by its stored keys, also those of an older schema), writes the ``Problem``."""

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
        self.has_measured = "measured_ms" in db.table("results").columns_dict  # v4
        self.has_epilogues = db.table("epilogue_decisions").exists()  # v4

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
            measured = "measured_ms" if self.has_measured else "null as measured_ms"
            for w in winners:
                results = tuple(CandidateResult(
                    str(r["candidate_id"]), str(r["backend"]), str(r["name"] or ""),
                    decode_config(r["config"]), r["time_ms"], str(r["status"]),
                    measured_ms=r["measured_ms"])
                    for r in self.db.query(
                        "select candidate_id, backend, name, config, time_ms, status,"
                        f" {measured} from"
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

    def lookup(self, device: DeviceInfo, software: SoftwareInfo,
               problem_id: str) -> Winner | None:
        """The exact winner of ``problem_id`` on ``device``: recorded with any software
        under which every candidate's result still holds for ``software``
        (``validity.py``). The one recorded with ``software`` itself comes first, then
        the best-ranked, then the newest."""
        selection = self.exact_selection(device, software, problem_id)
        return selection.winner if selection is not None else None

    def exact_selection(self, device: DeviceInfo, software: SoftwareInfo,
                        problem_id: str) -> RecordedSelection | None:
        """The recorded selection :meth:`lookup` takes its winner from."""
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
                         prior: str | None = None, selected: str | None = None,
                         deferred: bool = False) -> None:
        """Store every candidate's result, then the winner, in one commit.

        ``selected`` is the candidate Inductor chose (None: the fastest of ``results`` by
        the time Inductor selected with, which is its choice unless a threshold or an
        ``override_best_choice`` hook intervened). It becomes the winner, except that:

        - confidence ranks: ``high`` over unknown (rows from before schema v2, or a caller
          that measured no spread) over ``low``. A result never replaces a stored result
          of the same candidate with a higher rank, and a selection never replaces a
          winner of a higher rank: a noisy autotune never replaces a confident winner, a
          confident one replaces a noisy one;
        - a partial autotune (a backend turned off: the stored winner was not among its
          candidates) never replaces a faster winner of the same rank.

        ``prior``: the JSON of the prior whose short list was benchmarked (``priors.py``),
        kept with a winner this selection measured. ``deferred``: Inductor deferred the
        final choice to epilogue-fusion benchmarking (``selected`` is then the GEMM-only
        winner; ``epilogue_decisions`` gets what the scheduler chose).
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
            chosen = self._chosen(keys, results, selected, level)
            if chosen is not None:
                self._store_winner(keys, chosen, confidence, now, prior, deferred)

    def _chosen(self, keys: dict[str, str], results: list[CandidateResult],
                selected: str | None, level: str | None) -> dict[str, Any] | None:
        """The winner row this selection leaves: its own choice, or the stored winner
        when that one ranks higher or this selection could not see it."""
        if selected is None:
            best = pick_winner(results)
            selected = best.candidate_id if best is not None else None
        if selected is None:
            return None  # nothing usable measured: the stored winner (if any) stays
        columns = ("candidate_id, backend, name, time_ms, run_id, recorded_at, repeats,"
                   " iqr_ms, confidence")
        where = "device_id = ? and software_id = ? and problem_id = ?"
        params = [keys["device_id"], keys["software_id"], keys["problem_id"]]
        mine = list(self.db.query(f"select {columns} from results where {where} and"
                                  " candidate_id = ? and status = 'ok' and time_ms is not"
                                  " null", [*params, selected]))
        current = list(self.db.query(
            f"select w.candidate_id, w.time_ms, w.confidence from winners w where {where}",
            params))
        if not mine:
            return None
        if not current or current[0]["candidate_id"] == selected:
            return mine[0]
        stored_rank = rank_of(current[0]["confidence"])
        if stored_rank > rank_of(level):
            return None  # a better-ranked winner stays as it was recorded
        seen = any(r.candidate_id == current[0]["candidate_id"] for r in results)
        stored_ms, my_ms = current[0]["time_ms"], mine[0]["time_ms"]
        if (not seen and stored_rank == rank_of(level) and stored_ms is not None
                and my_ms is not None and stored_ms < my_ms):
            return None  # a partial autotune: the faster winner it did not see stays
        return mine[0]

    def _store_winner(self, keys: dict[str, str], best: dict[str, Any],
                      confidence: Confidence | None, now: str,
                      prior: str | None = None, deferred: bool = False) -> None:
        current = list(self.db.query(
            "select candidate_id from winners where device_id = ? and software_id = ? and"
            " problem_id = ?", [keys["device_id"], keys["software_id"], keys["problem_id"]]))
        fresh = best.pop("recorded_at") == now  # measured by this selection
        if not fresh and current and current[0]["candidate_id"] == best["candidate_id"]:
            return  # an earlier, better-ranked winner stays as it was recorded
        row = {**keys, **best, "recorded_at": now, "deferred": int(deferred)}
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

    def record_epilogue_decision(self, device: DeviceInfo, software: SoftwareInfo,
                                 problem: Problem, decision: EpilogueDecision) -> str:
        """Store what the scheduler finally ran for one GEMM and its epilogue. Returns
        ``"new"``, ``"same"`` (the stored decision ran the same kernel the same way) or
        ``"changed"`` (the row is replaced by this newer decision)."""
        now = utc_now()
        with self.transaction():
            run_id = self.run_id()
            self._upsert_keys(device, software, problem)
            keys = {"device_id": device.id, "software_id": software.id,
                    "problem_id": decision.problem_id, "epilogue_id": decision.epilogue_id}
            current = list(self.db.query(
                "select candidate_id, fused, epilogue from epilogue_decisions where"
                " device_id = ? and software_id = ? and problem_id = ? and epilogue_id = ?",
                list(keys.values())))
            # a fusion benchmark (inductor/fusion/fusion_replay.py) is replayed from its timings:
            # new timings replace the row even when the outcome is the same
            timings_matter = decision.epilogue.get("kind") == "fusion_benchmark"
            if current and (current[0]["candidate_id"], bool(current[0]["fused"])) == (
                    decision.candidate_id, decision.fused) and (
                    not timings_matter
                    or current[0]["epilogue"] == canonical_json(decision.epilogue)):
                return "same"
            self.db.table("epilogue_decisions").upsert(
                {**keys, **decision.as_row(), "run_id": run_id, "recorded_at": now},
                pk=("device_id", "software_id", "problem_id", "epilogue_id"))
            return "changed" if current else "new"

    def epilogue_decision(self, device: DeviceInfo, software: SoftwareInfo, problem_id: str,
                          epilogue_id: str) -> dict[str, Any] | None:
        """The recorded decision of ``problem_id`` with ``epilogue_id`` made on exactly this
        device and software (``epilogue`` decoded from JSON), or None."""
        if not self.has_epilogues:
            return None
        with self._lock:
            rows = list(self.db.query(
                "select * from epilogue_decisions where device_id = ? and software_id = ?"
                " and problem_id = ? and epilogue_id = ?",
                [device.id, software.id, problem_id, epilogue_id]))
        if not rows:
            return None
        row = rows[0]
        row["epilogue"] = _decode_json(row["epilogue"])
        return row

    def epilogue_decisions(self, problem_id: str) -> list[dict[str, Any]]:
        """Every recorded epilogue decision of ``problem_id`` (any device, software), with
        the device and software it was made on; [] for a file older than schema v4."""
        if not self.has_epilogues:
            return []
        with self._lock:
            rows = list(self.db.query(
                "select e.*, d.kind, d.arch, d.name as device_name, s.torch, s.triton,"
                " s.flydsl from epilogue_decisions e join devices d on d.id = e.device_id"
                " join software s on s.id = e.software_id where e.problem_id = ?"
                " order by e.recorded_at", [problem_id]))
        for row in rows:
            row["epilogue"] = _decode_json(row["epilogue"])
        return rows

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


@dataclass(frozen=True)
class EpilogueDecision:
    """What the scheduler finally ran for one recorded GEMM selection and the pointwise
    work that consumes its output (``inductor/fusion/fusion_observer.py`` observes it)."""

    problem_id: str
    epilogue_id: str
    epilogue: dict[str, Any]  # {"ops": [...], "fused": [...], "separate": [...]}
    candidate_id: str  # the kernel the final code runs for the GEMM
    backend: str
    name: str
    fused: bool  # the epilogue (or part of it) runs inside the GEMM kernel
    gemm_winner_id: str  # the GEMM-only winner of the selection
    gemm_ms: float | None = None
    fused_ms: float | None = None
    unfused_ms: float | None = None
    decided_by: str = ""

    def as_row(self) -> dict[str, Any]:
        return {"epilogue": canonical_json(self.epilogue), "candidate_id": self.candidate_id,
                "backend": self.backend, "name": self.name, "fused": int(self.fused),
                "gemm_winner_id": self.gemm_winner_id, "gemm_ms": self.gemm_ms,
                "fused_ms": self.fused_ms, "unfused_ms": self.unfused_ms,
                "decided_by": self.decided_by}


def _decode_json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except (json.JSONDecodeError, TypeError):
        return None


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
