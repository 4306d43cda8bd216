"""The user's DB layered over the read-only shipped DBs, failing soft.

Lookups try the user's DB first (it wins on conflict), then each shipped DB. Writes go to
the user's DB only, and only in readwrite mode. Any problem with a file (unusable, locked
past every retry, disk full) is reported once as a warning and that file is left alone
for the rest of the process: the compile always goes on.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..problems.problem import Problem
from ..provenance.device import DeviceInfo
from ..provenance.noise import Confidence
from ..provenance.software import SoftwareInfo
from ..settings import ENV_DB, ENV_MODE, Mode, Settings
from ..telemetry.user_warnings import warn_once
from .open import UnusableDB, is_read_only_place
from .shipped import shipped_db_paths
from .store import (
    CandidateResult,
    EpilogueDecision,
    RecordedSelection,
    TuningDB,
    Winner,
    is_disk_full,
)
from .user_path import missing_folder, unusable_fix

T = TypeVar("T")
# A compile never waits long for the DB: another writer (a merge, a pack, a sweep) may hold
# it; after this the write is dropped with one warning and the compile goes on.
COMPILE_BUSY_TIMEOUT_MS = 5_000
COMPILE_LOCK_RETRIES = 2


class LayeredTuningDB:
    """The user's DB over the shipped ones: reads go through the layers, writes to the
    user's DB. Methods named and ordered as :class:`TuningDB`'s (device, software, then
    the ``Problem``)."""

    def __init__(self, settings: Settings, shipped_paths: list[Path] | None = None) -> None:
        """``shipped_paths``: the read-only DBs under the user's (default: the package's)."""
        self.settings = settings
        self._shipped_paths = shipped_paths
        self._lock = threading.Lock()
        self._user: TuningDB | None = None
        self._user_failed = False
        self._write_disabled = settings.mode is not Mode.READWRITE
        self._shipped: list[TuningDB] | None = None

    # ---- opening --------------------------------------------------------------------
    def user_db(self) -> TuningDB | None:
        with self._lock:
            if self._user is None and not self._user_failed:
                for key, problem, consequence in self._open_user_layer():
                    warn_once(key, f"inductor_flydsl: {problem}. {consequence}")
            return self._user

    def check_user_db(self) -> list[str]:
        """Open the user's DB now, as the first compile would, and return what that would
        warn about (``enable(strict=True)`` raises it instead); nothing is warned."""
        with self._lock:
            if self._user is None and not self._user_failed:
                return [problem for _, problem, _ in self._open_user_layer()]
            return []

    def _open_user_layer(self) -> list[tuple[str, str, str]]:
        """Open the user's DB (``self._user``, or ``self._user_failed``); return the
        problems as (warning key, what is wrong, what the plugin does about it)."""
        path = self.settings.db_path
        no_folder = missing_folder(self.settings)
        if no_folder is not None:  # an explicit path's folder is never created
            self._user_failed = True
            return [(f"user:{path}", f"tuning DB not used: {no_folder}",
                     "Compilation continues as plain max-autotune; nothing is recorded.")]
        wants_writes = self.settings.mode is Mode.READWRITE
        read_only_here = wants_writes and is_read_only_place(path)
        try:
            try:
                self._user = self._open_user(writable=wants_writes and not read_only_here)
            except UnusableDB as exc:
                # a read-only mount os.access did not see: SQLite refused a write
                if not wants_writes or read_only_here or "readonly" not in str(exc):
                    raise
                read_only_here = True
                self._user = self._open_user(writable=False)
        except (UnusableDB, sqlite3.Error, OSError) as exc:
            self._user_failed = True
            fix = f" {unusable_fix(self.settings)}" if isinstance(exc, UnusableDB) else ""
            return [(f"user:{path}", f"tuning DB not used: {exc}",
                     "Compilation continues as plain max-autotune; the file was not "
                     f"modified.{fix}")]
        if read_only_here:
            return [(f"read-only:{path}",
                     f"tuning DB {path} is read-only here (the file or its folder cannot be "
                     "written)", "Its recorded winners are served, but this process records "
                     f"nothing. Point {ENV_DB} at a writable file to record, or set "
                     f"{ENV_MODE}=readonly to silence this warning.")]
        return []

    def _open_user(self, *, writable: bool) -> TuningDB:
        return TuningDB.open(self.settings.db_path, writable=writable,
                             busy_timeout_ms=COMPILE_BUSY_TIMEOUT_MS,
                             lock_retries=COMPILE_LOCK_RETRIES)

    def shipped_dbs(self) -> list[TuningDB]:
        with self._lock:
            if self._shipped is None:
                self._shipped = []
                if self.settings.use_shipped:
                    paths = (shipped_db_paths() if self._shipped_paths is None
                             else self._shipped_paths)
                    for path in paths:
                        try:
                            self._shipped.append(TuningDB.open(path, writable=False,
                                                           immutable=True))
                        except (UnusableDB, sqlite3.Error, OSError) as exc:
                            warn_once(f"shipped:{path}",
                                      f"inductor_flydsl: shipped tuning DB not used: {exc}")
            return self._shipped

    def close(self) -> None:
        with self._lock:
            for db in [self._user, *(self._shipped or [])]:
                if db is not None:
                    db.close()
            self._user, self._shipped = None, None

    # ---- reads ----------------------------------------------------------------------
    def _readable(self) -> list[TuningDB]:
        user = self.user_db()
        return [user, *self.shipped_dbs()] if user else self.shipped_dbs()

    def lookup(self, device: DeviceInfo, software: SoftwareInfo,
               problem: Problem) -> Winner | None:
        """The exact winner (every recorded result still holds for ``software``), from
        the user's DB first, then the shipped ones."""
        selection = self.exact_selection(device, software, problem)
        return selection.winner if selection is not None else None

    def exact_selection(self, device: DeviceInfo, software: SoftwareInfo,
                        problem: Problem) -> RecordedSelection | None:
        """The exact recorded selection (every result still holds for ``software``) with
        every candidate's result, from the user's DB first, then the shipped ones."""
        return self._first_layer(lambda db: db.exact_selection(device, software, problem.id))

    def epilogue_decision(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem,
                          epilogue_id: str) -> dict[str, Any] | None:
        """The recorded epilogue decision for exactly this device and software, from the
        user's DB first, then the shipped ones (``TuningDB.epilogue_decision``)."""
        return self._first_layer(
            lambda db: db.epilogue_decision(device, software, problem.id, epilogue_id))

    def _first_layer(self, read: Callable[[TuningDB], T | None]) -> T | None:
        """What ``read`` finds in the first readable layer that has it (a layer that
        cannot be read is warned about once and skipped)."""
        for db in self._readable():
            try:
                found = read(db)
            except sqlite3.Error as exc:
                warn_once(f"read:{db.path}", f"inductor_flydsl: cannot read {db.path}: {exc}")
                continue
            if found is not None:
                return found
        return None

    def lookup_routed(self, device: DeviceInfo, software: SoftwareInfo,
                      problem: Problem) -> Winner | None:
        """A grouped GEMM measured under two or more token routings (``routing.py``: the
        plain key is Inductor's own routing, the others ``routing=<name>``): the candidate
        with the best worst case over them, from the first layer that holds a routed
        record. The first layer holding any exact record of the problem decides (the
        user's DB before the shipped ones, as for :meth:`lookup`): None when that layer
        has fewer than two routings of it."""
        from ..problems import routing

        variants = {"inductor": problem} | {
            r: routing.routed(problem, r) for r in routing.MEASURED_ROUTINGS}
        for db in self._readable():
            try:
                selections = {r: db.exact_selection(device, software, p.id)
                              for r, p in variants.items()}
            except sqlite3.Error as exc:
                warn_once(f"read:{db.path}", f"inductor_flydsl: cannot read {db.path}: {exc}")
                continue
            found = {r: s for r, s in selections.items() if s is not None}
            if not found:
                continue  # nothing here: the next layer
            if len(found) < 2:
                return None  # this layer decides: its plain (or single routed) record
            times = {r: {c.candidate_id: c.time_ms for c in s.results if c.usable}
                     for r, s in found.items()}
            chosen = routing.worst_case_winner(times)
            if chosen is None:
                return None
            candidate, worst, _ = chosen
            result = next(c for s in found.values() for c in s.results
                          if c.candidate_id == candidate and c.usable)
            return Winner(candidate_id=candidate, backend=result.backend, name=result.name,
                          time_ms=result.time_ms, source=f"{db.path} (routings "
                          f"{','.join(sorted(found))}, worst {worst:.2f}x)",
                          config=dict(result.config))
        return None

    def selections_by_layer(self, device: DeviceInfo,
                            problem: Problem) -> list[list[RecordedSelection]]:
        """Every recorded selection of ``problem`` on devices of this kind and arch, per
        layer (the user's DB first): what ``priors.find_prior`` ranks."""
        per_db: list[list[RecordedSelection]] = []
        for db in self._readable():
            try:
                per_db.append(db.recorded_selections(problem.id, device.kind, device.arch))
            except sqlite3.Error as exc:
                warn_once(f"read:{db.path}", f"inductor_flydsl: cannot read {db.path}: {exc}")
        return per_db

    # ---- writes ---------------------------------------------------------------------
    def _writable_db(self) -> TuningDB | None:
        if self._write_disabled:
            return None
        db = self.user_db()
        return db if db is not None and db.writable else None

    def _write_failed(self, db: TuningDB, exc: BaseException) -> None:
        if is_disk_full(exc):
            self._write_disabled = True
            warn_once(f"full:{db.path}", f"inductor_flydsl: disk full writing {db.path}; "
                      "no further results are recorded in this process (existing rows kept).")
        else:
            warn_once(f"write:{db.path}:{type(exc).__name__}",
                      f"inductor_flydsl: could not write {db.path}: {exc}")

    def can_write(self) -> bool:
        """Whether a selection would be recorded (readwrite mode, a usable user DB)."""
        return self._writable_db() is not None

    def record_selection(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem,
                         results: list[CandidateResult],
                         confidence: Confidence | None = None,
                         prior: str | None = None, selected: str | None = None,
                         deferred: bool = False) -> bool:
        db = self._writable_db()
        if db is None:
            return False
        try:
            db.record_selection(device, software, problem, results, confidence, prior,
                                selected=selected, deferred=deferred)
            return True
        except sqlite3.Error as exc:
            self._write_failed(db, exc)
            return False

    def record_epilogue_decision(self, device: DeviceInfo, software: SoftwareInfo,
                                 problem: Problem,
                                 decision: EpilogueDecision) -> str | None:
        """``"new"``, ``"same"`` or ``"changed"`` (``TuningDB.record_epilogue_decision``);
        None when nothing can be written."""
        db = self._writable_db()
        if db is None:
            return None
        try:
            return db.record_epilogue_decision(device, software, problem, decision)
        except sqlite3.Error as exc:
            self._write_failed(db, exc)
            return None

    def record_miss(self, device: DeviceInfo, software: SoftwareInfo, problem: Problem) -> None:
        db = self._writable_db()
        if db is None:
            return
        try:
            db.record_miss(device, software, problem)
        except sqlite3.Error as exc:
            self._write_failed(db, exc)

    def record_refusal(self, device: DeviceInfo, software: SoftwareInfo, op: str,
                       reason: str) -> None:
        db = self._writable_db()
        if db is None:
            return
        try:
            db.record_refusal(device, software, op, reason)
        except sqlite3.Error as exc:
            self._write_failed(db, exc)
