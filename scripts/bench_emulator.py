"""Emulator speed: one workgroup of the largest DEFAULT tile, and every DEFAULT config.

    python scripts/bench_emulator.py            # both figures, as a table
    python scripts/bench_emulator.py --json

1. The 256x256x64 config (2x4 waves) on one 256x256 output tile with K=256 (4 K steps),
   gfx950 bf16 ``nt`` ``mm``, timed on one core (this process).
2. ``compile-check --emulate`` over the DEFAULT job set for gfx950 and gfx942 (every
   DEFAULT config for bf16 ``nt`` ``mm`` plus every other variant once), with two
   worker processes: wall time, and the emulation seconds summed over configs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from inductor_flydsl.emulator.gemm import emulate_gemm
from inductor_flydsl.flydsl_backend.builds import catalog, catalog_summary
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.template_loader import load_template


def one_workgroup() -> dict:
    gemm = load_template("gemm_dense")
    config = gemm.GemmConfig(tile_m=256, tile_n=256, tile_k=64, waves_m=2, waves_n=4,
                             stages=2, group_m=8)
    with tempfile.TemporaryDirectory() as tmp:
        compiled = compile_and_emulate("gemm_dense", config, arch="gfx950", dtype="bf16",
                                       layout="nt", op="mm", dump_dir=tmp)
        text = open(compiled.isa_path).read()
    start = time.perf_counter()
    run = emulate_gemm(text, gemm, config, op="mm", dtype="bf16", layout="nt", m=256, n=256,
                       k=256)
    seconds = time.perf_counter() - start
    return {"config": "256x256x64 w2x4 s2", "problem": "256x256x256", "ok": run.ok,
            "workgroups": run.workgroups, "instructions": run.instructions,
            "seconds": round(seconds, 2)}


def all_default(workers: int) -> dict:
    jobs = catalog.build_jobs(["gfx950", "gfx942"])
    start = time.perf_counter()
    run = catalog.run_catalog(jobs, workers=workers, db_path=None, progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    wall = time.perf_counter() - start
    summary = catalog_summary.summarize(run)
    return {"jobs": len(jobs), "workers": workers, "wall_s": round(wall, 1),
            "per_arch": {arch: {"compiled_ok": a["ok"], "emulated_ok": a["emulated_ok"],
                                "emulation_s": a["emulation_s"],
                                "max_abs_err": a["max_abs_err"]}
                         for arch, a in summary["archs"].items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {"one_workgroup": one_workgroup(), "all_default": all_default(args.workers)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    w = result["one_workgroup"]
    print(f"one workgroup, {w['config']} on {w['problem']}: {w['seconds']} s, "
          f"{w['instructions']} instructions, ok={w['ok']}")
    a = result["all_default"]
    print(f"DEFAULT job set ({a['jobs']} jobs, {a['workers']} workers): {a['wall_s']} s wall "
          f"(compile + emulate)")
    print("| arch | compiled | emulated correct | emulation s (sum) | max abs err |")
    print("|---|---|---|---|---|")
    for arch, p in a["per_arch"].items():
        print(f"| {arch} | {p['compiled_ok']} | {p['emulated_ok']} | {p['emulation_s']} | "
              f"{p['max_abs_err']:.3g} |")


if __name__ == "__main__":
    main()
