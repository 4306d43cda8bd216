"""``inductor-flydsl predict``: the performance model's predicted time of a GEMM kernel.

Two forms:

- a template config (or every eligible DEFAULT config) on a shape, from the shipped
  compile catalog: ``predict --op mm --shape 16x4096x4096 [--config '{"tile_m": ...}']``;
- any FlyDSL GEMM ISA file given its tile parameters (AMD's kernels too):
  ``predict --isa kernel.s --tile 16x64x256 --shape 16x4096x4096 [--split-k 2 ...]``.

Every figure printed is a prediction, never a measurement.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..performance.config_names import config_key, config_label
from ..performance.devices import DEFAULT_DEVICE, DEVICES, SOURCES, device_spec
from ..performance.kernel_profile import OPERAND_BYTES, profile_from_isa
from ..performance.model import PREDICTED_TIMINGS, predict
from ..performance.traffic import GemmShape
from .arguments import BadArgument, config_from_json, gemm_dtype, parse_choice, parse_gemm_shape
from .output import console, fail, print_json, print_table

COMMAND_NAMES = ("predict",)
OPS = ("mm", "addmm", "bmm", "grouped_mm", "scaled_mm")
ARCHS = ("gfx950", "gfx942")
TIMING_TEXT = {"graph": "graph replay or back-to-back launches: the kernel's fixed dispatch "
                        "cost and the gap between kernels, no host dispatch",
               "eager": "one event-timed call after a cache flush, host dispatch included"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "predict", help="predicted time of FlyDSL GEMM configs (or of any FlyDSL GEMM ISA "
                        "file) on an MI300/MI350-series device (a model, not a measurement)")
    p.add_argument("--op", default="mm", help=f"one of {', '.join(OPS)} (default mm)")
    p.add_argument("--shape", required=True,
                   help="MxNxK (bmm BxMxNxK, grouped_mm GxTxNxK)")
    p.add_argument("--dtype", default=None,
                   help="bf16 or fp16 (default bf16); scaled_mm (no default): mxfp8, mxfp4 or "
                        "<a>x<b> (e4m3, e5m2, e2m1)")
    p.add_argument("--layout", default="nt", help="nn, nt, tn or tt (default nt)")
    p.add_argument("--device", default=None,
                   help=f"one of {', '.join(DEVICES)} (default: MI355X for gfx950, MI300X "
                        "for gfx942)")
    p.add_argument("--arch", default=None, help="gfx950 or gfx942 (default: the device's)")
    p.add_argument("--config", default=None,
                   help="one template config as JSON (default: every eligible DEFAULT config)")
    p.add_argument("--isa", type=Path, default=None,
                   help="predict this FlyDSL GEMM ISA file (final .s) instead of a template "
                        "config; needs --tile")
    p.add_argument("--tile", default=None, help="--isa: the kernel's tile MxNxK, e.g. 16x64x256")
    p.add_argument("--waves", type=int, default=None,
                   help="--isa: waves per workgroup (default: from the kernel's metadata)")
    p.add_argument("--stages", type=int, default=2, help="--isa: LDS stages in flight")
    p.add_argument("--group-m", type=int, default=1, help="--isa: workgroup swizzle rows")
    p.add_argument("--split-k", type=int, default=1, help="--isa: K slices")
    p.add_argument("--split-k-reduction", default="workspace",
                   help="--isa: how split-K partials meet: workspace (a reduction kernel "
                        "after), atomic (added in the output with atomics, no extra kernel) "
                        "or counter (the last-arriving workgroup adds them, no extra kernel)")
    p.add_argument("--register-prefetch", action="store_true",
                   help="--isa: the kernel also loads the next K step into registers ahead "
                        "(one more step of loads in flight)")
    p.add_argument("--timing", default="graph",
                   help="how the predicted time is taken: graph (CUDA/HIP graph replay or "
                        "back-to-back launches, the default: max-autotune runs under "
                        "cudagraphs) or eager (one event-timed call, host dispatch "
                        "included)")
    p.add_argument("--sources", action="store_true", help="also list the device's sources")
    p.add_argument("--json", action="store_true")


def _device(args: argparse.Namespace) -> Any:
    if args.device is not None:
        try:
            device = device_spec(args.device)
        except ValueError:
            raise BadArgument("--device", args.device,
                              f"use one of {', '.join(DEVICES)}") from None
        if args.arch is not None and args.arch != device.arch:
            raise BadArgument("--arch", args.arch, f"{device.name} is {device.arch}")
        return device
    arch = parse_choice("--arch", args.arch, ARCHS) if args.arch else "gfx950"
    return device_spec(DEFAULT_DEVICE[arch])


def _shape(op: str, text: str, *, bias: bool) -> GemmShape:
    dims = parse_gemm_shape(op, text)
    if op == "grouped_mm":
        groups, t, n, k = dims
        return GemmShape(t, n, k, groups=groups)
    if len(dims) == 4:
        batch, m, n, k = dims
        return GemmShape(m, n, k, batch=batch)
    m, n, k = dims
    return GemmShape(m, n, k, bias=bias)


def _tile(text: str | None) -> tuple[int, int, int]:
    if text is None:
        raise BadArgument("--tile", None, "--isa needs the kernel's tile, e.g. "
                                          "--tile 16x64x256")
    try:
        m, n, k = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise BadArgument("--tile", text, "use MxNxK, e.g. 16x64x256") from None
    if min(m, n, k) <= 0:
        raise BadArgument("--tile", text, "sizes must be positive")
    return m, n, k


def _isa_dtypes(dtype: str) -> tuple[str, str]:
    text = dtype.strip().lower()
    aliases = {"mxfp8": ("e4m3", "e4m3"), "mxfp4": ("e2m1", "e2m1")}
    if text in aliases:
        return aliases[text]
    a, _, b = text.partition("x")
    b = b or a
    if a not in OPERAND_BYTES or b not in OPERAND_BYTES:
        raise BadArgument("--dtype", dtype, f"use bf16, fp16, mxfp8, mxfp4 or <a>x<b> of "
                                            f"{', '.join(sorted(OPERAND_BYTES))}")
    return a, b


def _predict_isa(args: argparse.Namespace, device: Any) -> list[dict[str, Any]]:
    tile_m, tile_n, tile_k = _tile(args.tile)
    reduction = parse_choice("--split-k-reduction", args.split_k_reduction,
                             ("workspace", "atomic", "counter"))
    for option, value in (("--split-k", args.split_k), ("--stages", args.stages),
                          ("--group-m", args.group_m), ("--waves", args.waves)):
        if value is not None and value < 1:
            raise BadArgument(option, str(value), "a whole number of at least 1")
    try:
        text = args.isa.read_text()
    except OSError as exc:
        raise BadArgument("--isa", str(args.isa), f"cannot read it ({exc.strerror})") from None
    a, b = _isa_dtypes(args.dtype)
    try:
        profile = profile_from_isa(
            text, device.arch, tile_m=tile_m, tile_n=tile_n, tile_k=tile_k, waves=args.waves,
            stages=args.stages, group_m=args.group_m, split_k=args.split_k, a_dtype=a,
            b_dtype=b, split_k_reduction=reduction, source=str(args.isa),
            register_prefetch=args.register_prefetch)
    except ValueError as exc:
        raise BadArgument("--isa", str(args.isa), str(exc)) from None
    _check_tile_against_isa(args, text, device.arch, profile)
    shape = _shape(args.op, args.shape, bias=False)
    try:
        prediction = predict(profile, shape, device, args.timing)
    except ValueError as exc:
        raise BadArgument("--shape", args.shape, str(exc)) from None
    return [{"kernel": str(args.isa), **prediction.to_json(), "profile": profile.to_json()}]


def _check_tile_against_isa(args: argparse.Namespace, text: str, arch: str,
                            profile: Any) -> None:
    """Refuse a ``--tile`` (with ``--waves``) the ISA's main loop cannot be made of: one
    trip of it issues ``loop_mfma`` MFMAs per wave, so the workgroup's multiply-adds per
    trip must be a whole number (at least 1) of K steps of the tile."""
    from ..isa.loop_analysis import analyze_isa
    from ..isa.stats import parse_isa

    threads = parse_isa(text).max_workgroup_size
    if args.waves and threads and args.waves * 64 != threads:
        raise BadArgument("--waves", str(args.waves),
                          f"{args.isa}'s kernel metadata gives its workgroups {threads} "
                          f"threads ({threads / 64:g} wave(s) of 64); leave --waves out to "
                          "take it from there")
    if not profile.loop_mfma or not analyze_isa(text, arch, mca=False).main_loop:
        return  # no main loop (K fully unrolled): the MFMAs cover an unknown K
    steps = profile.loop_mfma / profile.mfma_per_k_step
    if steps >= 0.999 and abs(steps - round(steps)) < 0.001:
        return
    macs = profile.loop_mfma * profile.waves * profile.flops_per_mfma // 2
    tile = profile.tile_m * profile.tile_n * profile.tile_k
    waves = (f"--waves {args.waves}" if args.waves else
             f"{profile.waves} wave(s) (its metadata's workgroup size)")
    raise BadArgument("--tile", args.tile,
                      f"{args.isa} does not hold this tile: one trip of its main loop issues "
                      f"{profile.loop_mfma} {profile.mfma} per wave, with {waves}: "
                      f"{macs} multiply-adds per workgroup, which is {steps:.3g} K steps of "
                      f"a {args.tile} tile ({tile} each), not a whole number of them; give "
                      "the tile (and --waves) the kernel was built with")


def _predict_configs(args: argparse.Namespace, device: Any) -> list[dict[str, Any]]:
    from ..flydsl_backend.offer.eligibility import problem_reasons
    from ..flydsl_backend.offer.offering import model_variant
    from ..performance.ranking import rank
    from ..performance.traffic import model_shape
    from ..problems.problem import synthetic_problem
    from ..template_loader import load_template

    op = parse_choice("--op", args.op, OPS)
    if op == "scaled_mm":
        from ..flydsl_backend.offer.mx_eligibility import parse_mx_dtype, synthetic_mx_problem

        m, n, k = parse_gemm_shape(op, args.shape)
        try:
            formats = parse_mx_dtype(args.dtype)
        except ValueError as exc:
            raise BadArgument("--dtype", args.dtype, str(exc).split(": ", 1)[-1]) from None
        problem = synthetic_mx_problem(m, n, k, formats=formats, out_dtype="bfloat16",
                                       bias=False, swizzled_scales=False)
    else:
        dims = parse_gemm_shape(op, args.shape)
        dtype = parse_choice("--dtype", args.dtype, {"bf16": "bfloat16", "fp16": "float16",
                                                     "bfloat16": "bfloat16",
                                                     "float16": "float16"})
        layout = parse_choice("--layout", args.layout, ("nn", "nt", "tn", "tt"))
        batch, (m, n, k) = (dims[0], dims[1:]) if len(dims) == 4 else (1, dims)
        try:
            problem = synthetic_problem(op, m, n, k, dtype=dtype, layout=layout, batch=batch)
        except ValueError as exc:
            raise BadArgument("--shape", args.shape, str(exc)) from None
    template, kernel_op, dtype_name, layout = model_variant(problem)
    if args.config is not None:
        configs = [config_from_json(load_template(template).GemmConfig, args.config)]
    else:
        reasons = problem_reasons(problem, arch=device.arch)
        if reasons:
            raise BadArgument("--shape", args.shape, "FlyDSL cannot take this problem: "
                                                     + "; ".join(reasons))
        from ..flydsl_backend.offer.offering import MAX_CANDIDATES, pruned_configs

        configs = pruned_configs(problem, device.arch, limit=MAX_CANDIDATES)
    shape = model_shape(problem)
    ranked = rank(configs, shape, arch=device.arch, template=template, op=kernel_op,
                  dtype=dtype_name, layout=layout, device=device, timing=args.timing)
    offered = _offered_status(problem, device.arch)
    out = []
    for entry in ranked:
        row: dict[str, Any] = {"config": entry.config.to_json()}
        if entry.prediction is None:
            row["prediction"] = "none: " + _why_none(entry.config, shape, template, kernel_op,
                                                     dtype_name, layout, device,
                                                     args.timing)
        else:
            row.update(entry.prediction.to_json())
        row["offered"] = offered.get(config_key(entry.config.to_json()), NOT_OFFERED)
        if entry.borrowed_from:
            row["figures_from"] = entry.borrowed_from
        out.append(row)
    return out


BENCHMARKED, RECORD_ONLY, NOT_OFFERED = ("benchmarked", "served from a record only",
                                         "not offered")


def _offered_status(problem: Any, arch: str) -> dict[str, str]:
    """What a compile on ``arch`` does with each config (``offered_configs``): benchmarked
    with no record (the model's top-k, or every offered config without preselection),
    offered only so that a record of it is served, or not offered."""
    from ..flydsl_backend.offer.offering import offered_configs

    configs, k = offered_configs(problem, arch)
    return {config_key(c.to_json()): BENCHMARKED if not k or i < k else RECORD_ONLY
            for i, c in enumerate(configs)}


def _why_none(config: Any, shape: GemmShape, template: str, op: str, dtype: str,
              layout: str, device: Any, timing: str) -> str:
    from ..performance.ranking import catalog_profile

    found = catalog_profile(config, arch=device.arch, template=template, op=op, dtype=dtype,
                            layout=layout)
    if found is None:
        return "the compile catalog has no figures for this config"
    try:
        predict(found[0], shape, device, timing)
    except ValueError as exc:
        return f"the kernel cannot take this shape ({exc})"
    return "no figures"


def run(args: argparse.Namespace) -> int:
    try:
        device = _device(args)
        args.dtype = gemm_dtype(args.op, args.dtype)
        args.timing = parse_choice("--timing", args.timing, PREDICTED_TIMINGS)
        rows = (_predict_isa(args, device) if args.isa is not None
                else _predict_configs(args, device))
    except BadArgument as exc:
        return fail(str(exc))
    if args.json:
        print_json({"device": device.name, "arch": device.arch, "kind": "predicted",
                    "timing": args.timing,
                    "predictions": rows,
                    "sources": {sid: SOURCES[sid][0] for sid in set(device.sources.values())}})
        return 0
    console.print(f"PREDICTED (performance model, not measured) on {device.name} "
                  f"({device.arch}, {device.compute_units} CUs, peak clock "
                  f"{device.clock_hz / 1e9:.2f} GHz, modelled at "
                  f"{device.gemm_clock_hz / 1e9:.2f} GHz under GEMM load), timing mode "
                  f"{args.timing} ({TIMING_TEXT[args.timing]}), --op {args.op} "
                  f"--shape {args.shape}", markup=False)
    for note in device.assumptions:
        console.print(f"  assumed: {note}", markup=False)
    table = []
    for rank_, row in enumerate(rows, 1):
        name = row.get("kernel") or config_label(row["config"])
        offered = row.get("offered", "-")
        if "predicted_us" not in row:
            table.append([rank_, name, row.get("prediction"), "-", "-", "-", "-", "-",
                          offered])
            continue
        parts = row["parts"]
        table.append([rank_, name, row["predicted_us"], row["tflops"], row["roofline_share"],
                      row["bound"], parts["workgroups"], parts["workgroups_per_cu"], offered])
    print_table("predicted time per config, fastest first",
                ["#", "config", "predicted us", "TFLOPS", "roofline", "bound", "workgroups",
                 "WG per CU (occupancy)", "a compile with no record"], table)
    borrowed = sorted({r["figures_from"] for r in rows if r.get("figures_from")})
    if borrowed:
        console.print(f"loop figures borrowed from the catalog's {', '.join(borrowed)} "
                      "rows of the same configs", markup=False)
    if args.sources:
        for figure, _sid, url in device.source_rows():
            console.print(f"  {figure}: {url}", markup=False)
    return 0
