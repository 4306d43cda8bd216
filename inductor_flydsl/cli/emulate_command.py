"""``inductor-flydsl emulate``: run a template kernel's ISA file in the emulator.

Runs the ISA (the ``22_final_isa.s`` FlyDSL dumped, or an edited copy) on random inputs
of one problem, with the kernel arguments the template's host code builds, and compares
the output with torch in float64 (shared tolerances). Exit status: 0 correct, 1 wrong
result, LDS race, hazard or emulation error (fault, unknown opcode, ...), 2 bad usage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import BadArgument, config_from_json, parse_gemm_shape
from .isa_match import check_dense_isa
from .output import console, fail, print_json

COMMAND_NAMES = ("emulate",)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("emulate", help="run a kernel's compiled ISA on the CPU and "
                                              "compare with torch",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--isa", required=True, type=Path, help="assembly file (22_final_isa.s)")
    p.add_argument("--template", default="gemm_dense", help="template the ISA was built from")
    p.add_argument("--config", required=True, help="the config as JSON, e.g. "
                   '\'{"tile_m": 64, "tile_n": 128, "tile_k": 64, "waves_m": 2, '
                   '"waves_n": 2, "stages": 2, "group_m": 8}\'')
    p.add_argument("--op", required=True, choices=["mm", "addmm", "bmm"])
    p.add_argument("--shape", required=True, help="MxNxK, or BxMxNxK for bmm")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--layout", default="nt", choices=["nn", "nt", "tn", "tt"])
    p.add_argument("--arch", default="gfx950", choices=["gfx950", "gfx942"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--budget", type=int, default=None,
                   help="instructions per wave before the run is stopped")
    p.add_argument("--hazards", choices=["error", "record"], default="error",
                   help="stop at the first hazard (default) or list every distinct one and "
                        "run on (a hazard still makes the result not ok)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from ..emulator.gemm import emulate_gemm
    from ..emulator.machine import DEFAULT_BUDGET
    from ..emulator.program import parse_program
    from ..template_loader import load_template

    try:
        text = args.isa.read_text()
    except OSError as exc:
        return fail(f"cannot read --isa: {exc}")
    try:
        dims = parse_gemm_shape(args.op, args.shape)
    except BadArgument as exc:
        return fail(str(exc))
    try:
        template = load_template(args.template)
    except (ValueError, OSError, ImportError) as exc:
        return fail(f"--template {args.template!r}: {exc}")
    try:
        config = config_from_json(template.GemmConfig, args.config)
    except BadArgument as exc:
        return fail(str(exc))
    batch, (m, n, k) = (dims[0], dims[1:]) if len(dims) == 4 else (2, dims)
    try:
        program = parse_program(text)
    except Exception as exc:
        return fail(f"{args.isa}: {exc}")
    target = program.kernel.arch
    if target != args.arch:
        return fail(f"{args.isa} was compiled for {target}, not --arch {args.arch}")
    unchecked: list[str] = []
    if args.template == "gemm_dense":
        match = check_dense_isa(args.isa, program, template, config, op=args.op,
                                dtype=args.dtype, layout=args.layout, arch=args.arch)
        if match.mismatches:
            return fail(f"{args.isa} is not the kernel these arguments describe, so running "
                        "it would report errors of the arguments, not of the kernel:\n  "
                        + "\n  ".join(match.mismatches))
        unchecked = match.unchecked
    if k % config.tile_k:
        return fail(f"K={k} is not a multiple of the config's tile_k={config.tile_k}")
    result = emulate_gemm(text, template, config, op=args.op, dtype=args.dtype,
                          layout=args.layout, m=m, n=n, k=k, batch=batch, seed=args.seed,
                          alpha=args.alpha, beta=args.beta, budget=args.budget or DEFAULT_BUDGET,
                          hazards=args.hazards)
    if args.json:
        print_json({**result.to_json(), "not_checked": unchecked})
    else:
        verdict = "[green]ok[/green]" if result.ok else "[red]WRONG[/red]"
        console.print(f"{verdict}: {args.op} {args.dtype} {args.layout} {m}x{n}x{k} on "
                      f"{args.arch}: max_abs_err {result.max_abs_err}, races "
                      f"{len(result.races)}, {result.instructions} instructions in "
                      f"{result.workgroups} workgroups, {result.seconds} s")
        for race in result.races[:10]:
            console.print(f"  race: {race}")
        for hazard in result.hazards[:10]:
            console.print(f"  hazard: {hazard}")
        if result.error:
            console.print(f"  error: {result.error}")
        if not result.ok:
            for note in unchecked:
                console.print(f"  not checked: {note}; a kernel built for other arguments "
                              "gives wrong results", markup=False)
    return 0 if result.ok else 1
