"""``inductor-flydsl compile-check``: cross-compile the FlyDSL search space, catalog the ISA.

Compiles on the CPU (no GPU needed; an AMDGPU-capable ld.lld is), records one row per
job in the ``compile_catalog`` table of the tuning DB and prints per-arch figures. Exit
status 1 if any config the resource model accepts failed to compile or spilled, 2 on a
usage or toolchain error, 130 when interrupted (finished jobs stay recorded).

Default job set (see :mod:`inductor_flydsl.flydsl_backend.builds.catalog`): every config of the
search space for bf16 ``nt`` ``mm``, plus every other (dtype, layout, op) variant once
with a representative config: 50 compiles on gfx950 and 35 compiles plus 15 recorded
rejections on gfx942 for DEFAULT. ``--full`` compiles the whole cross product (24
variants per config); ``--dtype/--layout/--op`` select variants explicitly.
``--template gemm_grouped`` checks the grouped (mixture-of-experts) GEMM instead: its
13 DEFAULT configs for bf16 ``nt`` ``grouped_mm`` plus its 3 other variants (fp16,
``nn``) once; ``--emulate`` runs each on ragged problems (empty groups, one-token
groups, one dominant group, a single group). ``--template gemm_mx`` checks the
block-scaled (MXFP8/MXFP4) GEMM, gfx950 only (gfx942 jobs are listed as rejected: it
has no scaled MFMA): every DEFAULT config for every format pairing (``<a>x<b>_bf16``,
formats e4m3, e5m2, e2m1) ``nt`` ``mm`` and for ``e4m3xe4m3_bf16`` ``nt_b32`` ``mm``
(B's scales per 32x32 block, vLLM's MXFP8 linear), plus fp16 output and ``addmm`` once
each; ``--dtype`` (repeatable, e.g. ``e2m1xe2m1_bf16``) selects pairings; ``--emulate`` checks
each against a float64 dequantize-then-matmul reference.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..db.open import UnusableDB
from ..settings import default_db_path, settings_from_env
from .output import console, err_console, fail, print_json, print_table

COMMAND_NAMES = ("compile-check",)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from ..flydsl_backend.builds import catalog
    from ..flydsl_backend.specs import registry

    axes = catalog.variant_axes()  # every registered template's
    p = subparsers.add_parser(
        "compile-check",
        help="cross-compile FlyDSL configs on the CPU; record ISA resources in the DB",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--template", choices=registry.names(), default=catalog.TEMPLATE,
                   help="template to compile: the dense GEMM (default), the grouped "
                        "(mixture-of-experts) GEMM, the block-scaled MX GEMM, or one a "
                        "package of INDUCTOR_FLYDSL_TEMPLATE_PACKAGES registers")
    p.add_argument("--arch", action="append", choices=axes["archs"], default=None,
                   help="target arch, repeatable (default: gfx950)")
    p.add_argument("--search-space", type=str.upper, choices=catalog.SEARCH_SPACES,
                   default="DEFAULT", help="DEFAULT list (27 configs) or EXHAUSTIVE (3880)")
    p.add_argument("--dtype", action="append", choices=axes["dtypes"], default=None,
                   help="only these dtypes (repeatable; MX: <a format>x<b format>_<out>)")
    p.add_argument("--layout", action="append", choices=axes["layouts"], default=None,
                   help="only these layouts (repeatable; MX: nt, or nt_b32 with B's "
                        "scales per 32x32 block)")
    p.add_argument("--op", action="append", choices=axes["ops"], default=None,
                   help="only these ops (repeatable)")
    p.add_argument("--full", action="store_true",
                   help="every config for every (dtype, layout, op) variant")
    p.add_argument("--limit", type=int, default=None, help="at most N jobs per arch")
    p.add_argument("--jobs", "-j", type=int, default=None,
                   help="worker processes (default: CPU count)")
    p.add_argument("--timeout", type=float, default=catalog.DEFAULT_TIMEOUT_S,
                   help="seconds per compile before its worker is killed (default %(default)s)")
    p.add_argument("--compile-rejected", action="store_true",
                   help="also compile configs the resource model rejects (default: record "
                        "them as rejected without compiling)")
    p.add_argument("--db", type=Path, default=None,
                   help=f"tuning DB to write (default: $INDUCTOR_FLYDSL_DB or "
                        f"{default_db_path()})")
    p.add_argument("--no-db", action="store_true", help="do not write any DB")
    p.add_argument("--emulate", action="store_true",
                   help="also run each compiled config in the ISA emulator on a small random "
                        "problem with M and N tails, against torch (recorded in the catalog)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _fmt_range(value: list[int] | None) -> str:
    if not value:
        return "-"
    return str(value[0]) if value[0] == value[1] else f"{value[0]}-{value[1]}"


def _fmt_ratio(a: dict[str, Any]) -> str:
    value = a.get("mca_ratio")
    if not value:
        return "-"
    lo, hi = value
    text = f"{lo:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"
    return f"{text} ({a['mca_estimates']}/{a['ok']})"


def _fmt_seconds(s: dict[str, Any]) -> str:
    if s["median"] is None:
        return "-"
    return f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}"


def _print_summary(summary: dict[str, Any]) -> None:
    rows = []
    for arch, a in summary["archs"].items():
        mfma = "\n".join(f"{k} x{v}" for k, v in a["mfma"].items()) or "-"
        rows.append((arch, a["jobs"], a["ok"], a["failed"], a["rejected"], a["spilled"],
                     _fmt_seconds(a["compile_s"]), f"{a['compile_s']['total']:.1f}",
                     _fmt_range(a["vgprs"]), _fmt_range(a["agprs"]),
                     _fmt_range(a["lds_bytes"]), _fmt_ratio(a), mfma))
    print_table(f"compile-check: {summary['template']} ({summary['template_hash']}), "
                f"flydsl {summary['flydsl']}",
                ["arch", "jobs", "ok", "failed", "rejected", "spilled",
                 "compile s min/med/max", "compile s total", "VGPRs", "AGPRs", "LDS bytes",
                 "main-loop llvm-mca ratio (estimated/ok)", "MFMA instructions (sum over ok)"],
                rows)
    t = summary["total"]
    console.print(f"{t['compiled']} compiles ({t['ok']} ok, {t['failed']} failed, "
                  f"{t['crashed']} crashed, {t['timeouts']} timed out), {t['rejected']} "
                  f"rejected by the resource model; {t['compile_s']['total']:.1f} s of "
                  f"compile in {summary['wall_s']:.1f} s wall on {summary['workers']} "
                  f"worker(s)" + (f"; recorded in {summary['db']}" if summary["db"] else ""))
    for arch, a in summary["archs"].items():
        if a["emulated"]:
            console.print(f"{arch}: {a['emulated_ok']}/{a['emulated']} compiled configs correct "
                          f"in the ISA emulator (max abs error {a['max_abs_err']}; "
                          f"{a['emulation_s']:.1f} s of emulation)")
    for arch, a in summary["archs"].items():
        for note in a.get("mca_notes", []):
            console.print(f"{arch}: no llvm-mca estimate: {note}", markup=False)
    for arch, a in summary["archs"].items():
        for line in a["problems"]:
            console.print(f"[red]{arch}: {line.splitlines()[0][:300]}[/red]")


def run(args: argparse.Namespace) -> int:
    from ..flydsl_backend.builds import catalog, catalog_summary
    from ..flydsl_backend.builds.toolchain import ToolchainError

    archs = args.arch or ["gfx950"]
    try:
        jobs = catalog.build_jobs(archs, args.search_space, dtypes=args.dtype,
                                  layouts=args.layout, ops=args.op, full=args.full,
                                  limit=args.limit, template=args.template)
    except ValueError as exc:
        return fail(str(exc))
    if args.jobs is not None and args.jobs < 1:
        return fail("--jobs must be at least 1")
    db_path = None if args.no_db else (args.db or settings_from_env().db_path)
    if not args.json:
        n_compile = sum(1 for j in jobs if j.rejected is None or args.compile_rejected)
        err_console.print(f"{len(jobs)} jobs ({n_compile} to compile) for "
                          f"{', '.join(archs)}, search space {args.search_space}")
    try:
        compile_fn = catalog.EMULATE_COMPILE_FN if args.emulate else catalog.DEFAULT_COMPILE_FN
        result = catalog.run_catalog(jobs, workers=args.jobs, timeout_s=args.timeout,
                                     db_path=db_path, compile_rejected=args.compile_rejected,
                                     compile_fn=compile_fn)
    except ToolchainError as exc:
        return fail(str(exc))
    except UnusableDB as exc:
        return fail(str(exc))
    summary = catalog_summary.summarize(result)
    if args.json:
        print_json({**summary, "results": [item.to_json() for item in result.results]})
    else:
        _print_summary(summary)
    return 0 if summary["clean"] else 1
