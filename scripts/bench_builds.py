#!/usr/bin/env python
"""Parallel FlyDSL candidate builds inside a real CPU compile, side by side in one run.

Each configuration runs in its own process with an empty FlyDSL disk cache and Inductor
cache: ``torch.compile(mode="max-autotune")`` of one bf16 GEMM with
``max_autotune_gemm_backends=ATEN,FLYDSL``, the FlyDSL provider's runtime check replaced
(as tests/flydsl/test_inductor_integration_cpu.py does) so its DEFAULT candidates for
gfx950 are offered and built; their launch is then refused (no ROCm here) and ATen wins.
Measured: the wall time of the build run (first build handed out to last reported) and
of the whole compile, with ``INDUCTOR_FLYDSL_BUILD_JOBS`` = 1 (one build after another)
and = N (default: this machine's CPUs).

    python scripts/bench_builds.py               # table
    python scripts/bench_builds.py --jobs 1,2 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, sys, time
import torch, torch._inductor.config as ic
import inductor_flydsl
from inductor_flydsl.flydsl_backend import prebuild, provider
provider.runtime_target = lambda device: ("gfx950", [])  # offer the candidates on CPU
m, n, k = (int(x) for x in sys.argv[2].split("x"))
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.max_autotune_gemm_backends = "ATEN,FLYDSL"
a = torch.randn(m, k, dtype=torch.bfloat16); w = torch.randn(n, k, dtype=torch.bfloat16)
fn = lambda a, w: torch.mm(a.relu(), w.relu().t())  # operands made in-graph (aligned)
start = time.perf_counter()
y = torch.compile(fn, mode="max-autotune")(a, w)
compile_s = time.perf_counter() - start
torch.testing.assert_close(y, fn(a, w))
builds = [b for b in prebuild._builds.values()]
print("RESULT " + json.dumps({
    "compile_s": compile_s, "runs": [{"jobs": r.jobs, "workers": r.workers,
                                       "wall_s": r.wall_s} for r in prebuild.runs],
    "built_ok": sum(1 for b in builds if b.result is not None and b.result.ok),
    "failed": sum(1 for b in builds if b.result is not None and not b.result.ok),
    "serial_compile_s": sum(b.result.compile_seconds for b in builds if b.result)}))
"""


def run(jobs: int, shape: str, root: Path) -> dict:
    root.mkdir(parents=True)
    env = {**os.environ, "INDUCTOR_FLYDSL_BUILD_JOBS": str(jobs),
           "FLYDSL_RUNTIME_CACHE_DIR": str(root / "flydsl_cache"),
           "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor_cache"),
           "INDUCTOR_FLYDSL_SHIPPED": "0"}
    env.pop("INDUCTOR_FLYDSL", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root / "t.db"), shape], env=env,
                          capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise RuntimeError(f"child failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    cpus = len(os.sched_getaffinity(0))
    parser.add_argument("--jobs", default=f"1,{cpus}",
                        help="INDUCTOR_FLYDSL_BUILD_JOBS values, serial first")
    parser.add_argument("--shape", default="256x1024x512", help="MxNxK of the bf16 mm")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    jobs = [int(x) for x in args.jobs.split(",")]
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_builds_") as tmp:
        for j in jobs:
            print(f"INDUCTOR_FLYDSL_BUILD_JOBS={j} ...", file=sys.stderr, flush=True)
            results[j] = run(j, args.shape, Path(tmp) / f"jobs{j}")
    serial = results[jobs[0]]
    out = {"shape": args.shape, "cpus": cpus, "by_jobs": results,
           "candidates": serial["runs"][0]["jobs"] if serial["runs"] else 0}
    for j in jobs[1:]:
        r = results[j]
        out[f"build_ratio_{j}_over_{jobs[0]}"] = round(
            r["runs"][0]["wall_s"] / serial["runs"][0]["wall_s"], 3)
        out[f"compile_ratio_{j}_over_{jobs[0]}"] = round(r["compile_s"] / serial["compile_s"],
                                                         3)
    if args.json:
        print(json.dumps(out))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{out['candidates']} FlyDSL candidates for gfx950, bf16 mm "
                        f"{args.shape}, inside torch.compile on {cpus} CPUs")
    for col in ("build jobs", "build wall (s)", "compile (s)", "sum of build times (s)",
                "built ok", "failed", "build ratio", "compile ratio"):
        table.add_column(col)
    for j, r in results.items():
        wall = r["runs"][0]["wall_s"] if r["runs"] else float("nan")
        table.add_row(str(j), f"{wall:.1f}", f"{r['compile_s']:.1f}",
                      f"{r['serial_compile_s']:.1f}", str(r["built_ok"]), str(r["failed"]),
                      f"{wall / serial['runs'][0]['wall_s']:.2f}",
                      f"{r['compile_s'] / serial['compile_s']:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
