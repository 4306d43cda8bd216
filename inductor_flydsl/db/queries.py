"""Read-only queries behind ``inductor-flydsl db stats|list|show|export``."""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils

WINNER_LIST_SQL = """
select p.id as problem_id, p.summary, p.op, p.m, p.n, p.k, p.batch, p.dtype, p.layout,
       d.arch, d.name as device_name, d.compute_units, s.torch, s.flydsl, s.templates,
       w.backend, w.name as winner, w.candidate_id, w.time_ms, w.recorded_at,
       (select count(*) from results r where r.device_id = w.device_id
          and r.software_id = w.software_id and r.problem_id = w.problem_id) as candidates
from winners w
join problems p on p.id = w.problem_id
join devices d on d.id = w.device_id
join software s on s.id = w.software_id
"""


def db_stats(db: sqlite_utils.Database) -> dict[str, Any]:
    def count(sql: str) -> int:
        return int(next(iter(db.query(sql)))["n"])

    by_backend = {row["backend"]: row["n"] for row in db.query(
        "select backend, count(*) as n from winners group by backend order by n desc")}
    by_status = {row["status"]: row["n"] for row in db.query(
        "select status, count(*) as n from results group by status order by n desc")}
    return {
        "problems": count("select count(distinct problem_id) as n from winners"),
        "problem_keys": count("select count(*) as n from problems"),
        "results": count("select count(*) as n from results"),
        "winners": count("select count(*) as n from winners"),
        "misses": count("select count(*) as n from misses"),
        "misses_untuned": count(
            "select count(*) as n from misses m where not exists (select 1 from winners w"
            " where w.device_id = m.device_id and w.software_id = m.software_id"
            " and w.problem_id = m.problem_id)"),
        "devices": count("select count(*) as n from devices"),
        "software": count("select count(*) as n from software"),
        "runs": count("select count(*) as n from runs"),
        "compile_catalog": count("select count(*) as n from compile_catalog"),
        "winners_by_backend": by_backend,
        "results_by_status": by_status,
    }


def version_and_winners(db: sqlite_utils.Database) -> tuple[str | None, int]:
    """The file's schema version (None: not recorded) and how many winners it holds
    (``doctor``'s one line per DB)."""
    version = db.execute("select value from meta where key = 'schema_version'").fetchone()
    winners = db.execute("select count(*) from winners").fetchone()[0]
    return (str(version[0]) if version else None), int(winners)


def parse_shape(text: str) -> tuple[int, ...]:
    """``MxNxK`` or ``BxMxNxK`` (batch first), as ``db list --shape`` takes it."""
    form = "use MxNxK or BxMxNxK with positive whole numbers, e.g. 8x4096x4096"
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--shape {text!r}: {form}") from None
    if len(dims) not in (3, 4) or any(d <= 0 for d in dims):
        raise ValueError(f"--shape {text!r}: {form}")
    return dims


def list_winners(db: sqlite_utils.Database, *, op: str | None = None,
                 device: str | None = None, shape: str | None = None,
                 limit: int | None = None) -> list[dict[str, Any]]:
    where, params = [], []
    if op:
        where.append("p.op = ?")
        params.append(op)
    if device:
        where.append("(d.arch like ? or d.name like ?)")
        params += [f"%{device}%", f"%{device}%"]
    if shape:
        dims = parse_shape(shape)
        if len(dims) == 4:
            where.append("p.batch = ?")
            params.append(dims[0])
            dims = dims[1:]
        where.append("p.m = ? and p.n = ? and p.k = ?")
        params += list(dims)
    sql = WINNER_LIST_SQL + (" where " + " and ".join(where) if where else "")
    sql += " order by p.op, p.m, p.n, p.k, d.arch"
    if limit:
        sql += f" limit {int(limit)}"
    return list(db.query(sql, params))


def find_problems(db: sqlite_utils.Database, ref: str) -> list[dict[str, Any]]:
    """Problems whose id starts with ``ref`` or whose summary contains it."""
    return list(db.query("select * from problems where id like ? or summary like ?"
                         " order by summary", [f"{ref}%", f"%{ref}%"]))


def _has_confidence(db: sqlite_utils.Database) -> bool:
    """Schema version 2 columns present (a read-only version-1 file lacks them)."""
    return "confidence" in db.table("winners").columns_dict


def winner_confidence(db: sqlite_utils.Database, problem_id: str) -> list[dict[str, Any]]:
    """Each recorded winner of ``problem_id`` with its confidence and spread (None:
    unknown, recorded before schema version 2)."""
    extra = ("w.confidence, w.confidence_reason, w.repeats, w.iqr_ms, w.runner_up_ms,"
             " w.busy" if _has_confidence(db) else
             "null as confidence, null as confidence_reason, null as repeats,"
             " null as iqr_ms, null as runner_up_ms, null as busy")
    return list(db.query(
        f"select d.arch, w.name as winner, w.backend, w.time_ms, {extra} from winners w"
        " join devices d on d.id = w.device_id where w.problem_id = ? order by d.arch",
        [problem_id]))


def describe_confidence(row: dict[str, Any]) -> str:
    """One line: ``confidence high, 5 repeats, IQR 0.0071 ms, runner-up 0.42 ms``."""
    if row.get("confidence") is None:
        return "confidence unknown (recorded before timings had a spread)"
    parts = [f"confidence {row['confidence']}"]
    if row.get("repeats"):
        parts.append(f"{row['repeats']} repeats")
    if row.get("iqr_ms") is not None:
        parts.append(f"IQR {row['iqr_ms']:.4g} ms")
    if row.get("runner_up_ms") is not None:
        parts.append(f"runner-up {row['runner_up_ms']:.4g} ms")
    text = ", ".join(parts)
    return f"{text} ({row['confidence_reason']})" if row.get("confidence_reason") else text


def describe_winner(row: dict[str, Any]) -> str:
    """``<arch>: <winner> <ms> ms, <confidence line>`` for ``db show`` and ``explain``."""
    ms = f"{row['time_ms']:.4g} ms" if row.get("time_ms") is not None else "no time"
    return f"{row['arch']}: {row['winner']} {ms}, {describe_confidence(row)}"


def problem_detail(db: sqlite_utils.Database, problem_id: str) -> dict[str, Any]:
    spread = ("r.repeats, r.iqr_ms, r.confidence" if _has_confidence(db) else
              "null as repeats, null as iqr_ms, null as confidence")
    spread += (", r.measured_ms" if "measured_ms" in db.table("results").columns_dict
               else ", null as measured_ms")
    results = list(db.query(
        "select d.arch, d.name as device_name, s.torch, s.flydsl, s.templates, r.backend,"
        f" r.name, r.candidate_id, r.config, r.time_ms, {spread}, r.status, r.error,"
        " r.recorded_at,"
        " (w.candidate_id = r.candidate_id) as is_winner"
        " from results r join devices d on d.id = r.device_id"
        " join software s on s.id = r.software_id"
        " left join winners w on w.device_id = r.device_id and w.software_id = r.software_id"
        " and w.problem_id = r.problem_id"
        " where r.problem_id = ? order by d.arch, r.time_ms is null, r.time_ms", [problem_id]))
    misses = list(db.query(
        "select d.arch, m.count, m.first_seen, m.last_seen from misses m"
        " join devices d on d.id = m.device_id where m.problem_id = ?", [problem_id]))
    return {"results": results, "misses": misses,
            "winners": winner_confidence(db, problem_id),
            "epilogues": epilogue_decisions(db, problem_id)}


def epilogue_decisions(db: sqlite_utils.Database, problem_id: str) -> list[dict[str, Any]]:
    """What the scheduler finally ran for the problem's GEMM with each epilogue it met
    (``inductor/fusion/fusion_observer.py``); [] for a file older than schema version 4."""
    if not db.table("epilogue_decisions").exists():
        return []
    rows = list(db.query(
        "select d.arch, e.epilogue, e.name, e.backend, e.candidate_id, e.fused,"
        " e.gemm_winner_id, e.gemm_ms, e.fused_ms, e.unfused_ms, e.decided_by, e.recorded_at"
        " from epilogue_decisions e join devices d on d.id = e.device_id"
        " where e.problem_id = ? order by d.arch, e.epilogue", [problem_id]))
    for row in rows:
        try:
            row["epilogue"] = json.loads(row["epilogue"])
        except (TypeError, ValueError):
            row["epilogue"] = {"ops": []}
        row["fused"] = bool(row["fused"])
    return rows


def describe_epilogue(row: dict[str, Any]) -> str:
    """``<arch>: epilogue [relu] -> <kernel> (cpp), fused into the GEMM kernel; <how>``."""
    ops = row["epilogue"].get("ops") or []
    what = f"epilogue [{', '.join(ops)}]" if ops else "no epilogue"
    how = ("fused into the GEMM kernel" if row["fused"] else
           "separate epilogue kernel" if ops else "GEMM alone")
    times = []
    # inductor/fusion/fusion_replay.py
    benchmark = row["epilogue"].get("kind") == "fusion_benchmark"
    unfused = "GEMM-only winner + epilogue kernel" if benchmark else "GEMM-only winner"
    for key, label in (("fused_ms", "fused"), ("unfused_ms", unfused)):
        if row.get(key) is not None:
            times.append(f"{label} {row[key]:.4g} ms")
    extra = f" [{', '.join(times)}]" if times else ""
    if benchmark:
        what = f"fusion benchmark of {what}"
    return (f"{row['arch']}: {what} -> {row['name'] or row['candidate_id']} "
            f"({row['backend']}), {how}{extra}; {row['decided_by']}")


def export_rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every result joined with its problem, device and software (the CSV export)."""
    return list(db.query(
        "select p.summary, p.op, p.m, p.n, p.k, p.batch, p.dtype, p.layout,"
        " d.arch, d.name as device_name, d.compute_units,"
        " s.torch, s.triton, s.flydsl, s.templates,"
        " r.backend, r.name, r.candidate_id, r.config, r.time_ms, r.status, r.error,"
        " (w.candidate_id = r.candidate_id) as is_winner, r.recorded_at, r.run_id,"
        " r.problem_id, r.device_id, r.software_id"
        " from results r join problems p on p.id = r.problem_id"
        " join devices d on d.id = r.device_id join software s on s.id = r.software_id"
        " left join winners w on w.device_id = r.device_id and w.software_id = r.software_id"
        " and w.problem_id = r.problem_id order by p.op, p.m, p.n, p.k, d.arch, r.time_ms"))


def bucket_status(db: sqlite_utils.Database, problem: Any) -> dict[str, Any]:
    """Which dynamic-M bucket serves ``problem`` (a ``Problem``) and on which archs the DB
    holds a winner for it (see ``buckets.py``). A dynamic problem (symbolic dims) gets
    ``dynamic``: which dims are symbolic and the M hint it is keyed at; it is served by
    its own record (``exact_winner_archs``), else (opt-in) by the bucket."""
    from ..problems.buckets import bucket_m, bucket_problem

    m = problem.mnk[0]
    exact = [r["arch"] for r in db.query(
        "select d.arch from winners w join devices d on d.id = w.device_id"
        " where w.problem_id = ?", [problem.id])]
    bucket = bucket_problem(problem)
    info: dict[str, Any] = {"m": m, "bucket_m": bucket_m(m), "exact_winner_archs": exact,
                            "exact_winners": winner_confidence(db, problem.id),
                            "bucket_problem_id": None, "bucket_winner_archs": []}
    if problem.dynamic:
        info["dynamic"] = {"symbolic": problem.symbolic_text(), "keyed_m": m}
    if bucket is not None:
        info["bucket_problem_id"] = bucket[0].id
        info["bucket_winner_archs"] = [r["arch"] for r in db.query(
            "select d.arch from winners w join devices d on d.id = w.device_id"
            " where w.problem_id = ?", [bucket[0].id])]
    return info
