"""``inductor-flydsl sweep``: tune a list of GEMMs offline into a tuning DB.

With no arguments it sweeps the ``cpu-smoke`` preset on a CPU-only machine and the
``dense-bf16-suite`` on the first GPU, into the default tuning DB.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..db.open import UnusableDB, open_db
from ..provenance.timing_modes import GPU_TIMING_MODES, GRAPH
from ..settings import default_db_path, settings_from_env
from ..sweep.batch import MAX_BATCH
from ..sweep.busy import POLICIES, default_policy
from ..sweep.items import ItemError, SweepItem, parse_shard
from ..sweep.presets import (
    PRESETS,
    check_preset,
    items_from_misses,
    items_from_noisy,
    parse_shapes_csv,
    preset,
)
from ..sweep.runner import (
    FAILED,
    Identity,
    SweepError,
    SweepOptions,
    SweepSummary,
    probe_identity,
    resolve_slots,
    run_sweep,
)
from ..sweep.sharding import shard_db_path, shard_from_environment
from .output import console, err_console, fail, print_json, print_table
from .sweep_progress import SweepProgress, item_name

COMMAND_NAMES = ("sweep",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group()
    source.add_argument("--preset", metavar="NAME",
                        help=f"named shape list: {', '.join(PRESETS)} (default: cpu-smoke "
                             "on CPU, dense-bf16-suite on GPU)")
    source.add_argument("--shapes", type=Path, metavar="FILE.csv",
                        help="CSV with columns op,M,N,K,batch,dtype,layout")
    source.add_argument("--from-misses", action="store_true",
                        help="the problems the DB recorded as misses and has no winner for")
    source.add_argument("--remeasure-noisy", action="store_true",
                        help="measure again the problems whose winner is low-confidence "
                             "(a confident result then replaces it)")
    p.add_argument("--db", type=Path, default=None,
                   help=f"tuning DB to fill (default: $INDUCTOR_FLYDSL_DB or "
                        f"{default_db_path()}); {{shard}} in it becomes the shard number, "
                        "so each shard writes its own DB for `db merge`")
    p.add_argument("--backends", default=None,
                   help="Inductor GEMM backends, e.g. ATEN,TRITON (default: all available: "
                        "CPU ATEN,CPP; CUDA ATEN,TRITON; ROCm ATEN,TRITON,FLYDSL)")
    p.add_argument("--timing", choices=GPU_TIMING_MODES, default=GRAPH,
                   help="on a GPU, how candidates are timed: graph (as max-autotune's "
                        "cudagraph trees run them, served to max-autotune compiles; the "
                        "default) or eager (host dispatch included, served to "
                        "max-autotune-no-cudagraphs compiles)")
    p.add_argument("--resume", action="store_true",
                   help="skip items already done, skipped or failed for this device and "
                        "software")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume, run failed items again")
    p.add_argument("--shard", default=None, metavar="K/N|auto",
                   help="run only shard K of N (N shards cover the list exactly once); "
                        "auto: from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT or torchrun's "
                        "RANK/WORLD_SIZE (LOCAL_RANK picks the GPU)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no new item after this many seconds")
    p.add_argument("--timeout-s", type=float, default=900.0,
                   help="kill an item's worker after this many seconds (default 900)")
    p.add_argument("--isolate", choices=("worker", "item"), default="worker",
                   help="worker (default): one long-lived worker process per device tunes "
                        "batches of items, replaced after a crash or hang; item: a fresh "
                        "process per item (slower; for comparison and fragile stacks)")
    p.add_argument("--batch-items", type=int, default=MAX_BATCH, metavar="N",
                   help=f"with --isolate worker, tune up to N items in one compiled graph "
                        f"(default {MAX_BATCH}; 1: one item per compile). A failed batch is "
                        "retried item by item")
    p.add_argument("--devices", default=None,
                   help="cpu, all, or GPU indexes 0,1,... (one worker per GPU in parallel; "
                        "default: GPU 0, else cpu)")
    p.add_argument("--remeasure", action="store_true",
                   help="benchmark every item again even when the DB holds its winner")
    p.add_argument("--on-busy", choices=POLICIES, default=default_policy(),
                   help="when the machine is busy before an item: wait until it is quiet, "
                        "backoff (retry later, other items first) or record (run now, "
                        "recorded low-confidence); default $INDUCTOR_FLYDSL_ON_BUSY or wait")
    p.add_argument("--busy-max-wait-s", type=float, default=600.0,
                   help="with wait/backoff, run an item anyway (recorded low-confidence) "
                        "after the machine stayed busy this long (default 600)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true",
                   help="no live progress bar (the header and each item's started and "
                        "finished lines stay)")
    p.add_argument("--pack", action="store_true",
                   help="at the end, pack the DB into one verified file to share or ship "
                        "(see `inductor-flydsl db pack`)")
    p.add_argument("--list", action="store_true",
                   help="print the items that would run, each as the DB id and name of "
                        "its problem (the id `db show` and `db list` use; on a GPU known "
                        "only after a run), and exit")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="tune a preset, a CSV of shapes or the DB's "
                                            "misses into the tuning DB")
    add_arguments(p)


def _noisy_items(db_path: Path, identity: Identity) -> list[SweepItem]:
    try:
        db = open_db(db_path, writable=False)
    except UnusableDB as exc:
        raise ItemError(f"--remeasure-noisy: {exc}") from exc
    try:
        found = items_from_noisy(db, identity.device_id, identity.software_id)
    finally:
        db.close()
    for line in found.unconvertible:
        err_console.print(f"[yellow]not sweepable: {line}[/yellow]")
    err_console.print(f"{len(found.items)} low-confidence winners to measure again")
    if not found.items:
        raise ItemError("no low-confidence winner for this device and software in the DB")
    return found.items


def _items(args: argparse.Namespace, db_path: Path, identity: Identity) -> list[SweepItem]:
    if args.shapes:
        return parse_shapes_csv(args.shapes)
    if args.remeasure_noisy:
        return _noisy_items(db_path, identity)
    if args.from_misses:
        try:
            db = open_db(db_path, writable=False)
        except UnusableDB as exc:
            raise ItemError(f"--from-misses: {exc}") from exc
        try:
            found = items_from_misses(db, identity.device_id, identity.software_id)
        finally:
            db.close()
        for line in found.unconvertible:
            err_console.print(f"[yellow]miss not sweepable: {line}[/yellow]")
        err_console.print(f"{len(found.items)} missed problems to tune "
                          f"({found.already_tuned} already have a winner here)")
        if not found.items:
            raise ItemError("no untuned misses in the DB")
        return found.items
    name = args.preset or ("cpu-smoke" if identity.kind == "cpu" else "dense-bf16-suite")
    return preset(name)


def print_summary(summary: SweepSummary, device_kind: str) -> None:
    data = summary.as_json()
    device = summary.device
    rows: list[tuple[str, object]] = [
        ("device", f"{device['name']} ({device['arch']}, {device['compute_units']} units)"),
        ("db", summary.db), ("shard", summary.shard or "-"),
        ("items in list", data["items_total"]),
        ("already finished (resume)", data["already_finished"]),
        ("tuned (done)", data["done"]), ("reused a DB winner", data["reused_from_db"]),
        ("failed", data["failed"]), ("skipped", data["skipped"]),
        ("interrupted", data["interrupted"]), ("not started", data["not_started"]),
        ("problems tuned", data["problems_tuned"]),
        ("low-confidence winners", data["low_confidence_winners"]),
        ("items run on a busy machine", data["ran_on_busy_machine"]),
        ("waited for a quiet machine (s)", data["busy_waited_s"]),
        *((f"wins: {backend}", n) for backend, n in summary.wins_by_backend.items()),
        ("wall time (s)", f"{summary.wall_s:.1f}"),
        ("problems per minute", f"{summary.problems_per_minute:.2f}"),
    ]
    if summary.stopped:
        rows.append(("stopped by", summary.stopped))
    print_table("sweep summary", ["what", "value"], rows)
    failed = [o for o in summary.outcomes if o.status == FAILED]
    if failed:
        print_table("failed items", ["item", "id", "error"],
                    [(item_name(o.item, device_kind, o.problems), o.item.item_id,
                      (o.error.strip().splitlines() or [""])[0][:120]) for o in failed])
    if summary.not_started:
        console.print(f"{summary.not_started} items not started; run again with --resume "
                      "to continue")


def _shard_and_devices(args: argparse.Namespace) -> tuple[tuple[int, int] | None, str | None]:
    """The shard to run and the --devices to use (torchrun's LOCAL_RANK picks the GPU
    when --devices is not given and GPUs exist)."""
    if args.shard != "auto":
        return (parse_shard(args.shard) if args.shard else None), args.devices
    found = shard_from_environment(os.environ)
    devices = args.devices
    if devices is None and found.local_rank is not None:
        import torch

        if torch.cuda.is_available():
            devices = str(found.local_rank)
    return (found.k, found.n), devices


def run(args: argparse.Namespace) -> int:
    try:
        if args.preset is not None:  # before the device probe: a typo fails at once
            check_preset(args.preset)
        shard_spec, devices = _shard_and_devices(args)
        db_path = shard_db_path(args.db or settings_from_env().db_path, shard_spec)
        if args.budget_s is not None and args.budget_s < 0:
            raise ItemError("--budget-s must be >= 0")
        if args.batch_items < 1:
            raise ItemError("--batch-items must be >= 1")
        if args.timeout_s <= 0:
            raise ItemError("--timeout-s must be > 0")
        slots = resolve_slots(devices)
        identity = probe_identity(slots)
        items = _items(args, db_path, identity)
    except (ItemError, SweepError) as exc:
        return fail(str(exc))
    if args.list:
        from ..sweep.items import shard
        from ..sweep.listing import LEGEND, listed_items

        chosen = shard(items, *shard_spec) if shard_spec else items
        err_console.print(LEGEND, markup=False)
        for listed in listed_items(chosen, identity.kind, db_path, identity.device_id):
            console.print(listed.line(), markup=False)
        return 0
    options = SweepOptions(db=db_path, backends=args.backends, timing=args.timing,
                           resume=args.resume,
                           retry_failed=args.retry_failed, shard=shard_spec,
                           budget_s=args.budget_s, timeout_s=args.timeout_s,
                           on_busy=args.on_busy, busy_max_wait_s=args.busy_max_wait_s,
                           remeasure=args.remeasure or args.remeasure_noisy,
                           isolate=args.isolate, batch_items=args.batch_items)
    ui = SweepProgress(enabled=not args.json, device_kind=identity.kind,
                       bar=not args.no_progress)
    try:
        summary = run_sweep(items, options, slots, identity, on_event=ui.event,
                            on_plan=ui.plan, on_wait=ui.wait)
    except (ItemError, SweepError) as exc:
        return fail(str(exc))
    finally:
        ui.stop()
    if args.json:
        print_json(summary.as_json())
    else:
        print_summary(summary, identity.kind)
    if summary.stopped in ("SIGINT", "SIGTERM"):
        return 130 if summary.stopped == "SIGINT" else 143
    if args.pack:
        from ..db.pack import pack_db

        problems = pack_db(db_path)
        if problems:
            return fail(f"{db_path}: packed, but db verify found: {problems[0]}", code=1)
        if not args.json:
            console.print(f"{db_path}: packed into one self-contained file, verified ok")
    return 1 if summary.count(FAILED) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inductor-flydsl sweep", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
