"""``inductor-flydsl db stats|list|show|export|merge|verify``."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from rich.markup import escape

from ..db import queries
from ..db.merge import MergeError, merge_dbs
from ..db.open import UnusableDB, open_db
from ..db.pack import pack_db
from ..db.shipped import shipped_db_paths
from ..db.store import TuningDB
from ..db.user_path import unusable_fix
from ..db.verify import verify_path_report
from ..performance.short_lists import shipped_stored_lists, stored_lists
from ..priors import describe_record_line, describe_records
from ..problems.problem import Problem
from ..provenance.software import current_software
from ..settings import default_db_path, settings_from_env
from .output import console, fail, output_file_problem, print_json, print_table

COMMAND_NAMES = ("db",)


def _default_db() -> Path:
    return settings_from_env().db_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    db = subparsers.add_parser("db", help="inspect, export, merge and verify tuning DBs")
    sub = db.add_subparsers(dest="db_command", required=True)

    def with_db(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--db", type=Path, default=None,
                       help=f"tuning DB (default: $INDUCTOR_FLYDSL_DB or {default_db_path()})")
        return p

    p = with_db(sub.add_parser("stats", help="counts of problems, results, winners, misses"))
    p.add_argument("--json", action="store_true")
    p = with_db(sub.add_parser("list", help="recorded winners, one row per problem and device"))
    p.add_argument("--op", help="only this op (mm, addmm, bmm, packed_linear, ...)")
    p.add_argument("--device", help="arch or device-name substring (gfx950, sm_90, AVX512)")
    p.add_argument("--shape", help="MxNxK or BxMxNxK")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p = with_db(sub.add_parser("show", help="every candidate of the problems matching REF"))
    p.add_argument("ref", help="problem id prefix or summary substring (e.g. '16x128x64')")
    p.add_argument("--json", action="store_true")
    p = with_db(sub.add_parser("export", help="export every result row"))
    p.add_argument("--csv", type=Path, required=True, help="output file ('-' for stdout)")
    p = sub.add_parser("merge", help="merge DBs into one (faster winner wins; ties keep DST)")
    p.add_argument("sources", nargs="+", type=Path, metavar="SRC")
    p.add_argument("--into", type=Path, required=True, metavar="DST")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("pack", help="checkpoint, vacuum and switch a DB to the rollback "
                       "journal so it can be shipped or shared as one file")
    p.add_argument("path", type=Path)
    p = with_db(sub.add_parser("verify", help="schema and row checks; exit 1 on problems"))
    p.add_argument("paths", nargs="*", type=Path, help="DB files (default: --db)")


def _open(args: argparse.Namespace):
    path = args.db or _default_db()
    try:
        return open_db(path, writable=False), path
    except UnusableDB as exc:
        raise UnusableDB(unusable_db_message(Path(path), exc, given=args.db is not None)) \
            from exc


def unusable_db_message(path: Path, exc: UnusableDB, *, given: bool = False) -> str:
    """Why the DB at ``path`` cannot be read, where the path came from (``--db`` when
    ``given``, else ``INDUCTOR_FLYDSL_DB`` or the default per-user path) and the fix; for
    a file that does not exist yet (a new user's default DB), also how one is made. The
    file is never changed."""
    if path.exists():
        if given:
            return (f"{exc}. The path is --db's: give --db a tuning DB file (the file was "
                    "not modified)")
        return f"{exc}. {unusable_fix(settings_from_env())} (The file was not modified.)"
    return (f"{path} does not exist: there is no tuning DB there yet. A max-autotune "
            "compile with the plugin on (INDUCTOR_FLYDSL=1, or inductor_flydsl.enable()) "
            "creates it, and so does `inductor-flydsl sweep`; for another file, give "
            "--db PATH")


def run(args: argparse.Namespace) -> int:
    command = args.db_command
    try:
        if command == "merge":
            return _merge(args)
        if command == "verify":
            return _verify(args)
        if command == "pack":
            problems = pack_db(args.path)
            for line in problems:
                console.print(f"  {line}")
            console.print(f"{args.path}: packed, " + (f"{len(problems)} problem(s)"
                                                     if problems else "verified ok"))
            return 1 if problems else 0
        db, path = _open(args)
    except UnusableDB as exc:
        return fail(str(exc))
    try:
        if command == "stats":
            stats = queries.db_stats(db)
            if args.json:
                print_json({"path": str(path), **stats})
            else:
                print_table(f"tuning DB {path}", ["what", "count"],
                            [(k, v) for k, v in stats.items() if not isinstance(v, dict)]
                            + [(f"winners on {k}", v) for k, v in
                               stats["winners_by_backend"].items()]
                            + [(f"results {k}", v) for k, v in
                               stats["results_by_status"].items()])
        elif command == "list":
            try:
                rows = queries.list_winners(db, op=args.op, device=args.device,
                                            shape=args.shape, limit=args.limit)
            except ValueError as exc:
                return fail(str(exc))
            if args.json:
                print_json(rows)
            else:
                print_table(f"{len(rows)} winners in {path}",
                            ["problem", "arch", "backend", "winner", "ms", "candidates",
                             "id"],
                            [(r["summary"], r["arch"], r["backend"], r["winner"],
                              r["time_ms"], r["candidates"], r["problem_id"]) for r in rows])
        elif command == "show":
            return _show(db, args)
        elif command == "export":
            rows = queries.export_rows(db)
            problem = None if str(args.csv) == "-" else output_file_problem(args.csv)
            if problem:
                return fail(f"--csv {str(args.csv)!r}: {problem}")
            out = sys.stdout if str(args.csv) == "-" else open(args.csv, "w", newline="")
            try:
                columns = list(rows[0]) if rows else ["summary"]
                writer = csv.DictWriter(out, fieldnames=columns)
                writer.writeheader()
                writer.writerows(rows)
            finally:
                if out is not sys.stdout:
                    out.close()
            if out is not sys.stdout:
                console.print(f"wrote {len(rows)} rows to {args.csv}")
        return 0
    finally:
        db.close()


def _predicted_problems(ref: str) -> list[dict]:
    """Problems matching ``ref`` in the shipped DBs that hold predicted short lists."""
    found = []
    for path in shipped_db_paths():
        if not stored_lists(path):
            continue
        try:
            shipped = open_db(path, writable=False, immutable=True)
        except UnusableDB:
            continue
        try:
            found += queries.find_problems(shipped, ref)
        finally:
            shipped.close()
    return found


def _show(db, args: argparse.Namespace) -> int:
    # the DB's own problems; only when none matches, the shapes of the shipped predicted
    # short lists (a matching problem of the DB still shows its predicted list below)
    problems = queries.find_problems(db, args.ref) or _predicted_problems(args.ref)
    if not problems:
        return fail(f"no problem matches {args.ref!r}", code=1)
    predicted = shipped_stored_lists()
    details = []
    for p in problems:
        try:
            bucket = queries.bucket_status(db, Problem.from_spec(json.loads(p["spec"])))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            bucket = {"error": f"problem spec not known to this version: {exc}"}
        details.append({"problem": p, **queries.problem_detail(db, p["id"]), "bucket": bucket,
                        "records": _records(db, p["id"], args),
                        "predicted": [r for r in predicted if r["problem_id"] == p["id"]]})
    if args.json:
        print_json(details)
        return 0
    for d in details:
        p = d["problem"]
        print_table(f"{p['summary']}  (id {p['id']})",
                    ["arch", "backend", "candidate", "ms (Inductor's)", "measured ms",
                     "status", "winner", "error"],
                    [(r["arch"], r["backend"], r["name"], r["time_ms"], r["measured_ms"],
                      r["status"], "*" if r["is_winner"] else "", (r["error"] or "")[:60])
                     for r in d["results"]])
        _print_predicted(d["predicted"])
        for w in d["winners"]:  # confidence and spread of each recorded winner
            console.print(f"  GEMM-only winner on {queries.describe_winner(w)}",
                          markup=False)
        for e in d["epilogues"]:  # what the scheduler ran with each epilogue
            console.print(f"  {queries.describe_epilogue(e)}", markup=False)
        for r in d["records"]:  # exact for this software, or a prior (and what changed)
            console.print(f"  record {describe_record_line(r)}", markup=False)
        for m in d["misses"]:
            console.print(f"  missed {m['count']}x on {m['arch']} (last {m['last_seen']})")
        b = d["bucket"]
        if b.get("dynamic"):
            dyn = b["dynamic"]
            console.print(f"  dynamic problem: symbolic {dyn['symbolic']}, keyed at M's "
                          f"hint M={dyn['keyed_m']} (the size the compile was traced at); a "
                          "dynamic compile at that hint is served its recorded timings "
                          "above (with INDUCTOR_FLYDSL_BUCKETS=1 also the static bucket "
                          "below)", markup=False)
        if b.get("bucket_m") is None:
            console.print(f"  dynamic-M bucket: none (M={b.get('m')} is over the largest bucket)"
                          if "error" not in b else f"  {escape(b['error'])}")
        elif b["bucket_problem_id"] is None:
            console.print(f"  dynamic-M bucket: M={b['bucket_m']} (this problem itself)")
        elif b.get("dynamic"):
            archs = ", ".join(b["bucket_winner_archs"]) or "none"
            console.print(f"  static bucket: M={b['bucket_m']} (problem "
                          f"{b['bucket_problem_id']}); winners on: {archs}")
        else:
            archs = ", ".join(b["bucket_winner_archs"]) or "none"
            console.print(f"  dynamic-M bucket: M={b['bucket_m']} (problem "
                          f"{b['bucket_problem_id']}); bucket winners on: {archs}")
    return 0


def _print_predicted(rows: list[dict]) -> None:
    """A shipped predicted short list, apart from the measurements above."""
    if not rows:
        return
    first = rows[0]
    use = ("served only as the configs a compile offers" if first.get("current") else
           "STALE: written by another model or catalog, not used")
    print_table(f"  PREDICTED short list on {first['device']} (performance model "
                f"{first['model_version']}, not measured; {use})",
                ["rank", "config", "predicted us", "TFLOPS", "bound"],
                [(r["rank"], r["config"], r["predicted_us"], r["tflops"], r["bound"])
                 for r in rows])
    if first.get("aiter_best_us"):
        console.print(f"  AITER's published best on gfx950 (256 CUs): {first['aiter_best_us']}"
                      f" us, {first['aiter_best_kernel']} ({first['aiter_source']})",
                      markup=False)


def _records(db, problem_id: str, args: argparse.Namespace) -> list[dict]:
    """Each recorded winner: exact for this process's software, or only a prior."""
    store = TuningDB(db, args.db or _default_db(), writable=False)
    return describe_records(store.recorded_selections(problem_id), current_software())


def _merge(args: argparse.Namespace) -> int:
    try:
        report = merge_dbs(args.sources, args.into)
    except (MergeError, UnusableDB) as exc:
        return fail(str(exc))
    if args.json:
        print_json(report.__dict__)
    else:
        print_table(f"merged into {args.into}", ["what", "count"],
                    list(report.__dict__.items())[1:])
    return 0


def _verify(args: argparse.Namespace) -> int:
    """Exit 1 when some file is corrupt; rows this version merely does not know (and
    problems refused at record time) are listed as notes and do not fail."""
    paths = args.paths or [args.db or _default_db()]
    bad = 0
    for path in paths:
        report = verify_path_report(path)
        if report.errors:
            bad += 1
            console.print(f"[red]{path}: {len(report.errors)} problem(s)[/red]")
            for line in report.errors:
                console.print(f"  {escape(line)}")
        else:
            console.print(f"{path}: ok" + (f" ({len(report.notes)} note(s))"
                                          if report.notes else ""))
        for line in report.notes:
            console.print(f"  note: {escape(line)}")
    return 1 if bad else 0
