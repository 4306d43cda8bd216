"""Read-only queries behind ``inductor-flydsl report`` and the model's predicted-against-
measured comparison. Each table-shaped answer is ``(columns, rows)``, so an empty answer
still names its columns."""

from __future__ import annotations

from typing import Any

import sqlite_utils

Columns = list[str]
Table = tuple[Columns, list[tuple[Any, ...]]]

CONFIDENCE_SQL = ("w.confidence, w.iqr_ms as winner_iqr_ms, w.repeats as winner_repeats,"
                  " w.runner_up_ms, w.confidence_reason")
NO_CONFIDENCE_SQL = ("null as confidence, null as winner_iqr_ms, null as winner_repeats,"
                     " null as runner_up_ms, null as confidence_reason")


def _table(db: sqlite_utils.Database, sql: str) -> Table:
    cursor = db.execute(sql)
    return [c[0] for c in cursor.description], cursor.fetchall()


def _has_column(db: sqlite_utils.Database, table: str, column: str) -> bool:
    return column in db.table(table).columns_dict


def winners(db: sqlite_utils.Database) -> Table:
    """Every winner with its problem, device and torch (confidence columns NULL in a file
    of schema version 1)."""
    spread = CONFIDENCE_SQL if _has_column(db, "winners", "confidence") else NO_CONFIDENCE_SQL
    return _table(db, f"""
        select w.device_id, w.software_id, w.problem_id, w.candidate_id as winner_candidate,
               w.backend as winner_backend, w.name as winner, w.time_ms as winner_ms,
               {spread}, p.summary as problem, p.op, p.m, p.n, p.k, p.batch, p.dtype, p.layout,
               d.arch, d.name as device_name, d.compute_units, s.torch
        from winners w join problems p on p.id = w.problem_id
        join devices d on d.id = w.device_id join software s on s.id = w.software_id""")


def results(db: sqlite_utils.Database) -> Table:
    """Every candidate's result: its keys, backend, name, time and status."""
    return _table(db, "select device_id, software_id, problem_id, candidate_id, backend,"
                      " name, time_ms, status from results")


def failed_candidates(db: sqlite_utils.Database) -> Table:
    return _table(db, """
        select d.arch, p.summary as problem, r.backend, r.name, r.status, r.error,
               r.problem_id, r.candidate_id
        from results r join problems p on p.id = r.problem_id
        join devices d on d.id = r.device_id
        where r.status != 'ok' order by p.summary, r.backend, r.name""")


def catalog_summary(db: sqlite_utils.Database) -> Table:
    """Per (arch, template, op, dtype, layout) of ``compile_catalog``: configs, ok,
    failed, spilling, the largest VGPR and LDS use and the mean compile time."""
    return _table(db, """
        select arch, template, op, dtype, layout, count(*) as configs, sum(ok) as ok,
               count(*) - sum(ok) as failed,
               sum(coalesce(vgpr_spills, 0) > 0 or coalesce(sgpr_spills, 0) > 0) as spilling,
               max(vgprs) as max_vgprs, max(lds_bytes) as max_lds_bytes,
               round(avg(compile_s), 3) as mean_compile_s
        from compile_catalog group by arch, template, op, dtype, layout
        order by arch, template, op, dtype, layout""")


def misses(db: sqlite_utils.Database) -> Table:
    """Every recorded miss, untuned first, with ``tuned``: a winner exists since."""
    return _table(db, """
        select d.arch, p.summary as problem, m.count, m.first_seen, m.last_seen,
               m.problem_id, m.device_id, m.software_id,
               exists (select 1 from winners w where w.device_id = m.device_id
                       and w.software_id = m.software_id
                       and w.problem_id = m.problem_id) as tuned
        from misses m join problems p on p.id = m.problem_id
        join devices d on d.id = m.device_id
        order by tuned, m.count desc, p.summary""")


def sweep_summary(db: sqlite_utils.Database) -> Table:
    """Sweep items per arch and status, with their seconds."""
    return _table(db, """
        select d.arch, s.status, count(*) as items, round(sum(s.seconds), 1) as seconds
        from sweep_status s left join devices d on d.id = s.device_id
        group by d.arch, s.status order by d.arch, s.status""")


def flydsl_measurements(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every ok FlyDSL result with a time recorded on a ROCm device, with its device and
    problem (``measured_ms`` NULL in a file older than schema version 4)."""
    measured = ("r.measured_ms" if _has_column(db, "results", "measured_ms")
                else "null as measured_ms")
    columns, rows = _table(db, f"""
        select r.device_id, r.software_id, r.problem_id, r.candidate_id, r.name, r.config,
               r.time_ms, {measured}, d.arch, d.name as device_name, d.compute_units,
               p.summary as problem, p.spec
        from results r join devices d on d.id = r.device_id
        join problems p on p.id = r.problem_id
        where r.backend = 'flydsl' and r.status = 'ok' and r.time_ms is not null
          and d.kind = 'rocm'
        order by d.arch, d.name, p.summary, r.software_id, r.candidate_id""")
    return [dict(zip(columns, row, strict=True)) for row in rows]
