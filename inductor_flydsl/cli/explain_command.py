"""``inductor-flydsl explain``: is FlyDSL eligible for a GEMM, and which configs it tries."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..db.open import UnusableDB, open_db
from ..db.queries import (
    bucket_status,
    describe_epilogue,
    describe_winner,
    epilogue_decisions,
)
from ..flydsl_backend.offer.eligibility import SUPPORTED_ARCHS
from ..priors import describe_record_line
from ..problems.buckets import dynamic_m_problem
from ..problems.problem import synthetic_problem
from ..settings import settings_from_env
from .arguments import BadArgument, gemm_dtype, parse_choice, parse_gemm_shape, parse_layout
from .explanation import OFFERED_FALSE, OFFERED_TRUE, config_fields, explain
from .output import console, fail, print_json, print_table

COMMAND_NAMES = ("explain",)
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "bfloat16": "bfloat16",
          "float16": "float16", "float32": "float32"}
MX_OUT_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "bfloat16": "bfloat16",
                 "float16": "float16"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explain", help="whether FlyDSL is eligible for a GEMM and the configs it would try")
    p.add_argument("--op", required=True,
                   choices=["mm", "addmm", "bmm", "grouped_mm", "scaled_mm"])
    p.add_argument("--shape", required=True,
                   help="MxNxK, or BxMxNxK for bmm, or GxTxNxK for grouped_mm (G groups "
                        "over T tokens, weights G x K x N)")
    p.add_argument("--dtype", default=None,
                   help="bf16 (the default), fp16 (fp32 shows the rejection); scaled_mm (no "
                        "default): mxfp8, mxfp4 or "
                        "<a>x<b> with formats e4m3, e5m2, e2m1 (e.g. e4m3xe2m1)")
    p.add_argument("--out-dtype", default="bf16", help="scaled_mm: bf16 or fp16 output")
    p.add_argument("--bias", action="store_true", help="scaled_mm: with a length-N bias")
    p.add_argument("--swizzled-scales", action="store_true",
                   help="scaled_mm: scales in torch's padded 32x4x4 (swizzled) layout, as "
                        "torch._scaled_mm's MX path takes them (shows the refusal)")
    p.add_argument("--block-scaled-weight", action="store_true",
                   help="scaled_mm: the weight's scales per 32x32 block, (ceil(N/32), K/32), "
                        "as vLLM's MXFP8 linear keeps them (rocm_mxfp8_block32_gemm); the "
                        "MX template's nt_b32 layout reads them (e4m3 x e4m3)")
    p.add_argument("--layout", default="nt",
                   help="nn, nt, tn or tt (A then B; t = col-major; grouped_mm: B's last two "
                        "dims, nt = K-contiguous weights)")
    p.add_argument("--dynamic-m", action="store_true",
                   help="M is symbolic (a dynamic-shape compile): show the key such a "
                        "compile records (M at its hint, the given M), FlyDSL's eligibility for "
                        "every M, and how the DB serves it")
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
    p.add_argument("--isa", type=Path, metavar="DIR", default=None,
                   help="cross-compile each listed config for this variant, write its final "
                        "ISA into DIR and analyse its main K loop: instruction mix, llvm-mca "
                        "cycles per trip and ratio to the MFMA-bound time, grid (exit 1 if "
                        "a config fails to compile)")
    p.add_argument("--json", action="store_true")


def _compile_configs(configs: list[dict[str, int]], arch: str, dtype: str, layout: str,
                     op: str, *, emulate: bool, dump_dir: Path | None) -> list[Any]:
    """Compile (and with ``emulate`` emulate) each config in worker processes; one
    CompileResult per config, in order. With ``dump_dir`` the FlyDSL dumps go there."""
    from ..flydsl_backend.builds import catalog
    from ..flydsl_backend.specs import registry

    template = registry.for_custom_op(op)[0].name
    jobs = [catalog.Job(template, tuple(sorted(c.items())), arch, dtype, layout, op)
            for c in configs]
    compile_fn = catalog.EMULATE_COMPILE_FN if emulate else catalog.DEFAULT_COMPILE_FN
    run = catalog.run_catalog(jobs, db_path=None, progress=False, compile_fn=compile_fn,
                              dump_dir=dump_dir)
    by_key = {item.job.key: item for item in run.results}
    return [by_key[job.key].result for job in jobs]


def _verdict(result: Any) -> dict[str, Any]:
    if result.emulation is None:
        return {"ok": False, "error": result.error or "not compiled"}
    e = result.emulation
    if "scenarios" in e:  # grouped: every ragged scenario
        return {"ok": e["ok"], "max_abs_err": e["max_abs_err"], "error": e["error"],
                "scenarios": {s["scenario"]: s["ok"] for s in e["scenarios"]}}
    return {"ok": e["ok"], "max_abs_err": e["max_abs_err"], "shape": e["shape"],
            "races": len(e["races"]), "error": e["error"]}


def _isa_name(rank: int, config: dict[str, int], arch: str, dtype: str, layout: str,
              op: str) -> str:
    """``01_gfx950_bf16_nt_mm_256x256x64_w2x4_stages2_group_m8.s`` (rank: best first)."""
    c = dict(config)
    parts = [f"{rank:02d}", arch, dtype, layout, op]
    if {"tile_m", "tile_n", "tile_k", "waves_m", "waves_n"} <= set(c):
        parts += [f"{c.pop('tile_m')}x{c.pop('tile_n')}x{c.pop('tile_k')}",
                  f"w{c.pop('waves_m')}x{c.pop('waves_n')}"]
    parts += [f"{k}{v}" for k, v in c.items()]
    return "_".join(parts) + ".s"


def _grid(config: dict[str, int], m: int, n: int, batch: int, groups: int = 0
          ) -> dict[str, Any]:
    """Workgroups the template launches for this shape (its ``launch_geometry``; for a
    grouped GEMM the upper bound it launches, see ``gemm_dense.launch_geometry``)."""
    from ..flydsl_backend.builds import catalog

    tpl = catalog.load_template(catalog.TEMPLATE)
    try:
        grid, _ = tpl.launch_geometry(tpl.GemmConfig.from_json(dict(config)), m, n, batch,
                                      groups=groups)
    except (AttributeError, TypeError, ValueError) as exc:
        return {"grid": None, "workgroups": None, "grid_error": f"{type(exc).__name__}: {exc}"}
    workgroups = 1
    for extent in grid:
        workgroups *= int(extent)
    return {"grid": [int(g) for g in grid], "workgroups": workgroups}


def _isa_fields(result: Any, isa_dir: Path, name: str) -> dict[str, Any]:
    """``isa_path`` (copied into ``isa_dir``), main-loop mix and llvm-mca estimate."""
    if result.isa_path is None:
        return {"isa_path": None, "compile_error": result.error or "no ISA produced",
                "main_loop": False, "loop_mix": None, "mca": None,
                "mca_unavailable": "not compiled"}
    target = isa_dir / name
    shutil.copyfile(result.isa_path, target)
    analysis = result.loop_analysis or {}
    fields: dict[str, Any] = {"isa_path": str(target)}
    if result.error:
        fields["compile_error"] = result.error
    fields.update({
        "main_loop": bool(analysis.get("main_loop")),
        "loop_label": analysis.get("label"),
        "loop_mix": analysis.get("mix") or None,
        "mca": analysis.get("mca"),
        "mca_unavailable": analysis.get("mca_unavailable"),
    })
    if not fields["main_loop"]:
        fields["loop_reason"] = analysis.get("reason", "not analysed")
    return fields


def _compile_listed(args: argparse.Namespace, configs: list[dict[str, int]], dtype: str,
                    dims: tuple[int, int, int, int]) -> tuple[list[dict[str, Any]], int]:
    """--emulate and/or --isa for the listed configs: the augmented entries, exit status."""
    short = {"bfloat16": "bf16", "float16": "fp16"}[dtype]
    layout = args.layout.lower()
    batch, m, n, _ = dims
    with tempfile.TemporaryDirectory(prefix="flydsl-explain-") as tmp:
        dump = Path(tmp) if args.isa is not None else None
        results = _compile_configs([config_fields(c) for c in configs], args.arch, short,
                                   layout, args.op, emulate=args.emulate, dump_dir=dump)
        entries, status = [], 0
        if args.isa is not None:
            args.isa.mkdir(parents=True, exist_ok=True)
        for rank, (config, result) in enumerate(zip(configs, results, strict=True), 1):
            entry: dict[str, Any] = dict(config)
            if args.emulate:
                entry["emulation"] = _verdict(result)
                status |= 0 if entry["emulation"]["ok"] else 1
            if args.isa is not None:
                name = _isa_name(rank, config_fields(config), args.arch, short, layout,
                                 args.op)
                grouped = args.op == "grouped_mm"
                entry.update(_grid(config_fields(config), m, n, 1 if grouped else batch,
                                   batch if grouped else 0))
                entry.update(_isa_fields(result, args.isa, name))
                status |= 0 if result.ok else 1
            entries.append(entry)
    return entries, status


def _mx_problem(args: argparse.Namespace, m: int, n: int, k: int) -> Any:
    from ..flydsl_backend.offer.mx_eligibility import parse_mx_dtype, synthetic_mx_problem

    out = parse_choice("--out-dtype", args.out_dtype, MX_OUT_DTYPES)
    try:
        formats = parse_mx_dtype(args.dtype)
    except ValueError as exc:
        raise BadArgument("--dtype", args.dtype, str(exc).split(": ", 1)[-1]) from None
    return synthetic_mx_problem(m, n, k, formats=formats, out_dtype=out,
                                bias=args.bias, swizzled_scales=args.swizzled_scales,
                                block_scaled_weight=args.block_scaled_weight)


def run(args: argparse.Namespace) -> int:
    try:
        args.dtype = gemm_dtype(args.op, args.dtype)
    except BadArgument as exc:
        return fail(str(exc))
    if args.op == "scaled_mm":
        return _run_mx(args)
    try:
        dims = parse_gemm_shape(args.op, args.shape)
        dtype = parse_choice("--dtype", args.dtype, DTYPES)
        layout = parse_layout(args.layout)
    except BadArgument as exc:
        return fail(str(exc))
    batch, (m, n, k) = (dims[0], dims[1:]) if len(dims) == 4 else (1, dims)
    try:
        problem = synthetic_problem(args.op, m, n, k, dtype=dtype, layout=layout,
                                    batch=batch)
    except ValueError as exc:
        return fail(str(exc))
    if args.dynamic_m:
        problem = dynamic_m_problem(problem)
        m = problem.mnk[0]
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
            db_info = {"db": str(db_path), **bucket_status(db, problem),
                       **_record_status(db, db_path, problem, args.arch),
                       "epilogues": epilogue_decisions(db, problem.id)}
            db.close()
    status = 0
    if (args.emulate or args.isa is not None) and result.eligible:
        from ..flydsl_backend.builds.toolchain import ToolchainError

        try:
            result.configs, status = _compile_listed(args, result.configs, dtype,
                                                     (batch, m, n, k))
        except ToolchainError as exc:
            return fail(str(exc))
    if args.json:
        print_json({**result.as_json(), "tuning_db": db_info})
        return status
    if problem.dynamic:
        console.print(f"dynamic M: keyed as {problem.summary()} (id {problem.id}), M at "
                      "its hint (the size of the first call)", markup=False)
    if db_info is not None:
        if "error" in db_info:
            console.print(f"tuning DB {db_path}: {db_info['error']}")
        elif db_info["exact_winner_archs"] and not db_info.get("prior"):
            what = "record of this dynamic problem" if problem.dynamic else "exact record"
            console.print(f"tuning DB {db_path}: {what} on "
                          f"{', '.join(db_info['exact_winner_archs'])}: a compile is served "
                          "every recorded candidate's time and Inductor decides as after "
                          "benchmarking")
            for w in db_info.get("exact_winners", []):  # confidence and spread
                console.print(f"  GEMM-only winner {describe_winner(w)}", markup=False)
            for e in db_info.get("epilogues", []):  # what the scheduler ran
                console.print(f"  {describe_epilogue(e)}", markup=False)
        elif db_info.get("prior"):
            console.print(f"tuning DB {db_path}: no exact record for this software; with "
                          f"INDUCTOR_FLYDSL_PRIORS=1 a compile on {args.arch} benchmarks the "
                          f"short list of the prior {db_info['prior']} (otherwise every "
                          "candidate)", markup=False)
        elif db_info["bucket_winner_archs"]:
            console.print(f"tuning DB {db_path}: no exact record; with "
                          "INDUCTOR_FLYDSL_BUCKETS=1 served by the "
                          f"{'static' if problem.dynamic else 'dynamic-M'} "
                          f"bucket M={db_info['bucket_m']} (winners on "
                          f"{', '.join(db_info['bucket_winner_archs'])})")
        else:
            console.print(f"tuning DB {db_path}: no winner for this problem or its bucket "
                          f"(M={db_info['bucket_m']}); a max-autotune compile on a "
                          f"{args.arch} GPU autotunes it and records every candidate ("
                          f"{cpu_record_note(args.op, dtype)})", markup=False)
    for record in (db_info or {}).get("records", []):
        console.print(f"  record {describe_record_line(record)}", markup=False)
    if result.eligible:
        configs = best_first(result.configs)
        console.print(f"FlyDSL is eligible for {result.problem} on {result.arch}: "
                      f"{len(configs)} {result.search_space} configs, "
                      + _order_text(configs), markup=False)
        fields = _fields(configs)
        print_table("configs", fields, [[_cell(c.get(f)) for f in fields]
                                        for c in configs])
        _print_model_note(result.model)
        if args.isa is not None:
            _print_isa_table(configs)
    else:
        console.print(f"FlyDSL is NOT eligible for {result.problem} on {result.arch}:")
        for reason in result.reasons:
            console.print(f"  - {reason}")
    return status


def best_first(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configs as listed: those a compile with no record benchmarks (``offered``
    True: the model's top-k) first, then the others; each part by predicted time, fastest
    first, configs without a prediction last in the order given."""
    def key(entry: tuple[int, dict[str, Any]]) -> tuple[bool, float, int]:
        index, config = entry
        predicted = config.get("predicted_us")
        return (config.get("offered") is False,
                predicted if isinstance(predicted, int | float) else float("inf"), index)

    return [c for _, c in sorted(enumerate(configs), key=key)]


def _order_text(configs: list[dict[str, Any]]) -> str:
    if not any(isinstance(c.get("predicted_us"), int | float) for c in configs):
        return "in the order a compile offers them (no prediction for this arch)"
    top = sum(1 for c in configs if c.get("offered") is True)
    if top and top < len(configs):
        return (f"offered True (the first {top}): {OFFERED_TRUE}; offered False (the "
                f"other {len(configs) - top}): {OFFERED_FALSE}; each part fastest "
                "predicted first")
    return "fastest predicted first"


def cpu_record_note(op: str, dtype: str) -> str:
    """What a max-autotune compile on this CPU records of such a GEMM, as real compiles
    show: a grouped GEMM nothing (tests/grouped/test_grouped_inductor_cpu.py), a bmm
    itself (tests/vllm_client/test_vllm_backend.py), a frozen linear the op oneDNN makes
    of it (``sweep.items.cpu_linear_op``; tests/sweep/test_sweep_progress.py)."""
    if op == "grouped_mm":
        return ("on CPU, Inductor's lowering of a grouped GEMM offers one choice, ATen's: "
                "nothing is compared, so nothing is recorded")
    if op == "bmm":
        return ("on CPU, Inductor autotunes a bmm (ATen against its C++ template) and it "
                "is recorded as bmm")
    from ..sweep.items import cpu_linear_op

    recorded = cpu_linear_op(dtype)
    return (f"on CPU, Inductor autotunes an {op} only when its weight is a constant, with "
            "torch._inductor.config.freezing = True, and it is recorded as the op oneDNN "
            f"makes of a {dtype} linear layer"
            + (f": {recorded} on this machine" if recorded else ""))


def _record_status(db: Any, path: Path, problem: Any, arch: str) -> dict[str, Any]:
    """Each recorded winner of ``problem`` (exact for this software, or only a prior) and
    the prior a compile on ``arch`` would start from: this machine's GPU when it is of
    that arch, else any device of the arch (``priors.py``)."""
    from ..db.store import TuningDB
    from ..priors import describe_records, nearest_prior
    from ..provenance.device import DeviceInfo, describe_device, rocm_arch
    from ..provenance.software import current_software

    selections = TuningDB(db, path, writable=False).recorded_selections(problem.id)
    software = current_software()
    records = describe_records(selections, software)
    device = (describe_device("cuda") if rocm_arch("cuda") == arch else
              DeviceInfo(kind="rocm", arch=arch, name="(any)", compute_units=0))
    prior = nearest_prior([[s for s in selections if s.device["kind"] == device.kind
                            and s.device["arch"] == device.arch]], device, software)
    exact = any(r["exact"] for r in records if r["arch"] == arch)
    return {"records": records,
            "prior": prior.describe() if prior is not None and not exact else None}


_ISA_KEYS = ("isa_path", "compile_error", "main_loop", "loop_label", "loop_mix", "loop_reason",
             "mca", "mca_unavailable", "grid", "workgroups", "grid_error")


def _print_isa_table(entries: list[dict[str, Any]]) -> None:
    rows = []
    for rank, e in enumerate(entries, 1):
        mix, mca = e.get("loop_mix") or {}, e.get("mca") or {}
        rows.append([rank, e.get("workgroups"), mix.get("mfma_total", "-"),
                     mca.get("cycles_per_trip", "-"), mca.get("ratio", "-"),
                     mix.get("ds_write_min_bytes", "-") if mix else "-",
                     f"{mix.get('vmem_load_lds', 0)}/{mix.get('vmem_load', 0)}" if mix else "-",
                     Path(e["isa_path"]).name if e.get("isa_path") else e.get("compile_error")])
    print_table("main K loop per trip (llvm-mca: 1.0 = MFMA-bound)",
                ["#", "workgroups", "MFMAs", "cycles", "ratio", "min LDS write B",
                 "loads to LDS/all", "ISA"], rows)
    model = sorted({f"{k} = {v} cycles" for e in entries
                    for k, v in ((e.get("mca") or {}).get("model_cycles_by_mfma") or {}).items()})
    if model:
        console.print(f"model cycles per MFMA: {', '.join(model)}")
    reasons = sorted({e["mca_unavailable"] for e in entries
                      if e.get("main_loop") and not e.get("mca") and e.get("mca_unavailable")})
    reasons += sorted({e["loop_reason"] for e in entries if e.get("loop_reason")})
    for reason in reasons:
        console.print(f"no estimate: {reason}", markup=False)


def _print_model_note(model: dict[str, str] | None) -> None:
    if model:
        console.print(f"predicted_us, tflops, roofline_share, bound: PREDICTED by the "
                      f"performance model on {model['device']}, not measured "
                      f"({model['doc']}); offered {model['offered']}", markup=False)


def _fields(configs: list[dict[str, Any]]) -> list[str]:
    """Every column any listed config has (a stored short list marks only its own), in
    first-seen order, without the --isa ones."""
    fields: list[str] = []
    for config in configs:
        fields += [f for f in config if f not in _ISA_KEYS and f not in fields]
    return fields


def _cell(value: object) -> object:
    if isinstance(value, dict):  # an emulation verdict
        if value.get("ok"):
            return f"ok (max abs err {value['max_abs_err']:.3g}, {value['shape']})"
        return f"WRONG: {value.get('error')}"
    return value


def _run_mx(args: argparse.Namespace) -> int:
    """``explain --op scaled_mm``: an MX problem's eligibility, configs and, with
    --emulate/--isa, each config compiled (and emulated) for the problem's variant."""
    from ..flydsl_backend.builds import catalog
    from ..flydsl_backend.offer.mx_eligibility import mx_layout, variant_dtype

    try:
        m, n, k = parse_gemm_shape("scaled_mm", args.shape)
        problem = _mx_problem(args, m, n, k)
    except BadArgument as exc:
        return fail(str(exc))
    result = explain(problem, args.arch, search_space=args.search_space,
                     check_runtime=args.check_runtime)
    status = 0
    if (args.emulate or args.isa is not None) and result.eligible:
        from ..flydsl_backend.builds.toolchain import ToolchainError

        variant, op = variant_dtype(problem), "addmm" if args.bias else "mm"
        mx_lay = mx_layout(problem)
        jobs = [catalog.Job("gemm_mx", tuple(sorted(config_fields(c).items())), args.arch,
                            variant, mx_lay, op) for c in result.configs]
        try:
            with tempfile.TemporaryDirectory(prefix="flydsl-explain-") as tmp:
                run_ = catalog.run_catalog(
                    jobs, db_path=None, progress=False, dump_dir=Path(tmp),
                    compile_fn=(catalog.EMULATE_COMPILE_FN if args.emulate
                                else catalog.DEFAULT_COMPILE_FN))
                by_key = {item.job.key: item.result for item in run_.results}
                if args.isa is not None:
                    args.isa.mkdir(parents=True, exist_ok=True)
                for rank, (entry, job) in enumerate(zip(result.configs, jobs, strict=True), 1):
                    compiled = by_key[job.key]
                    if args.emulate:
                        entry["emulation"] = _verdict(compiled)
                        status |= 0 if entry["emulation"]["ok"] else 1
                    if args.isa is not None:
                        name = _isa_name(rank, dict(job.config), args.arch, variant, mx_lay,
                                         op)
                        entry.update(_isa_fields(compiled, args.isa, name))
                        status |= 0 if compiled.ok else 1
        except ToolchainError as exc:
            return fail(str(exc))
    if args.json:
        print_json(result.as_json())
        return status
    if result.eligible:
        configs = best_first(result.configs)
        console.print(f"FlyDSL is eligible for {result.problem} on {result.arch}: "
                      f"{len(configs)} MX configs, {_order_text(configs)}", markup=False)
        fields = _fields(configs)
        print_table("configs", fields, [[_cell(c.get(f)) for f in fields]
                                        for c in configs])
        if args.isa is not None:
            _print_isa_table(configs)
    else:
        console.print(f"FlyDSL is NOT eligible for {result.problem} on {result.arch}:",
                      markup=False)
        for reason in result.reasons:
            console.print(f"  - {reason}", markup=False)
    return status
