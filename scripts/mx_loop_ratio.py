#!/usr/bin/env python
"""Main-loop cost of the MX (MXFP8/MXFP4) GEMM on gfx950, per DEFAULT config and format.

Cross-compiles every MX DEFAULT config for each format pairing asked (default: FP8 x FP8,
FP4 x FP4 and FP8 x FP4, bf16 out) in one run and prints the llvm-mca main-loop figures:
cycles per trip, the scaled MFMAs in it, the model's cycles per scaled MFMA, the raw ratio
(cycles over model cycles x MFMAs, as for the dense GEMM) and the *adjusted* ratio.

Why adjust: llvm-mca's gfx950 model gives ``v_mfma_scale_f32_16x16x128_f8f6f4`` 4 cycles
whatever its formats, the same as the dense ``v_mfma_f32_16x16x32_bf16``. AMD's MI355X
peak rates (dense BF16 2.5 PFLOP/s, MXFP8 5.0, MXFP6/MXFP4 10.0) say the matrix core
takes the 16x16x128 FP8 MFMA (4x the FLOPs of the bf16 one) twice as long as the bf16
MFMA, and the FP4 one as long. So the MFMA-bound time of a trip is ``model cycles x
MFMAs x 2`` for FP8 x FP8 and ``x 1`` for FP4 x FP4; for a mixed FP8 x FP4 MFMA AMD
publishes no rate, so it is counted as FP4's (``x 1``: the adjusted ratio is then an
upper bound, never flattered). The adjusted ratio divides by that (1.0 = MFMA-bound).
Also listed: VGPRs, AGPRs, spills and scratch, and the config Inductor would try first
for the --shape problem.
Exit status 1 if a config fails to compile, spills or uses scratch.

    python scripts/mx_loop_ratio.py                        # table
    python scripts/mx_loop_ratio.py --json
    python scripts/mx_loop_ratio.py --dtype e2m1xe2m1_bf16 --shape 8192x8192x8192
"""

from __future__ import annotations

import argparse
import json
import sys

from inductor_flydsl.flydsl_backend.builds import catalog
from inductor_flydsl.flydsl_backend.offer.mx_eligibility import synthetic_mx_problem
from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs

DEFAULT_DTYPES = ("e4m3xe4m3_bf16", "e2m1xe2m1_bf16", "e4m3xe2m1_bf16")
TORCH_FORMATS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1": "float4_e2m1fn_x2"}


def mfma_time_factor(dtype: str) -> int:
    """How many dense-bf16-MFMA times one scaled MFMA of ``dtype`` holds the matrix core:
    2 for FP8 x FP8, 1 for FP4 x FP4 (MI355X peak rates, see above) and, unpublished,
    1 for a mixed pairing (the conservative count)."""
    formats = dtype.split("_")[0].split("x")
    return 2 if all(f in ("e4m3", "e5m2") for f in formats) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", action="append", default=None,
                        help="variant <a>x<b>_<out> (repeatable; default: "
                             f"{', '.join(DEFAULT_DTYPES)})")
    parser.add_argument("--shape", default="4096x4096x4096",
                        help="MxNxK whose first-choice config is marked (default 4096^3)")
    parser.add_argument("--jobs", "-j", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dtypes = args.dtype or list(DEFAULT_DTYPES)
    m, n, k = (int(x) for x in args.shape.lower().split("x"))
    jobs = catalog.build_jobs(["gfx950"], template="gemm_mx", dtypes=dtypes)
    run = catalog.run_catalog(jobs, workers=args.jobs, db_path=None, progress=not args.json)
    rows, bad = [], []
    for item in run.results:
        r, c = item.result, item.job.config_json
        fa, fb = item.job.dtype.split("_")[0].split("x")
        problem = synthetic_mx_problem(m, n, k, formats=(TORCH_FORMATS[fa], TORCH_FORMATS[fb]))
        first = candidate_configs(problem, "gfx950")[:1]
        mca = (r.loop_analysis or {}).get("mca") or {}
        factor = mfma_time_factor(item.job.dtype)
        raw = mca.get("ratio")
        row = {
            "dtype": item.job.dtype,
            "config": (f"{c['tile_m']}x{c['tile_n']}x{c['tile_k']} w{c['waves_m']}x"
                       f"{c['waves_n']} s{c['stages']}"),
            "first_for_shape": bool(first) and first[0].to_json() == c,
            "ok": r.ok, "vgprs": r.vgprs, "agprs": r.agprs, "spills": r.vgpr_spills,
            "scratch": r.scratch_bytes, "cycles_per_trip": mca.get("cycles_per_trip"),
            "mfma_per_trip": mca.get("mfma_per_trip"),
            "model_cycles_per_mfma": mca.get("model_cycles_per_mfma"),
            "raw_ratio": raw, "time_factor": factor,
            "adjusted_ratio": round(raw / factor, 3) if raw is not None else None,
            "error": r.error,
        }
        rows.append(row)
        if not r.ok or r.vgpr_spills or r.scratch_bytes:
            bad.append(row)
    if args.json:
        print(json.dumps({"shape": args.shape, "rows": rows}, indent=1))
    else:
        print(f"{'dtype':16} {'config':22} {'VGPR':>5} {'AGPR':>5} {'spill':>5} "
              f"{'cyc/trip':>9} {'MFMA':>5} {'raw':>6} {'x':>2} {'adj':>6}  first for "
              f"{args.shape}")
        for row in rows:
            print(f"{row['dtype']:16} {row['config']:22} {row['vgprs'] or '-':>5} "
                  f"{row['agprs'] if row['agprs'] is not None else '-':>5} "
                  f"{row['spills'] if row['spills'] is not None else '-':>5} "
                  f"{row['cycles_per_trip'] or '-':>9} {row['mfma_per_trip'] or '-':>5} "
                  f"{row['raw_ratio'] or '-':>6} {row['time_factor']:>2} "
                  f"{row['adjusted_ratio'] or '-':>6}  {'<-' if row['first_for_shape'] else ''}"
                  f"{'  ' + row['error'] if row['error'] else ''}")
        model = sorted({r["model_cycles_per_mfma"] for r in rows if r["model_cycles_per_mfma"]})
        print(f"llvm-mca model cycles per scaled MFMA: {model}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
