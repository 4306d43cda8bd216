"""The shipped compile catalog as the record of the full emulator run, and a small sample
that re-runs it.

``inductor-flydsl compile-check --emulate --template T --arch gfx950 --arch gfx942
--db tuning_db/flydsl_compile_catalog.db`` cross-compiles every DEFAULT config of template
``T`` (and each other variant once) for gfx950 and gfx942, runs each in the ISA emulator
against a reference, and records one row per job with the template's source hash.
Re-running all of it in every test run cost about 15 minutes of CPU (issue 44: CI within
30 minutes), so the tests check instead that

- the shipped rows are those of the *current* templates and FlyDSL (every job of the job
  set has a row with this template hash and FlyDSL version; every job the resource model
  accepts compiled without spills and was correct in the emulator; the others are
  recorded as rejected): a template change without a re-run fails here, naming the
  command;
- a covering sample of those jobs, compiled and emulated again now, is correct and
  reproduces its rows' resources and main loop exactly (so the rows describe what this
  code compiles).

The full run stays a test (marked ``full_catalog``; ``pytest -m full_catalog``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from inductor_flydsl.flydsl_backend.builds import catalog
from inductor_flydsl.provenance.software import template_source_hash

REPO = Path(__file__).resolve().parent.parent
SHIPPED_CATALOG = REPO / "tuning_db" / "flydsl_compile_catalog.db"
ARCHS = ("gfx950", "gfx942")
# what a re-compile must reproduce of a row (resources, MFMAs, main loop)
REPRODUCED = ("vgprs", "agprs", "sgprs", "lds_bytes", "scratch_bytes", "vgpr_spills",
              "sgpr_spills", "mfma", "loop_found", "loop_mix", "loop_mfma", "loop_outside")


def refresh_command(template: str) -> str:
    return (f"inductor-flydsl compile-check --emulate --template {template} "
            f"--arch gfx950 --arch gfx942 --db tuning_db/flydsl_compile_catalog.db")


def shipped_rows(template: str) -> dict[tuple[str, ...], dict[str, Any]]:
    """The shipped catalog's rows of ``template``, keyed like ``Job.key``."""
    return _keyed_rows(f"file:{SHIPPED_CATALOG}?mode=ro", template)


def _keyed_rows(uri: str, template: str) -> dict[tuple[str, ...], dict[str, Any]]:
    """The ``compile_catalog`` rows of ``template`` in the file at ``uri``, keyed like
    ``Job.key``."""
    con = sqlite3.connect(uri, uri=True)
    con.row_factory = sqlite3.Row
    try:
        rows = con.execute("select * from compile_catalog where template = ?",
                           (template,)).fetchall()
    finally:
        con.close()
    return {(r["arch"], r["template"], r["config_id"], r["op"], r["dtype"], r["layout"]):
            dict(r) for r in rows}


def stale_jobs(jobs: list[catalog.Job], template: str) -> list[str]:
    """Every job whose shipped row is missing, of another template source or FlyDSL, or
    not a clean verdict (compiled, no spills, correct in the emulator; or rejected)."""
    rows = shipped_rows(template)
    current, flydsl = template_source_hash(template), catalog.flydsl_version()
    problems: list[str] = []
    for job in jobs:
        row = rows.get(job.key)
        if row is None:
            problems.append(f"{job.describe()}: no row")
        elif job.rejected is not None:
            if row["ok"] or not (row["error"] or "").startswith(catalog.REJECTED_PREFIX):
                problems.append(f"{job.describe()}: not recorded as rejected")
        elif row["template_hash"] != current or row["flydsl"] != flydsl:
            problems.append(f"{job.describe()}: row of template {row['template_hash']} and "
                            f"flydsl {row['flydsl']}, running {current} and {flydsl}")
        elif not (row["ok"] and row["emulated"] and row["emulation_ok"]):
            problems.append(f"{job.describe()}: ok={row['ok']} emulated={row['emulated']} "
                            f"emulation_ok={row['emulation_ok']} {row['error'] or ''}"
                            f"{row['emulation_error'] or ''}"[:300])
        elif row["vgpr_spills"] or row["sgpr_spills"] or row["scratch_bytes"]:
            problems.append(f"{job.describe()}: spills")
    return problems


def _features(job: catalog.Job) -> set[tuple[str, Any]]:
    return {("arch", job.arch), ("dtype", job.dtype), ("layout", job.layout),
            ("op", job.op), *job.config}


def covering_sample(jobs: list[catalog.Job]) -> list[catalog.Job]:
    """The fewest accepted jobs (greedy set cover, deterministic) in which every arch,
    dtype, layout, op and every value of every config field of the accepted jobs occurs
    at least once."""
    accepted = [j for j in jobs if j.rejected is None]
    uncovered = set().union(*(_features(j) for j in accepted))
    chosen: list[catalog.Job] = []
    while uncovered:
        # the job covering the most, the first of those on a tie
        best = max(accepted, key=lambda j: len(_features(j) & uncovered))
        chosen.append(best)
        uncovered -= _features(best)
    return chosen


def reproduce(sample: list[catalog.Job], template: str, tmp: Path) -> list[str]:
    """Compile and emulate ``sample`` now; every difference from its shipped row (or a
    wrong result) as a line."""
    run = catalog.run_catalog(sample, workers=2, db_path=tmp / "sample.db", progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    rows = shipped_rows(template)
    fresh = _keyed_rows(f"file:{tmp / 'sample.db'}?mode=ro", template)
    problems = [f"{i.job.describe()}: {i.result.error or i.result.emulation}"[:400]
                for i in run.results if not (i.result.ok and (i.result.emulation or {}).get("ok"))]
    for job in sample:
        now, shipped = fresh.get(job.key), rows.get(job.key)
        if now is None or shipped is None:
            problems.append(f"{job.describe()}: no row (now {now is not None}, "
                            f"shipped {shipped is not None})")
            continue
        differs = {c: (shipped[c], now[c]) for c in REPRODUCED if shipped[c] != now[c]}
        if differs:
            problems.append(f"{job.describe()}: shipped != now {json.dumps(differs)[:300]}")
    return problems
