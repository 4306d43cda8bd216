"""Tables of the tuning DB (schema version 3), created through sqlite-utils.

Every value is a plain column or JSON text; nothing is ever pickled. Ids are
``keys.stable_id`` hashes of the JSON description of a device, software stack, problem or
candidate, so the same thing has the same id in every process and on every machine.
"""

from __future__ import annotations

import sqlite_utils

SCHEMA_VERSION = 3  # older files are migrated in place by db/migrations.py
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
                 **RESULT_SPREAD_COLUMNS},
                ("device_id", "software_id", "problem_id", "candidate_id")),
    "winners": ({"device_id": str, "software_id": str, "problem_id": str, "candidate_id": str,
                 "backend": str, "name": str, "time_ms": float, "run_id": int,
                 "recorded_at": str,
                 **WINNER_CONFIDENCE_COLUMNS,  # v2
                 **WINNER_PRIOR_COLUMNS},  # v3
                ("device_id", "software_id", "problem_id")),
    "misses": ({"device_id": str, "software_id": str, "problem_id": str, "count": int,
                "first_seen": str, "last_seen": str},
               ("device_id", "software_id", "problem_id")),
    # FlyDSL cross-compile catalog (compile-check): one row per compiled config.
    "compile_catalog": ({"arch": str, "template": str, "template_hash": str, "config_id": str,
                         "config": str, "op": str, "dtype": str, "layout": str,
                         "flydsl": str, "ok": int, "error": str, "vgprs": int, "agprs": int,
                         "sgprs": int, "lds_bytes": int, "scratch_bytes": int,
                         "vgpr_spills": int, "sgpr_spills": int, "mfma": str,
                         "compile_s": float, "run_id": int, "recorded_at": str,
                         # compile-check --emulate: the ISA emulator's verdict (written
                         # with alter=True, so catalogs made before these columns work)
                         "emulated": int, "emulation_ok": int, "max_abs_err": float,
                         "emulation_error": str,
                         # the ISA's main K loop (loop_analysis; alter=True as above):
                         # instruction mix JSON, llvm-mca cycles per trip and ratio, or
                         # why the estimate is absent
                         "loop_found": int, "loop_mix": str, "loop_mfma": int,
                         "loop_cycles": float, "mfma_model_cycles": float, "mca_ratio": float,
                         "mca_note": str},
                        ("arch", "template_hash", "config_id", "op", "dtype", "layout",
                         "flydsl")),
    # Offline sweep progress per sweep item (op, shape, dtype, layout), for --resume.
    # ``problem_ids`` is the JSON list of ``problems.id`` the item's compile produced.
    "sweep_status": ({"device_id": str, "software_id": str, "item_id": str, "item": str,
                      "status": str, "error": str, "seconds": float, "problem_ids": str,
                      "run_id": int, "updated_at": str},
                     ("device_id", "software_id", "item_id")),
}

NOT_NULL: dict[str, set[str]] = {
    "results": {"backend", "name", "status", "recorded_at"},
    "winners": {"candidate_id", "backend", "recorded_at"},
    "problems": {"op", "summary", "spec"},
}

INDEXES: dict[str, list[list[str]]] = {
    "problems": [["op", "m", "n", "k"]],
    "results": [["problem_id"], ["run_id"]],
    "winners": [["problem_id"]],
    "misses": [["problem_id"]],
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
