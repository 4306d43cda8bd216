"""Validate the FlyDSL GEMM kernels on an AMD GPU (MI300 = gfx942, MI350/MI355X = gfx950).

The one command to run on a ROCm machine (``python -m inductor_flydsl validate-rocm``
alike; ``python scripts/validate_rocm.py`` in a source checkout):

    inductor-flydsl validate-rocm                  # numerics + speed, table
    inductor-flydsl validate-rocm --quick          # a subset of both (minutes)
    inductor-flydsl validate-rocm --json --out report.md

It first checks, without launching anything, that this is a ROCm 7 system with a
supported GPU: torch built for HIP 7 (``torch.version.hip``), ``libamdhip64.so.7``
loadable, a visible GPU (``torch.cuda.is_available()``) and its ``gcnArchName`` in the
template's archs. FlyDSL 0.5 aborts the whole process (exit 134) when it launches
without a ROCm 7 runtime, so nothing FlyDSL is imported before these checks pass; on
any other machine the script exits with status 2 and says what is missing.

Then:

(a) numerics: every DEFAULT config that fits the arch, for every dtype (bf16, fp16),
    layout (nn, nt, tn, tt) and op (mm, addmm with alpha/beta, bmm), on the shapes of
    ``suites.NUMERICS_SHAPES`` (M = 1, tails in M and N, minimum N, one K step, padded
    leading dimensions), compared with a float64 torch reference under the tolerances
    of ``inductor_flydsl.numerics.tolerances`` (torch's own bf16/fp16 result is
    held to the same bound, as a check of the tolerance). ``--quick``: every config for
    bf16 nt mm, every other variant with one representative config, three shapes.
(b) speed on ``suites.DENSE_BF16_NT_SUITE`` (15 shapes; ``--quick``: 5): the best DEFAULT
    FlyDSL config vs ATen (``torch.mm``) vs Triton (``torch.compile`` max-autotune with
    ``max_autotune_gemm_backends="TRITON"``), each timed the way Inductor times a choice
    (``--timing graph``, the default: captured once and the replay timed, as
    max-autotune's cudagraph trees run them; ``--timing eager``: one call between events
    after a cache flush, host dispatch included); speedup is over the faster of ATen and
    Triton, with the geomean over shapes.

(c) grouped GEMM (mixture of experts, ``templates/gemm_grouped.py``): numerics of every
    grouped DEFAULT config that fits the arch (bf16 and fp16, weights K- or N-contiguous)
    on ragged groups (empty, one-token, one dominant group, a single group, N tails),
    against a per-group float64 reference; speed on the MoE sweep presets' shapes
    (Mixtral-8x7B, DeepSeek-V3 with 8-way expert parallelism, Qwen3-30B-A3B) under the
    ``inductor`` and ``zipf`` token routings: the best grouped DEFAULT config vs ATen
    (``torch._grouped_mm``) vs Triton (``torch.compile`` max-autotune with TRITON; torch
    2.13 offers Triton's grouped template on CUDA only, so on ROCm this column is usually
    "-"). ``--quick``: bf16 ``nt`` numerics, one token count per model. ``--skip-grouped``
    leaves it out.

(d) MX block-scaled GEMM (MXFP8/MXFP4, ``templates/gemm_mx.py``, gfx950 only; on other
    archs the section says why it is skipped): numerics of every MX DEFAULT config for
    every format pairing (e4m3, e5m2, e2m1; bf16 out, fp16 for the two main pairings;
    ``mm`` and ``addmm``) on a tail shape (a full tile plus a partial one in M and N) and a
    decode shape (M = 1), against a float64 dequantize-then-matmul reference, and checked
    against ATen's ``torch._scaled_mm`` on the same unswizzled E8M0 scales where ATen
    takes them (a disagreement is a failure: it would mean the two read the scales
    differently); speed on the Llama-3-8B and -70B linear layers at M = 16, 256 and 4096
    for MXFP8 and MXFP4: the best MX DEFAULT config vs ATen (``torch._scaled_mm``).
    ``--quick``: FP8 x FP8 and FP4 x FP4 numerics, M = 16 and 4096 speed on Llama-3-8B.
    ``--skip-mx`` leaves it out.

(e) fused epilogues (``cli/rocm/epilogues.py``): on Llama-3-8B MLP and attention
    projections (SwiGLU gate with ``silu(gate) * up``, down and output projections with
    the residual add, a K/V projection with bias and per-channel scale, a GELU MLP) at
    M = 16, 128, 2048: the best DEFAULT dense config with the epilogue fused (numerics
    against float64 first) vs the best plain FlyDSL config plus the epilogue in torch vs
    ATen plus the epilogue vs Triton with the epilogue fused vs Inductor's own
    max-autotune decision. ``--skip-epilogues`` leaves it out.

(g) FlyDSL under cudagraph trees and Inductor's recorded times against the profiler's
    (``scripts/rocm_graphs.py``, beside ``tests/flydsl/test_graphs_rocm.py``: it steers
    Inductor's selector and reads the DB directly, as a test does, so it is no part of the
    package): run from a source checkout (``python scripts/validate_rocm.py``); elsewhere
    the report says it was not run. ``--skip-graphs`` leaves it out.

Exit status: 0 all numerics passed, 1 a numerics failure, 2 unsupported environment.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...settings import ENV_ENABLE, set_for_process
from . import dense
from .dense import run_numerics, run_speed
from .epilogues import EPILOGUE_COLUMNS, epilogue_table_rows, run_epilogues
from .grouped import run_grouped_numerics, run_grouped_speed
from .mx import run_mx
from .report import (
    GROUPED_COLUMNS,
    MX_COLUMNS,
    SPEED_COLUMNS,
    _config_name,
    grouped_table_rows,
    markdown_report,
    mx_table_rows,
    speed_table_rows,
)

EXIT_OK, EXIT_NUMERICS, EXIT_ENV = 0, 1, 2
GRAPHS_SCRIPT = "rocm_graphs"  # scripts/rocm_graphs.py: importable from a source checkout


@dataclass(frozen=True)
class Preflight:
    ok: bool
    message: str
    arch: str | None = None
    device_name: str | None = None
    hip: str | None = None
    torch: str | None = None


def preflight(device_index: int = 0) -> Preflight:
    """Check for a ROCm 7 runtime and a supported GPU without launching any kernel."""
    try:
        import torch
    except ImportError as exc:
        return Preflight(False, f"no ROCm: torch is not importable ({exc})")
    # the plugin's own constants (importing them loads no FlyDSL and launches nothing)
    from inductor_flydsl.flydsl_backend.builds.flydsl_runtime import HIP_LIBRARY
    from inductor_flydsl.flydsl_backend.offer.eligibility import SUPPORTED_ARCHS, hip_major

    hip = getattr(torch.version, "hip", None)
    if not hip:
        cuda = f", a CUDA {torch.version.cuda} build" if torch.version.cuda else ""
        return Preflight(False, f"no ROCm: this torch ({torch.__version__}{cuda}) is not a ROCm "
                         "build (torch.version.hip is None). Run this on an MI300/MI350 host "
                         "with a ROCm 7 build of torch.", torch=torch.__version__)
    if hip_major(hip) < 7:
        return Preflight(False, f"no ROCm 7: torch is built for HIP {hip}; FlyDSL 0.5 needs "
                         "ROCm 7 (install a ROCm 7 build of torch).", hip=hip,
                         torch=torch.__version__)
    # one HIP runtime: torch's must be the libamdhip64.so.7 FlyDSL binds, checked on the
    # process's mappings before that name is loaded (hip_library.py: which torch builds
    # map which library), and again after
    from inductor_flydsl.flydsl_backend.offer.hip_library import hip_runtime_reasons, process_maps

    conflicts = hip_runtime_reasons(process_maps())
    if not conflicts:
        try:
            ctypes.CDLL(HIP_LIBRARY)
        except OSError as exc:
            return Preflight(False, f"no ROCm 7 runtime: {HIP_LIBRARY} cannot be loaded "
                             f"({exc}). FlyDSL launches need it (without it the process "
                             "aborts).", hip=hip, torch=torch.__version__)
        conflicts = hip_runtime_reasons(process_maps())
    if conflicts:
        return Preflight(False, "HIP runtime conflict: " + "; ".join(conflicts), hip=hip,
                         torch=torch.__version__)
    if not torch.cuda.is_available() or torch.cuda.device_count() <= device_index:
        return Preflight(False, f"no GPU: torch.cuda.is_available() is "
                         f"{torch.cuda.is_available()} with {torch.cuda.device_count()} "
                         f"device(s) (HIP_VISIBLE_DEVICES / permissions on /dev/kfd?)",
                         hip=hip, torch=torch.__version__)
    props = torch.cuda.get_device_properties(device_index)
    arch = str(getattr(props, "gcnArchName", "")).split(":", 1)[0]
    if arch not in SUPPORTED_ARCHS:
        return Preflight(False, f"unsupported GPU {props.name} ({arch or 'unknown arch'}); "
                         f"the FlyDSL templates support {', '.join(SUPPORTED_ARCHS)}",
                         arch=arch, device_name=props.name, hip=hip, torch=torch.__version__)
    try:
        import flydsl  # noqa: F401  (import only; nothing is launched)
    except ImportError as exc:
        return Preflight(False, f"flydsl is not installed ({exc}); pip install 'flydsl>=0.5,<0.6'",
                         arch=arch, device_name=props.name, hip=hip, torch=torch.__version__)
    return Preflight(True, f"{props.name} ({arch}), HIP {hip}, torch {torch.__version__}",
                     arch=arch, device_name=props.name, hip=hip, torch=torch.__version__)


def _run_graphs(arch: str, device: Any, *, quick: bool, log: Any) -> dict[str, Any]:
    """Section (g) where ``scripts/rocm_graphs.py`` can be imported (``python
    scripts/validate_rocm.py`` puts scripts/ first on the path); else why it did not run."""
    if importlib.util.find_spec(GRAPHS_SCRIPT) is None:
        return {"skipped": "section (g) runs from a source checkout only: python "
                           "scripts/validate_rocm.py"}
    try:  # a source checkout's script, not part of the package
        from rocm_graphs import run_graphs  # type: ignore[import-not-found]
    except ImportError as exc:
        return {"skipped": f"section (g): scripts/rocm_graphs.py did not import ({exc})"}
    return run_graphs(arch, device, quick=quick, log=log)


def _parser(prog: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a subset of cases and shapes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write a Markdown report here")
    parser.add_argument("--device", type=int, default=0, help="GPU index (default 0)")
    parser.add_argument("--skip-numerics", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-grouped", action="store_true",
                        help="leave out the grouped (MoE) GEMM numerics and speed")
    parser.add_argument("--skip-mx", action="store_true",
                        help="leave out the MX (MXFP8/MXFP4) GEMM numerics and speed")
    parser.add_argument("--skip-epilogues", action="store_true",
                        help="leave out the fused-epilogue comparison (section e)")
    parser.add_argument("--skip-graphs", action="store_true",
                        help="leave out FlyDSL under cudagraph trees and the recorded-vs-"
                             "profiler timing check (section g, scripts/rocm_graphs.py)")
    parser.add_argument("--timing", choices=("graph", "eager"), default="graph",
                        help="how the speed sections time each kernel: graph replay (as "
                             "max-autotune's compiled graphs run, the default) or one call "
                             "between events, host dispatch included (as a graph without "
                             "cudagraphs runs)")
    return parser


def _run_sections(args: argparse.Namespace, pre: Any, device: Any, log: Any
                  ) -> dict[str, Any]:
    """Each section the arguments leave in, run and reported (the report's dict)."""
    report: dict[str, Any] = {"preflight": pre.__dict__, "quick": args.quick,
                              "timing": args.timing}
    start = time.perf_counter()
    if not args.skip_numerics:
        rows = run_numerics(pre.arch, device, quick=args.quick, log=log)
        failures = [r for r in rows if not r["ok"]]
        report["numerics"] = {
            "cases": len(rows), "failed": len(failures), "failures": failures,
            "torch_out_of_tolerance": sum(1 for r in rows if r.get("torch_ok") is False),
            "worst": max((r["kernel"]["worst"] for r in rows if "kernel" in r), default=None),
        }
    if not args.skip_speed:
        report["speed"] = run_speed(pre.arch, device, quick=args.quick, log=log)
    if not args.skip_grouped:
        grouped_rows = [] if args.skip_numerics else run_grouped_numerics(
            pre.arch, device, quick=args.quick, log=log)
        report["grouped"] = {
            "cases": len(grouped_rows), "failed": sum(not r["ok"] for r in grouped_rows),
            "failures": [r for r in grouped_rows if not r["ok"]],
            "speed": None if args.skip_speed else run_grouped_speed(
                pre.arch, device, quick=args.quick, log=log)}
    if not args.skip_mx:
        report["mx"] = run_mx(pre.arch, device, quick=args.quick,
                              numerics=not args.skip_numerics, speed=not args.skip_speed, log=log)
    if not args.skip_epilogues:
        report["epilogues"] = run_epilogues(pre.arch, device, quick=args.quick, log=log,
                                            bench_ms=dense.bench_ms)
    if not args.skip_graphs:
        report["graphs"] = _run_graphs(pre.arch, device, quick=args.quick, log=log)
        if report["graphs"].get("skipped"):
            log(f"validate_rocm: {report['graphs']['skipped']}")
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def _print_table(console: Any, title: str, columns: Any, rows: Any) -> None:
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def _print_report(report: dict[str, Any], pre: Any) -> None:
    """The report as tables and lines on the terminal."""
    from rich.console import Console

    console = Console()
    if "numerics" in report:
        n = report["numerics"]
        console.print(f"numerics: {n['cases']} launches, {n['failed']} failed, worst "
                      f"error/tolerance {n['worst']}")
        for r in n["failures"][:20]:
            console.print(f"  FAIL {r['dtype']} {r['layout']} {r['op']} {r['shape']} "
                          f"{_config_name(r['config'])}: {r['error']}")
    if "speed" in report:
        _print_table(console, f"dense BF16 NT on {pre.device_name} ({pre.arch})",
                     SPEED_COLUMNS, speed_table_rows(report["speed"]))
        geo = report["speed"]["geomean_speedup"]
        console.print(f"geomean speedup: {'-' if geo is None else f'{geo:.3f}'}")
    if "grouped" in report:
        g = report["grouped"]
        console.print(f"grouped numerics: {g['cases']} launches, {g['failed']} failed")
        if g["speed"]:
            _print_table(console, f"grouped GEMM (MoE) on {pre.device_name} ({pre.arch})",
                         GROUPED_COLUMNS, grouped_table_rows(g["speed"]))
    mx_report = report.get("mx") or {}
    if mx_report.get("skipped"):
        console.print(f"MX GEMM skipped: {mx_report['skipped']}")
    elif mx_report:
        console.print(f"MX numerics: {mx_report['cases']} launches, "
                      f"{mx_report['failed']} failed")
        if mx_report.get("speed"):
            _print_table(console, f"MX GEMM on {pre.device_name} ({pre.arch})", MX_COLUMNS,
                         mx_table_rows(mx_report["speed"]))
            console.print(f"geomean speedup over ATen: "
                          f"{mx_report['speed']['geomean_speedup']}")
    if report.get("epilogues"):
        _print_table(console, f"fused epilogues (Llama-3-8B shapes) on {pre.device_name} "
                              f"({pre.arch})",
                     EPILOGUE_COLUMNS, epilogue_table_rows(report["epilogues"]))
        console.print(f"geomean speedup of the fused FlyDSL kernel over Inductor's own: "
                      f"{report['epilogues']['geomean_speedup']}")


def _exit_status(report: dict[str, Any]) -> int:
    """EXIT_NUMERICS when a kernel of any section computed a wrong result, else EXIT_OK."""
    grouped_report = report.get("grouped") or {}
    mx_report = report.get("mx") or {}
    failed = (report.get("epilogues", {}).get("numerics_failures", 0)
              + report.get("numerics", {}).get("failed", 0) + grouped_report.get("failed", 0)
              + (grouped_report.get("speed") or {}).get("numerics_failures", 0)
              + mx_report.get("failed", 0)
              + (mx_report.get("speed") or {}).get("numerics_failures", 0))
    return EXIT_NUMERICS if failed else EXIT_OK


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    # Keep the plugin out of the baselines, here and in the compiles' child processes:
    # process-wide on purpose (inherited by every child this command starts).
    set_for_process({ENV_ENABLE: "0"})
    import inductor_flydsl

    inductor_flydsl.disable()
    args = _parser(prog).parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    pre = preflight(args.device)
    if not pre.ok:
        if args.json:
            print(json.dumps({"preflight": pre.__dict__}))
        print(f"validate_rocm: {pre.message}", file=sys.stderr)
        return EXIT_ENV
    import torch

    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    log(f"validate_rocm: {pre.message}")
    dense.TIMING = args.timing
    report = _run_sections(args, pre, device, log)
    if args.out:
        args.out.write_text(markdown_report(report))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report, pre)
    return _exit_status(report)
