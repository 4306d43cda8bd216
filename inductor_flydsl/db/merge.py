"""``db merge SRC... --into DST``.

Conflict rule, per (device, software, problem):
- winners: the more confident winner wins (``high`` over unknown over ``low``, see
  ``store.rank_of``); of two equally confident ones the faster; on a tie DST keeps its own;
- results: rows DST lacks are added; DST keeps its own row for a candidate it has, unless
  SRC's row is more confident;
- misses: counts add up, first/last seen widen;
- epilogue decisions: rows DST lacks are added (DST keeps its own for an epilogue);
- compile catalog and sweep status: rows DST lacks are added (a failed sweep status in DST
  is replaced by a finished one from SRC).
Provenance: each SRC run is copied into DST's ``runs`` with a new id and
``merged_from = "<src path>#run<old id>"``; copied rows point at the new ids. Sources are
verified first; a source with problems is refused before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from .open import open_db
from .store import TuningDB, rank_of
from .verify import verify_db


class MergeError(Exception):
    pass


@dataclass
class MergeReport:
    sources: list[str] = field(default_factory=list)
    results_added: int = 0
    winners_added: int = 0
    winners_replaced: int = 0
    winners_kept: int = 0
    misses_merged: int = 0
    epilogues_added: int = 0
    catalog_added: int = 0


def _copy_runs(src: sqlite_utils.Database, dst: sqlite_utils.Database,
               src_path: Path) -> dict[int, int]:
    mapping: dict[int, int] = {}
    runs = dst.table("runs")
    for row in src.query("select * from runs order by id"):
        old = int(row.pop("id"))
        row["merged_from"] = row.get("merged_from") or f"{src_path}#run{old}"
        runs.insert(row)
        mapping[old] = int(runs.last_pk)
    return mapping


def _merge_one(src: sqlite_utils.Database, dst: sqlite_utils.Database, src_path: Path,
               report: MergeReport) -> None:
    runs = _copy_runs(src, dst, src_path)
    for table in ("devices", "software", "problems"):
        dst.table(table).insert_all(src.query(f"select * from {table}"), pk="id", ignore=True)
    key = ("device_id", "software_id", "problem_id")
    before = dst.table("results").count
    rows = [{**r, "run_id": runs.get(r["run_id"], None)} for r in
            src.query("select * from results")]
    dst.table("results").insert_all(rows, pk=(*key, "candidate_id"), ignore=True)
    report.results_added += dst.table("results").count - before
    _upgrade_results(dst, rows)
    for w in src.query("select * from winners"):
        w["run_id"] = runs.get(w["run_id"], None)
        current = list(dst.query("select time_ms, confidence from winners where"
                                 " device_id = ? and software_id = ? and problem_id = ?",
                                 [w["device_id"], w["software_id"], w["problem_id"]]))
        if current and not _better(w, current[0]):
            report.winners_kept += 1
            continue
        dst.table("winners").upsert(w, pk=key)
        # the winner's own result row comes along (replacing DST's row for that candidate,
        # e.g. a failed one), so every winner keeps an ok result
        for r in src.query("select * from results where device_id = ? and software_id = ?"
                           " and problem_id = ? and candidate_id = ?",
                           [w["device_id"], w["software_id"], w["problem_id"],
                            w["candidate_id"]]):
            r["run_id"] = runs.get(r["run_id"], None)
            dst.table("results").upsert(r, pk=(*key, "candidate_id"))
        if current:
            report.winners_replaced += 1
        else:
            report.winners_added += 1
    for m in src.query("select * from misses"):
        dst.execute(
            "insert into misses (device_id, software_id, problem_id, count, first_seen,"
            " last_seen) values (?, ?, ?, ?, ?, ?) on conflict (device_id, software_id,"
            " problem_id) do update set count = count + excluded.count,"
            " first_seen = min(first_seen, excluded.first_seen),"
            " last_seen = max(last_seen, excluded.last_seen)",
            [m["device_id"], m["software_id"], m["problem_id"], m["count"], m["first_seen"],
             m["last_seen"]])
        report.misses_merged += 1
    if src.table("epilogue_decisions").exists():  # schema v4: rows DST lacks are added
        before = dst.table("epilogue_decisions").count
        dst.table("epilogue_decisions").insert_all(
            [{**r, "run_id": runs.get(r["run_id"], None)}
             for r in src.query("select * from epilogue_decisions")],
            pk=(*key, "epilogue_id"), ignore=True)
        report.epilogues_added += dst.table("epilogue_decisions").count - before
    before = dst.table("compile_catalog").count
    dst.table("compile_catalog").insert_all(
        [{**r, "run_id": runs.get(r["run_id"], None)}
         for r in src.query("select * from compile_catalog")],
        pk=("arch", "template_hash", "config_id", "op", "dtype", "layout", "flydsl"),
        ignore=True)
    report.catalog_added += dst.table("compile_catalog").count - before
    sweep_key = ("device_id", "software_id", "item_id")
    for s in src.query("select * from sweep_status"):
        s["run_id"] = runs.get(s["run_id"], None)
        current = list(dst.query("select status from sweep_status where device_id = ? and"
                                 " software_id = ? and item_id = ?",
                                 [s["device_id"], s["software_id"], s["item_id"]]))
        if not current or (current[0]["status"] != "done" and s["status"] == "done"):
            dst.table("sweep_status").upsert(s, pk=sweep_key)


def _better(src: dict, dst: dict) -> bool:
    """SRC's winner replaces DST's: more confident, or as confident and faster."""
    src_rank, dst_rank = rank_of(src.get("confidence")), rank_of(dst.get("confidence"))
    if src_rank != dst_rank:
        return src_rank > dst_rank
    return (src["time_ms"] is not None and dst["time_ms"] is not None
            and src["time_ms"] < dst["time_ms"])


def _upgrade_results(dst: sqlite_utils.Database, rows: list[dict]) -> None:
    """SRC result rows more confident than DST's row of the same candidate replace it."""
    key = ("device_id", "software_id", "problem_id", "candidate_id")
    for row in rows:
        current = list(dst.query(
            "select confidence from results where device_id = ? and software_id = ? and"
            " problem_id = ? and candidate_id = ?", [row[k] for k in key]))
        if current and rank_of(row.get("confidence")) > rank_of(current[0]["confidence"]):
            dst.table("results").upsert(row, pk=key)


def merge_dbs(sources: list[Path], into: Path) -> MergeReport:
    resolved_dst = into.resolve()
    opened = []
    try:
        for path in sources:
            if path.resolve() == resolved_dst:
                raise MergeError(f"{path} is the destination; pass it only as --into")
            db = open_db(path, writable=False)
            opened.append((path, db))
            problems = verify_db(db)
            if problems:
                raise MergeError(f"{path} fails verification ({len(problems)} problems), "
                                 f"first: {problems[0]}; run `inductor-flydsl db verify {path}`")
        dst = TuningDB.open(into, writable=True, tool="db merge")
        report = MergeReport(sources=[str(p) for p, _ in opened])
        try:
            for path, src in opened:
                with dst.transaction():
                    dst.run_id()
                    _merge_one(src, dst.db, path, report)
        finally:
            dst.close()
        return report
    finally:
        for _, db in opened:
            db.close()
