"""Host time of a warm FlyDSL launch, before and after issue 36, side by side in one run.

Both go through FlyDSL's real runtime over the stand-in HIP library (tests/fake_hip, its
recording mode: ``hipModuleLaunchKernel`` records the launch and returns), on this CPU
machine, for the same dense bf16 mm variant and shape:

* ``jit launcher``: the ``@flyc.jit`` launcher called as before (FlyDSL traces the whole
  kernel on every call, then finds the compiled kernel in its cache and launches);
* ``template launch``: the template's ``launch`` through the kernel runner (the
  runner's compiled function: no trace);
* ``custom op``: ``torch.ops.inductor_flydsl.mm_out.default``, as Inductor's generated
  code and its benchmarker call it: torch's dispatch of the custom op, then the above.

Run: ``python scripts/bench_launch.py [--calls N] [--jit-calls N]``. Prints a table of
median / p10 / p90 microseconds per call and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _times(fn, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e6)
    return sorted(out)


def _row(name: str, times: list[float]) -> dict:
    q = statistics.quantiles(times, n=10)
    return {"path": name, "calls": len(times), "median_us": statistics.median(times),
            "p10_us": q[0], "p90_us": q[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--jit-calls", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from tests.fake_hip.harness import FakeHipRuntime, fake_hip

    hip = fake_hip()
    import torch

    from inductor_flydsl.flydsl_backend import kernel_runner, prebuild
    from inductor_flydsl.flydsl_backend.toolchain import rocm_path_for_compile
    from inductor_flydsl.keys import canonical_json
    from inductor_flydsl.template_loader import load_template

    gemm = load_template("gemm_dense")
    config = gemm.GemmConfig(tile_m=64, tile_n=128, tile_k=64, waves_m=2, waves_n=2,
                             stages=2, group_m=8)
    m, n, k = 256, 512, 1024
    a = torch.randn(m, k, dtype=torch.bfloat16)
    b = torch.randn(n, k, dtype=torch.bfloat16).t()
    out = torch.empty(m, n, dtype=torch.bfloat16)
    rows = []
    with kernel_runner.use_runtime(FakeHipRuntime(hip)) as runner:
        text = canonical_json(config.to_json())
        torch.ops.inductor_flydsl.mm_out(a, b, out=out, config=text)  # cold: a worker builds
        call = torch.ops.inductor_flydsl.mm_out.default
        for _ in range(50):
            call(a, b, out=out, config=text)
        op_after = _times(lambda: call(a, b, out=out, config=text), args.calls)
        after = _times(lambda: gemm.launch(a, b, None, out, 1.0, 0.0, config, runner=runner),
                       args.calls)
        launches_after = hip.launch_count()

        # before: the jit launcher, called with the same arguments on the same stream
        # (this process traces here; the settings are those FlyDSL needs for gfx950)
        os.environ.update({"FLYDSL_GPU_ARCH": "gfx950", "ROCM_PATH": rocm_path_for_compile()})
        launcher = gemm.make_launcher(config, dtype="bf16", layout="nt", op="mm",
                                      arch="gfx950")
        jit_args = gemm.launcher_args(a, b, None, out, 1.0, 0.0)
        stream = runner.runtime.stream_handle
        launcher(*jit_args, stream=stream)  # its first call compiles (FlyDSL's disk cache)
        before = _times(lambda: launcher(*jit_args, stream=stream), args.jit_calls)
        launched = hip.launch_count() - launches_after
    prebuild.shutdown_pool()
    rows = [_row("jit launcher (before)", before), _row("template launch (after)", after),
            _row("custom op (after)", op_after)]
    ratio = rows[0]["median_us"] / rows[1]["median_us"]
    if args.json:
        print(json.dumps({"rows": rows, "ratio": ratio, "jit_launches": launched}))
        return
    print(f"warm launch host time, dense bf16 mm {m}x{n}x{k} nt, config "
          f"{config.tile_m}x{config.tile_n}x{config.tile_k}, fake HIP recording mode")
    print(f"{'path':<24}{'calls':>7}{'median us':>12}{'p10 us':>10}{'p90 us':>10}")
    for r in rows:
        print(f"{r['path']:<24}{r['calls']:>7}{r['median_us']:>12.1f}{r['p10_us']:>10.1f}"
              f"{r['p90_us']:>10.1f}")
    print(f"before / template launch (median): {ratio:.0f}x; before / custom op: "
          f"{rows[0]['median_us'] / rows[2]['median_us']:.0f}x; jit launches recorded: "
          f"{launched}")


if __name__ == "__main__":
    main()
