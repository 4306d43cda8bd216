"""Host time of a warm FlyDSL launch as Inductor's generated code makes it, and where it
goes, side by side in one run (issues 36 and 42).

Everything goes through FlyDSL's real runtime over the stand-in HIP library
(tests/fake_hip, its recording mode: ``hipModuleLaunchKernel`` records the launch and
returns), on this CPU machine, for the same dense bf16 mm variant and shape:

* ``generated call, bound``: ``inductor_flydsl_direct.mm_out(a, b, out=out, config=...)``
  exactly as generated code calls it (the module global and its attribute looked up on
  every call; Inductor's benchmark calls the same function) (issue 42: the op's
  implementation without torch's dispatcher, its launch bound: the operands' pointers
  and the stream written into slots packed once, the compiled host function called
  directly);
* ``custom op, full path``: ``torch.ops.inductor_flydsl.mm_out.default(..., out=out)``
  through torch's dispatcher with bound launches off: the runtime check, span checks,
  the template's argument packing, the kernel runner, FlyDSL's compiled function (which
  re-packs every argument): what generated code ran on every call before issue 42;
* ``custom op, bound``: the torch op through the dispatcher, bound (the dispatcher's
  share);
* ``bound launch``: the bound launch alone (no key, no dispatch);
* ``template launch``: the template's ``launch`` through the kernel runner (issue 36);
* ``aten mm.out, tiny CPU``: ``torch.ops.aten.mm.out`` on 4x4 CPU tensors, torch's own
  dispatch plus a trivial kernel, for scale;
* ``jit launcher``: the ``@flyc.jit`` launcher (re-traces every call; before issue 36);
* ``generated fused, bound`` / ``full``: ``inductor_flydsl_direct.gemm_epilogue_out``
  with a bias-column + relu epilogue, its unused operand slots filled with ``a`` as
  generated code fills them, bound (issue 50) and on the full path (every fused call
  before issue 50).

Run: ``python scripts/bench_launch.py [--calls N] [--jit-calls N] [--json]``. Prints
median / p10 / p90 microseconds per call. A benchmark, not a test: it claims nothing
about a GPU (a real HIP launch adds the driver's own enqueue time).
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
    for _ in range(min(200, calls)):  # warm
        fn()
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
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--jit-calls", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from tests.fake_hip.harness import FakeHipRuntime, fake_hip

    hip = fake_hip()
    import torch

    from inductor_flydsl.flydsl_backend.builds import prebuild
    from inductor_flydsl.flydsl_backend.run import kernel_runner, ops

    global inductor_flydsl_direct  # a module global, as in generated code
    from inductor_flydsl.flydsl_backend import direct as inductor_flydsl_direct
    from inductor_flydsl.flydsl_backend.builds.toolchain import rocm_path_for_compile
    from inductor_flydsl.problems.epilogue_spec import EpilogueSpec
    from inductor_flydsl.problems.keys import canonical_json
    from inductor_flydsl.template_loader import load_template

    gemm = load_template("gemm_dense")
    config = gemm.GemmConfig(tile_m=64, tile_n=128, tile_k=64, waves_m=2, waves_n=2,
                             stages=2, group_m=8)
    m, n, k = 256, 512, 1024
    a = torch.randn(m, k, dtype=torch.bfloat16)
    b = torch.randn(n, k, dtype=torch.bfloat16).t()
    out = torch.empty(m, n, dtype=torch.bfloat16)
    tiny, tiny_out = torch.randn(4, 4), torch.empty(4, 4)
    rows = []
    with kernel_runner.use_runtime(FakeHipRuntime(hip)) as runner:
        text = canonical_json(config.to_json())
        call = torch.ops.inductor_flydsl.mm_out.default
        call(a, b, out=out, config=text)  # cold: a worker builds; the next call binds
        call(a, b, out=out, config=text)
        key = ("mm", text, 1.0, a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype,
               out.shape, out.stride(), out.dtype, out.device)
        bound = runner.bound(key)
        assert bound is not None, "the op's launch was not bound"
        launches = hip.launch_count()
        rows.append(_row("generated call, bound", _times(  # as generated code spells it
            lambda: inductor_flydsl_direct.mm_out(a, b, out=out, config=text, alpha=1.0),
            args.calls)))
        ops.BIND_LAUNCHES = False
        rows.append(_row("custom op, full path", _times(
            lambda: call(a, b, out=out, config=text), args.calls)))
        ops.BIND_LAUNCHES = True
        rows.append(_row("custom op, bound", _times(
            lambda: call(a, b, out=out, config=text), args.calls)))
        rows.append(_row("bound launch", _times(lambda: bound((a, b, out), out), args.calls)))
        rows.append(_row("template launch", _times(
            lambda: gemm.launch(a, b, None, out, 1.0, 0.0, config, runner=runner),
            args.calls)))
        rows.append(_row("aten mm.out, tiny CPU", _times(
            lambda: torch.ops.aten.mm.out(tiny, tiny, out=tiny_out), args.calls)))
        expected = launches + 5 * (args.calls + min(200, args.calls))
        launched_ok = hip.launch_count() == expected
        # a fused epilogue (bias column + relu) as generated code calls it: its unused
        # operand slots filled with another tensor (issue 50: bound like a plain call)
        spec = EpilogueSpec.from_json({"operands": [{"kind": "col", "dtype": "bfloat16"}],
                                       "steps": [["add", "acc", "x0"], ["relu", "s0"]],
                                       "out_dtype": "bfloat16"})
        epilogue, x0 = spec.text(), torch.randn(n, dtype=torch.bfloat16)
        fused = inductor_flydsl_direct.gemm_epilogue_out
        fused(a, b, x0, a, a, a, out=out, config=text, epilogue=epilogue)  # builds
        fused(a, b, x0, a, a, a, out=out, config=text, epilogue=epilogue)  # binds
        fused_key = ("gemm_epilogue", text, epilogue, out.device,
                     *[(t.shape, t.stride(), t.dtype) for t in (a, b, out, x0)])
        assert runner.bound(fused_key) is not None, "the fused call was not bound"
        launches = hip.launch_count()
        rows.append(_row("generated fused, bound", _times(  # as generated code spells it
            lambda: inductor_flydsl_direct.gemm_epilogue_out(
                a, b, x0, a, a, a, out=out, config=text, epilogue=epilogue), args.calls)))
        ops.BIND_LAUNCHES = False
        rows.append(_row("generated fused, full", _times(
            lambda: fused(a, b, x0, a, a, a, out=out, config=text, epilogue=epilogue),
            args.calls)))
        ops.BIND_LAUNCHES = True
        launched_ok = launched_ok and hip.launch_count() == launches + 2 * (
            args.calls + min(200, args.calls))
        if args.jit_calls:
            os.environ.update({"FLYDSL_GPU_ARCH": "gfx950",
                               "ROCM_PATH": rocm_path_for_compile()})
            launcher = gemm.make_launcher(config, dtype="bf16", layout="nt", op="mm",
                                          arch="gfx950")
            jit_args = gemm.launcher_args(a, b, None, out, 1.0, 0.0)
            stream = runner.runtime.stream_handle
            launcher(*jit_args, stream=stream)  # its first call compiles
            jit = [0.0] * args.jit_calls
            for i in range(args.jit_calls):
                start = time.perf_counter()
                launcher(*jit_args, stream=stream)
                jit[i] = (time.perf_counter() - start) * 1e6
            rows.append(_row("jit launcher", sorted(jit)))
    prebuild.shutdown_pool()
    by = {r["path"]: r["median_us"] for r in rows}
    summary = {"after_over_before": by["generated call, bound"] / by["custom op, full path"],
               "torch_dispatch_us": by["custom op, bound"] - by["generated call, bound"],
               "op_key_and_checks_us": by["generated call, bound"] - by["bound launch"],
               "fused_over_plain_us": by["generated fused, bound"] - by["generated call, bound"],
               "every_launch_recorded": launched_ok}
    if args.json:
        print(json.dumps({"rows": rows, **summary}))
        return
    print(f"warm launch host time, dense bf16 mm {m}x{n}x{k} nt, config "
          f"{config.tile_m}x{config.tile_n}x{config.tile_k}, stand-in HIP (recording mode)")
    print(f"{'path':<24}{'calls':>7}{'median us':>12}{'p10 us':>10}{'p90 us':>10}")
    for r in rows:
        print(f"{r['path']:<24}{r['calls']:>7}{r['median_us']:>12.1f}{r['p10_us']:>10.1f}"
              f"{r['p90_us']:>10.1f}")
    print(f"generated call now / before (median): {summary['after_over_before']:.2f}; torch's "
          f"dispatcher would add {summary['torch_dispatch_us']:.1f} us; the op's key and "
          f"checks {summary['op_key_and_checks_us']:.1f} us; every launch reached HIP: "
          f"{launched_ok}")
    print(f"a fused call, bound, costs {summary['fused_over_plain_us']:.1f} us more than a "
          "plain one")


if __name__ == "__main__":
    main()
