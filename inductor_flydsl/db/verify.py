"""``db verify``: schema and row checks of a tuning DB (all values treated as untrusted).

Two kinds of findings:
- errors: real corruption (a spec that is not JSON or not the content its id hashes,
  rows pointing at missing rows, impossible values); ``db verify`` exits 1 and
  ``db merge`` refuses the file;
- notes: intact rows this version does not know (a problem spec with fields of a newer
  plugin, or outside this version's bounds, whose id still matches its content) and
  problems refused at record time; reported, exit 0, merged as they are.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from ..problems.keys import stable_id
from ..problems.problem import InvalidProblem, Problem, UnknownProblem
from ..provenance.device import DeviceInfo
from ..provenance.software import SoftwareInfo
from .open import UnusableDB, open_db
from .store import REFUSED_PREFIX, STATUS_OK, STATUSES

MAX_REPORTED = 50


@dataclass
class VerifyReport:
    errors: list[str] = field(default_factory=list)  # corruption: exit 1
    notes: list[str] = field(default_factory=list)  # intact but unknown here: exit 0


def _json_dict(text: object) -> bool:
    try:
        return isinstance(json.loads(str(text)), dict)
    except (json.JSONDecodeError, TypeError):
        return False


def _rows(db: sqlite_utils.Database, sql: str) -> list[dict]:
    return list(db.query(sql))


def verify_db(db: sqlite_utils.Database) -> list[str]:
    """Every corruption found, one line each (empty list: the DB is sound)."""
    return verify_report(db).errors


def _check_problem(row: dict, report: VerifyReport) -> None:
    where = f"problems row {row['id']!r} ({str(row.get('summary'))[:80]!r})"
    try:
        raw = json.loads(row["spec"])
    except (json.JSONDecodeError, TypeError, RecursionError) as exc:
        report.errors.append(f"{where}: bad spec: not JSON ({exc})")
        return
    try:
        intact = stable_id(raw) == row["id"]
    except (TypeError, ValueError, RecursionError) as exc:
        report.errors.append(f"{where}: bad spec: cannot be hashed ({exc})")
        return
    if not intact:
        report.errors.append(f"{where}: bad spec: the id does not match its spec "
                             "(corrupt or edited)")
        return
    try:
        if Problem.from_spec(raw).id != row["id"]:  # e.g. a spec without "epilogue"
            report.notes.append(f"{where}: not in this version's canonical form (it reads "
                                "back as another id); kept as is, never served")
    except UnknownProblem as exc:
        report.notes.append(f"{where}: not known to this version ({exc}); kept as is")
    except InvalidProblem as exc:
        report.notes.append(f"{where}: outside this version's definition of a problem "
                            f"({exc}); kept as is, never served")


def verify_report(db: sqlite_utils.Database) -> VerifyReport:
    report = VerifyReport()
    issues = report.errors
    integrity = [r[0] for r in db.execute("pragma integrity_check").fetchall()]
    if integrity != ["ok"]:
        issues += [f"integrity: {line}" for line in integrity[:MAX_REPORTED]]

    for row in _rows(db, "select * from devices"):
        try:
            info = DeviceInfo(kind=str(row["kind"]), arch=str(row["arch"]),
                              name=str(row["name"]), compute_units=int(row["compute_units"]))
            if info.id != row["id"]:
                issues.append(f"devices: id {row['id']} does not match its content")
        except (TypeError, ValueError) as exc:
            issues.append(f"devices: bad row {row.get('id')}: {exc}")
    for row in _rows(db, "select * from software"):
        info = SoftwareInfo(torch=str(row["torch"]), triton=str(row["triton"]),
                            flydsl=str(row["flydsl"]), templates=str(row["templates"]),
                            blas=str(row.get("blas") or ""))  # NULL: before schema v3
        if info.id != row["id"]:
            issues.append(f"software: id {row['id']} does not match its content")
    for row in _rows(db, "select id, summary, spec from problems"):
        _check_problem(row, report)
    for row in db.query("select problem_id, count from misses where problem_id like ?",
                        [f"{REFUSED_PREFIX}%"]):
        report.notes.append(f"misses: {row['problem_id']} ({row['count']}x)")

    for row in _rows(db, "select * from results"):
        where = f"results: {row['problem_id']}/{row['candidate_id']}"
        if row["status"] not in STATUSES:
            issues.append(f"{where}: unknown status {row['status']!r}")
        t = row["time_ms"]
        if t is not None and (not isinstance(t, int | float) or not math.isfinite(t) or t < 0):
            issues.append(f"{where}: bad time_ms {t!r}")
        if row["status"] == STATUS_OK and t is None:
            issues.append(f"{where}: status ok without a time")
        if not _json_dict(row["config"]):
            issues.append(f"{where}: config is not a JSON object")
    issues += _orphans(db)
    for row in _rows(db, "select * from winners w where not exists (select 1 from results r"
                     " where r.device_id = w.device_id and r.software_id = w.software_id"
                     " and r.problem_id = w.problem_id and r.candidate_id = w.candidate_id"
                     " and r.status = 'ok')"):
        issues.append(f"winners: {row['problem_id']} names {row['candidate_id']}, which has "
                      "no ok result")
    if db.table("epilogue_decisions").exists():  # schema v4
        for row in _rows(db, "select * from epilogue_decisions"):
            where = f"epilogue_decisions: {row['problem_id']}/{row['epilogue_id']}"
            if row["fused"] not in (0, 1) or not _json_dict(row["epilogue"]):
                issues.append(f"{where}: bad row (fused {row['fused']!r}, epilogue not a "
                              "JSON object)")
            for key in ("gemm_ms", "fused_ms", "unfused_ms"):
                t = row[key]
                if t is not None and (not isinstance(t, int | float) or not math.isfinite(t)
                                      or t < 0):
                    issues.append(f"{where}: bad {key} {t!r}")
    for row in _rows(db, "select * from misses where count < 1"):
        issues.append(f"misses: {row['problem_id']} has count {row['count']}")
    for row in _rows(db, "select * from compile_catalog"):
        if row["ok"] not in (0, 1) or not _json_dict(row["config"]):
            issues.append(f"compile_catalog: bad row {row['template']}/{row['config_id']}")
        elif stable_id(json.loads(row["config"])) != row["config_id"]:
            issues.append(f"compile_catalog: config_id {row['config_id']} does not match")
    report.errors = issues[:MAX_REPORTED * 4]
    report.notes = report.notes[:MAX_REPORTED * 4]
    return report


def _orphans(db: sqlite_utils.Database) -> list[str]:
    issues = []
    tables = ["results", "winners", "misses"]
    if db.table("epilogue_decisions").exists():
        tables.append("epilogue_decisions")
    for table in tables:
        for column, target in (("device_id", "devices"), ("software_id", "software"),
                               ("problem_id", "problems")):
            # a refused problem has no problems row by design (its id holds the reason)
            refused = (f" and t.problem_id not like '{REFUSED_PREFIX}%'"
                       if table == "misses" and column == "problem_id" else "")
            n = next(iter(db.query(
                f"select count(*) as n from {table} t where not exists"
                f" (select 1 from {target} x where x.id = t.{column}){refused}")))["n"]
            if n:
                issues.append(f"{table}: {n} rows reference a missing {target} row")
    return issues


def verify_path(path: Path) -> list[str]:
    """The corruption found in the file at ``path`` (see :func:`verify_path_report`)."""
    return verify_path_report(path).errors


def verify_path_report(path: Path) -> VerifyReport:
    try:
        db = open_db(path, writable=False)
    except UnusableDB as exc:
        return VerifyReport(errors=[str(exc)])
    try:
        return verify_report(db)
    except sqlite3.DatabaseError as exc:
        return VerifyReport(errors=[f"{path}: {exc}"])
    finally:
        db.close()
