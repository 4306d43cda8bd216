"""Tables of the tuning DB (schema version 5), created through sqlite-utils.

Every value is a plain column or JSON text; nothing is ever pickled. Ids are
``keys.stable_id`` hashes of the JSON description of a device, software stack, problem or
candidate, so the same thing has the same id in every process and on every machine.
"""

from __future__ import annotations

import sqlite_utils

SCHEMA_VERSION = 5  # older files are migrated in place by db/migrations.py
APPLICATION = "inductor_flydsl"

# Added in version 2 (issue 15). ``confidence`` is "high", "low" or NULL (unknown: a row
# written before version 2); ``samples`` is the JSON list of the repeated timings (ms).
RESULT_SPREAD_COLUMNS: dict[str, type] = {
    "repeats": int, "median_ms": float, "iqr_ms": float, "cv": float, "samples": str,
    "confidence": str}
# ``machine`` is the JSON of the load seen while measuring (noise.MachineLoad).
WINNER_CONFIDENCE_COLUMNS: dict[str, type] = {
    "confidence": str, "confidence_reason": str, "repeats": int, "iqr_ms": float,
    "runner_up_ms": float, "busy": int, "machine": str}

# Added in version 3 (issue 11): validity per backend. ``software.blas`` is the GPU BLAS
# library ATen preferred (NULL: unrecorded, "" none: a process without a GPU);
# ``winners.prior`` is the JSON of the prior record whose ranking picked the short list
# this winner was chosen from (NULL: a full autotune).
SOFTWARE_V3_COLUMNS: dict[str, type] = {"blas": str}
WINNER_PRIOR_COLUMNS: dict[str, type] = {"prior": str}

# Added in version 4 (issue 26): what Inductor decided with, and what it finally ran.
# ``results.time_ms`` is the timing Inductor selected with (after any ``lookup``
# customisation); ``results.measured_ms`` is what its benchmark returned for the candidate
# (NULL when the timing came from a cache or a lookup that did not benchmark): the timing
# a later compile is served in place of benchmarking. ``winners.candidate_id`` is the
# choice Inductor selected (a re-measure only decides confidence); ``winners.deferred`` is
# 1 when Inductor deferred the final choice to epilogue-fusion benchmarking (the winner is
# then the GEMM-only one, and ``epilogue_decisions`` holds what the scheduler chose).
RESULT_V4_COLUMNS: dict[str, type] = {"measured_ms": float}
WINNER_V4_COLUMNS: dict[str, type] = {"deferred": int}
EPILOGUE_DECISIONS: tuple[dict[str, type], tuple[str, ...]] = (
    {"device_id": str, "software_id": str, "problem_id": str,
     # stable id of the epilogue description (keys.stable_id of ``epilogue``)
     "epilogue_id": str,
     # JSON: {"ops": [...], "fused": bool, "extra_inputs": [...]} (fusion_outcome.py)
     "epilogue": str,
     "candidate_id": str, "backend": str, "name": str,  # the kernel the final code runs
     "fused": int,  # 1: the epilogue runs inside the GEMM kernel
     "gemm_winner_id": str,  # the GEMM-only winner of the selection
     "gemm_ms": float,  # the final kernel's GEMM-only time, as Inductor had it
     "fused_ms": float,  # the fused kernel's benchmarked time (GPU benchmark fusion)
     "unfused_ms": float,  # the GEMM-only winner's time (plus the epilogue's, if known)
     "decided_by": str,  # how the scheduler decided (fusion_outcome.py)
     "run_id": int, "recorded_at": str},
    ("device_id", "software_id", "problem_id", "epilogue_id"))

# FlyDSL cross-compile catalog (``compile-check``, ``db/catalog.py``): one row per compiled
# config. The emulator's and the loop analysis' columns came after version 4's files were
# first written (a version-4 file may lack them; the version-5 step adds them).
COMPILE_CATALOG_V5_COLUMNS: dict[str, type] = {
    # compile-check --emulate: the ISA emulator's verdict
    "emulated": int, "emulation_ok": int, "max_abs_err": float, "emulation_error": str,
    # the ISA's main K loop (loop_analysis): instruction mix JSON, llvm-mca cycles per
    # trip and ratio, or why the estimate is absent
    "loop_found": int, "loop_mix": str, "loop_mfma": int, "loop_cycles": float,
    "mfma_model_cycles": float, "mca_ratio": float, "mca_note": str,
    # the kernel's instructions outside that loop (performance model)
    "loop_outside": int}
COMPILE_CATALOG: tuple[dict[str, type], tuple[str, ...]] = (
    {"arch": str, "template": str, "template_hash": str, "config_id": str, "config": str,
     "op": str, "dtype": str, "layout": str, "flydsl": str, "ok": int, "error": str,
     "vgprs": int, "agprs": int, "sgprs": int, "lds_bytes": int, "scratch_bytes": int,
     "vgpr_spills": int, "sgpr_spills": int, "mfma": str, "compile_s": float,
     "run_id": int, "recorded_at": str, **COMPILE_CATALOG_V5_COLUMNS},
    ("arch", "template_hash", "config_id", "op", "dtype", "layout", "flydsl"))

# Added in version 5: the performance model's predicted short lists
# (``performance/short_lists.py``, ``db/short_lists.py``), apart from the measured
# ``results``: never served as timings, only as the configs a compile offers. ``device``
# is the model's device name (``MI355X``), ``config`` the template config's JSON,
# ``model_version`` what wrote the row (stale rows are never used), ``kind`` always
# ``predicted``; ``aiter_*`` is AITER's published best time for the shape, where known.
PREDICTED_SHORT_LISTS: tuple[dict[str, type], tuple[str, ...]] = (
    {"device": str, "arch": str, "problem_id": str, "shape": str, "label": str, "rank": int,
     "config": str, "predicted_us": float, "tflops": float, "roofline_share": float,
     "bound": str, "model_version": str, "kind": str, "aiter_best_us": float,
     "aiter_best_kernel": str, "aiter_source": str, "recorded_at": str},
    ("device", "problem_id", "rank"))

# table -> (columns, primary key)
TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "meta": ({"key": str, "value": str}, "key"),
    "runs": ({"id": int, "started_at": str, "host": str, "tool": str, "tool_version": str,
              "command": str, "pid": int, "merged_from": str}, "id"),
    "devices": ({"id": str, "kind": str, "arch": str, "name": str, "compute_units": int}, "id"),
    "software": ({"id": str, "torch": str, "triton": str, "flydsl": str, "templates": str,
                  **SOFTWARE_V3_COLUMNS}, "id"),
    "problems": ({"id": str, "op": str, "summary": str, "m": int, "n": int, "k": int,
                  "batch": int, "dtype": str, "layout": str, "spec": str}, "id"),
    "results": ({"device_id": str, "software_id": str, "problem_id": str, "candidate_id": str,
                 "backend": str, "name": str, "config": str, "time_ms": float, "status": str,
                 "error": str, "run_id": int, "recorded_at": str,
                 # v2: spread of the timing and the confidence of its selection
                 **RESULT_SPREAD_COLUMNS,
                 **RESULT_V4_COLUMNS},  # v4
                ("device_id", "software_id", "problem_id", "candidate_id")),
    "winners": ({"device_id": str, "software_id": str, "problem_id": str, "candidate_id": str,
                 "backend": str, "name": str, "time_ms": float, "run_id": int,
                 "recorded_at": str,
                 **WINNER_CONFIDENCE_COLUMNS,  # v2
                 **WINNER_PRIOR_COLUMNS,  # v3
                 **WINNER_V4_COLUMNS},  # v4
                ("device_id", "software_id", "problem_id")),
    "epilogue_decisions": EPILOGUE_DECISIONS,  # v4
    "misses": ({"device_id": str, "software_id": str, "problem_id": str, "count": int,
                "first_seen": str, "last_seen": str},
               ("device_id", "software_id", "problem_id")),
    # FlyDSL cross-compile catalog (compile-check): one row per compiled config.
    "compile_catalog": COMPILE_CATALOG,
    # Offline sweep progress per sweep item (op, shape, dtype, layout), for --resume.
    # ``problem_ids`` is the JSON list of ``problems.id`` the item's compile produced.
    "sweep_status": ({"device_id": str, "software_id": str, "item_id": str, "item": str,
                      "status": str, "error": str, "seconds": float, "problem_ids": str,
                      "run_id": int, "updated_at": str},
                     ("device_id", "software_id", "item_id")),
    "predicted_short_lists": PREDICTED_SHORT_LISTS,  # v5
}

# Tables a later schema version added: a file of an older version (read as it is, or
# about to be migrated) may lack them.
TABLE_SINCE: dict[str, int] = {"epilogue_decisions": 4, "predicted_short_lists": 5}


def required_tables(version: int) -> set[str]:
    """The tables a file of schema ``version`` must have."""
    return {name for name in TABLES if TABLE_SINCE.get(name, 1) <= version}


NOT_NULL: dict[str, set[str]] = {
    "results": {"backend", "name", "status", "recorded_at"},
    "winners": {"candidate_id", "backend", "recorded_at"},
    "problems": {"op", "summary", "spec"},
    "epilogue_decisions": {"epilogue", "candidate_id", "recorded_at"},
}

INDEXES: dict[str, list[list[str]]] = {
    "problems": [["op", "m", "n", "k"]],
    "results": [["problem_id"], ["run_id"]],
    "winners": [["problem_id"]],
    "misses": [["problem_id"]],
    "epilogue_decisions": [["problem_id"]],
}


def create_schema(db: sqlite_utils.Database) -> None:
    """Create every table and index (idempotent) and stamp the schema version."""
    for name, (columns, pk) in TABLES.items():
        table = db.table(name)
        if not table.exists():
            table.create(columns, pk=pk, not_null=NOT_NULL.get(name))
        for cols in INDEXES.get(name, []):
            table.create_index(cols, if_not_exists=True)
    db.table("meta").upsert_all(
        [{"key": "schema_version", "value": str(SCHEMA_VERSION)},
         {"key": "application", "value": APPLICATION}],
        pk="key",
    )
