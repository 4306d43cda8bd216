"""``inductor-flydsl explain``: is FlyDSL eligible for a GEMM, and which configs it tries."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..db.open import UnusableDB, open_db
from ..db.queries import bucket_status, describe_winner, parse_shape
from ..flydsl_backend.eligibility import SUPPORTED_ARCHS, explain
from ..problem import synthetic_problem
from ..settings import settings_from_env
from .output import console, fail, print_json, print_table

COMMAND_NAMES = ("explain",)
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "bfloat16": "bfloat16",
          "float16": "float16", "float32": "float32"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explain", help="whether FlyDSL is eligible for a GEMM and the configs it would try")
    p.add_argument("--op", required=True, choices=["mm", "addmm", "bmm"])
    p.add_argument("--shape", required=True, help="MxNxK, or BxMxNxK for bmm")
    p.add_argument("--dtype", default="bf16", help="bf16, fp16 (fp32 shows the rejection)")
    p.add_argument("--layout", default="nt", help="nn, nt, tn or tt (A then B; t = col-major)")
    p.add_argument("--arch", default="gfx950",
                   help=f"target arch ({', '.join(SUPPORTED_ARCHS)})")
    p.add_argument("--search-space", default="DEFAULT", choices=["DEFAULT", "EXHAUSTIVE"])
    p.add_argument("--check-runtime", action="store_true",
                   help="also check this machine's ROCm runtime (nothing is launched)")
    p.add_argument("--db", type=Path, default=None,
                   help="also tell how this tuning DB serves the problem (exact winner or "
                        "dynamic-M bucket); default: the per-user DB if it exists")
    p.add_argument("--emulate", action="store_true",
                   help="cross-compile each listed config for this variant and run it in the "
                        "ISA emulator on a small problem with M and N tails (exit 1 if any "
                        "is wrong)")
    p.add_argument("--json", action="store_true")


def _emulate_configs(configs: list[dict[str, int]], arch: str, dtype: str, layout: str,
                     op: str) -> list[dict]:
    """Compile and emulate each config in worker processes; one verdict per config."""
    from ..flydsl_backend import catalog

    jobs = [catalog.Job(catalog.TEMPLATE, tuple(sorted(c.items())), arch, dtype, layout, op)
            for c in configs]
    run = catalog.run_catalog(jobs, db_path=None, progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    by_key = {item.job.key: item for item in run.results}
    verdicts = []
    for job in jobs:
        result = by_key[job.key].result
        if result.emulation is None:
            verdicts.append({"ok": False, "error": result.error or "not compiled"})
        else:
            e = result.emulation
            verdicts.append({"ok": e["ok"], "max_abs_err": e["max_abs_err"],
                             "shape": e["shape"], "races": len(e["races"]),
                             "error": e["error"]})
    return verdicts


def run(args: argparse.Namespace) -> int:
    try:
        dims = parse_shape(args.shape)
        dtype = DTYPES[args.dtype.lower()]
    except (ValueError, KeyError):
        return fail(f"bad --shape {args.shape!r} or --dtype {args.dtype!r}")
    batch, (m, n, k) = (dims[0], dims[1:]) if len(dims) == 4 else (1, dims)
    if len(dims) == 4 and args.op != "bmm":
        return fail("a batch (BxMxNxK) is only valid with --op bmm")
    try:
        problem = synthetic_problem(args.op, m, n, k, dtype=dtype, layout=args.layout.lower(),
                                    batch=batch)
    except ValueError as exc:
        return fail(str(exc))
    result = explain(problem, args.arch, search_space=args.search_space,
                     check_runtime=args.check_runtime)
    db_path = args.db or settings_from_env().db_path
    db_info = None
    if args.db is not None or db_path.exists():
        try:
            db = open_db(db_path, writable=False)
        except UnusableDB as exc:
            db_info = {"db": str(db_path), "error": str(exc)}
        else:
            db_info = {"db": str(db_path), **bucket_status(db, problem)}
            db.close()
    status = 0
    if args.emulate and result.eligible:
        from ..flydsl_backend.toolchain import ToolchainError

        short = {"bfloat16": "bf16", "float16": "fp16"}[dtype]
        try:
            verdicts = _emulate_configs(result.configs, args.arch, short, args.layout.lower(),
                                        args.op)
        except ToolchainError as exc:
            return fail(str(exc))
        result.configs = [{**c, "emulation": v} for c, v in zip(result.configs, verdicts,
                                                                   strict=True)]
        status = 0 if all(v["ok"] for v in verdicts) else 1
    if args.json:
        print_json({**result.as_json(), "tuning_db": db_info})
        return status
    if db_info is not None:
        if "error" in db_info:
            console.print(f"tuning DB {db_path}: {db_info['error']}")
        elif db_info["exact_winner_archs"]:
            console.print(f"tuning DB {db_path}: exact winner recorded on "
                          f"{', '.join(db_info['exact_winner_archs'])}")
            for w in db_info.get("exact_winners", []):  # confidence and spread
                console.print(f"  {describe_winner(w)}", markup=False)
        elif db_info["bucket_winner_archs"]:
            console.print(f"tuning DB {db_path}: no exact winner; served by the dynamic-M "
                          f"bucket M={db_info['bucket_m']} (winners on "
                          f"{', '.join(db_info['bucket_winner_archs'])})")
        else:
            console.print(f"tuning DB {db_path}: no winner for this problem or its bucket "
                          f"(M={db_info['bucket_m']}); it will be autotuned and recorded")
    if result.eligible:
        console.print(f"FlyDSL is eligible for {result.problem} on {result.arch}: "
                      f"{len(result.configs)} {result.search_space} configs, best first")
        fields = list(result.configs[0])
        print_table("configs", fields, [[_cell(c[f]) for f in fields] for c in result.configs])
    else:
        console.print(f"FlyDSL is NOT eligible for {result.problem} on {result.arch}:")
        for reason in result.reasons:
            console.print(f"  - {reason}")
    return status


def _cell(value: object) -> object:
    if isinstance(value, dict):  # an emulation verdict
        if value.get("ok"):
            return f"ok (max abs err {value['max_abs_err']:.3g}, {value['shape']})"
        return f"WRONG: {value.get('error')}"
    return value
