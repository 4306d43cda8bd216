#!/usr/bin/env python
"""Parallel FlyDSL candidate builds inside a real CPU compile, side by side in one run.

Each configuration runs in its own process with an empty FlyDSL disk cache and Inductor
cache: ``torch.compile(mode="max-autotune")`` of one bf16 GEMM with
``max_autotune_gemm_backends=ATEN,FLYDSL``, the FlyDSL provider's runtime check replaced
(as tests/flydsl/test_inductor_integration_cpu.py does) so its DEFAULT candidates for
gfx950 are offered and built (``--candidates N``, default 24: the plugin's
``INDUCTOR_FLYDSL_CANDIDATES`` setting, whose own default is 12); their launch is then
refused (no ROCm here) and ATen wins.
Measured: the serial time (every candidate built one after another in one process, as
first launches do without parallel builds), then, inside the compile, the wall time from
the builds' start to the last one done (by a worker process or by the benchmarking
thread, which builds what no worker has taken yet while a core is idle) with
``INDUCTOR_FLYDSL_BUILD_JOBS`` = 1 and = N (default: this machine's CPUs), each with the
build pool warm (its workers started and warmed up before the compile, as for every
FlyDSL selection after a process's first, which started the pool) and cold (the compile
starts right after ``enable()``, which starts nothing, so the build server's imports and
the workers' start-up fall inside the builds' wall time, as in a process's first).

    python scripts/bench_builds.py               # table
    python scripts/bench_builds.py --jobs 1,2 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, sys, time
import torch, torch._inductor.config as ic
import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs, configs_per_problem
from inductor_flydsl.problems.problem import synthetic_problem
m, n, k = (int(x) for x in sys.argv[2].split("x"))
if sys.argv[3] == "serial":  # today's cost: every candidate built one after another here
    configs = candidate_configs(synthetic_problem("mm", m, n, k, dtype="bfloat16",
                                                  layout="nt"), "gfx950",
                                limit=configs_per_problem())
    start = time.perf_counter()
    ok = sum(prebuild.build_here("gemm_dense", c.to_json(), arch="gfx950", dtype="bf16",
                                 layout="nt", op="mm").ok for c in configs)
    print("RESULT " + json.dumps({"serial_s": time.perf_counter() - start,
                                  "candidates": len(configs), "built_ok": ok}))
    sys.exit(0)
provider.runtime_target = lambda device: ("gfx950", [])  # offer the candidates on CPU
inductor_flydsl.enable(sys.argv[1], "readwrite")  # starts nothing
pool_wait_s = None
if sys.argv[3] == "warm":  # as for every FlyDSL selection after a process's first
    provider.start_build_server()  # what a selection offering FlyDSL calls
    start = time.perf_counter()
    assert prebuild.wait_ready(120), "build pool not ready"
    pool_wait_s = time.perf_counter() - start
ic.max_autotune_gemm_backends = "ATEN,FLYDSL"
a = torch.randn(m, k, dtype=torch.bfloat16); w = torch.randn(n, k, dtype=torch.bfloat16)
fn = lambda a, w: torch.mm(a.relu(), w.relu().t())  # operands made in-graph (aligned)
start = time.perf_counter()
y = torch.compile(fn, mode="max-autotune")(a, w)
compile_s = time.perf_counter() - start
torch.testing.assert_close(y, fn(a, w))
(run,) = prebuild.runs
print("RESULT " + json.dumps({
    "compile_s": compile_s, "candidates": run.jobs, "workers": run.workers,
    "workers_ready": run.workers_ready, "pool_wait_s": pool_wait_s,
    "build_wall_s": run.wall_s,
    "built_ok": sum(1 for b in run.builds if b.result is not None and b.result.ok)}))
"""


POOL_STATES = ("warm", "cold")


def run(jobs: int | None, shape: str, root: Path, candidates: int,
        pool: str = "warm") -> dict:
    """One child: ``jobs`` None builds serially in-process, else compiles with builds
    (``pool`` warm: the build pool's workers warm before the compile; cold: the compile
    starts right after enable(), while they start)."""
    root.mkdir(parents=True)
    env = {**os.environ, "FLYDSL_RUNTIME_CACHE_DIR": str(root / "flydsl_cache"),
           "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor_cache"),
           "INDUCTOR_FLYDSL_SHIPPED": "0", "INDUCTOR_FLYDSL_CANDIDATES": str(candidates)}
    if jobs is not None:
        env["INDUCTOR_FLYDSL_BUILD_JOBS"] = str(jobs)
    env.pop("INDUCTOR_FLYDSL", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root / "t.db"), shape,
                           "serial" if jobs is None else pool], env=env,
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
                        help="INDUCTOR_FLYDSL_BUILD_JOBS values to compile with")
    parser.add_argument("--pool", default=",".join(POOL_STATES),
                        help="build pool states to compile with: warm (its workers ready "
                             "before the compile, as when the plugin is enabled at `import "
                             "torch`), cold (the compile starts right after enable())")
    parser.add_argument("--shape", default="256x1024x512", help="MxNxK of the bf16 mm")
    parser.add_argument("--candidates", type=int, default=24,
                        help="FlyDSL configs offered for the shape (INDUCTOR_FLYDSL_CANDIDATES; "
                             "default 24, the issue's count; the plugin's default is 12)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds; per row, the median ratio's round is reported")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    jobs = [int(x) for x in args.jobs.split(",")]
    pools = [p for p in args.pool.split(",") if p]
    if any(p not in POOL_STATES for p in pools):
        parser.error(f"--pool takes {', '.join(POOL_STATES)}")
    rows = [(j, p) for p in pools for j in jobs]
    rounds: list[dict[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="bench_builds_") as tmp:
        for i in range(args.repeat):
            print(f"[{i + 1}/{args.repeat}] serial builds in one process ...",
                  file=sys.stderr, flush=True)
            found = {"serial": run(None, args.shape, Path(tmp) / f"serial{i}",
                                   args.candidates)}
            for j, p in rows:
                print(f"[{i + 1}/{args.repeat}] compile, INDUCTOR_FLYDSL_BUILD_JOBS={j}, "
                      f"{p} pool ...", file=sys.stderr, flush=True)
                r = run(j, args.shape, Path(tmp) / f"jobs{j}_{p}_{i}", args.candidates, p)
                r["pool"] = p
                r["build_over_serial"] = round(r["build_wall_s"] / found["serial"]["serial_s"],
                                               3)
                found[f"{j}/{p}"] = r
            rounds.append(found)
    # per row, the round with its median ratio (each ratio is within one round)
    results: dict[str, dict] = {}
    all_ratios: dict[str, list[float]] = {}
    for j, p in rows:
        key = f"{j}/{p}"
        ordered = sorted(rounds, key=lambda r: r[key]["build_over_serial"])
        median = ordered[len(ordered) // 2]
        results[key] = {**median[key], "serial_s": round(median["serial"]["serial_s"], 3)}
        all_ratios[key] = [r[key]["build_over_serial"] for r in rounds]
    serial = [r["serial"]["serial_s"] for r in rounds]
    out = {"shape": args.shape, "cpus": cpus, "candidates": rounds[0]["serial"]["candidates"],
           "serial_s_all_rounds": [round(x, 3) for x in serial], "by_jobs_and_pool": results,
           "ratios_all_rounds": all_ratios, "repeat": args.repeat}
    if args.json:
        print(json.dumps(out))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{out['candidates']} FlyDSL candidates for gfx950, bf16 mm "
                        f"{args.shape}, on {cpus} CPUs; serial: "
                        f"{statistics.median(serial):.1f} s (median)")
    for col in ("build processes", "pool", "workers ready", "build wall (s)", "serial (s)",
                "over serial", "built ok",
                "whole compile (s)"):
        table.add_column(col)
    for r in results.values():
        table.add_row(str(r["workers"]), r["pool"], str(r["workers_ready"]),
                      f"{r['build_wall_s']:.1f}", f"{r['serial_s']:.1f}",
                      f"{r['build_over_serial']:.2f}",
                      str(r["built_ok"]), f"{r['compile_s']:.1f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
