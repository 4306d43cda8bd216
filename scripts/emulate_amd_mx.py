#!/usr/bin/env python
"""Run AMD's own MXFP4 GEMM kernel (ROCm/FlyDSL ``kernels/gemm/fp4_gemm_4wave.py``,
tested by AMD on MI355X) in this project's ISA emulator: an independent check of the
emulator's CDNA4 scaled-MFMA semantics (FP4 decode, E8M0 scales, ``op_sel`` byte
selection, lane layout), which the MX template and the emulator otherwise share a
reading of.

The kernel is imported from a FlyDSL source checkout (``--flydsl-repo``; nothing of it is
copied here), cross-compiled for gfx950 on the CPU, and run on random MXFP4 operands and
scales (B and the scales preshuffled with AMD's own host helpers, as AMD's test does);
the result is compared with this project's float64 dequantize-then-matmul reference
under the bf16 output's tolerances. AMD's test helpers import triton, which a CPU build
of torch lacks; only its triton-free helpers are used, so a stub module stands in for the
import.

    python scripts/emulate_amd_mx.py --flydsl-repo ~/src/FlyDSL            # K = 1024
    python scripts/emulate_amd_mx.py --flydsl-repo ~/src/FlyDSL --k 2048 --json

Exit status: 0 the emulated result is correct, 1 it is not, 2 a setup error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import types
from pathlib import Path


def _stub_triton() -> None:
    triton = types.ModuleType("triton")
    triton.jit = lambda fn=None, **_: fn if fn is not None else (lambda f: f)
    triton.cdiv = lambda a, b: -(-a // b)
    language = types.ModuleType("triton.language")
    language.constexpr = int
    triton.language = language
    sys.modules.setdefault("triton", triton)
    sys.modules.setdefault("triton.language", language)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flydsl-repo", type=Path, required=True,
                        help="a checkout of ROCm/FlyDSL (its kernels/ and tests/ are imported)")
    parser.add_argument("--k", type=int, default=1024,
                        help="K (a multiple of 256, at least 1024); M = N = 256: one workgroup")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not (args.flydsl_repo / "kernels" / "gemm" / "fp4_gemm_4wave.py").is_file():
        print(f"{args.flydsl_repo} holds no kernels/gemm/fp4_gemm_4wave.py", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.flydsl_repo))
    try:
        import torch

        from inductor_flydsl.emulator.gemm import run_kernel
        from inductor_flydsl.flydsl_backend.builds.cross_compile import compile_env, find_isa
        from inductor_flydsl.flydsl_backend.builds.toolchain import rocm_path_for_compile
        from inductor_flydsl.numerics import mx as mx_numerics
    except ImportError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 2
    m = n = 256
    k = args.k
    gen = torch.Generator().manual_seed(args.seed)
    a = mx_numerics.random_operand(m, k, "e2m1", gen)
    w = mx_numerics.random_operand(n, k, "e2m1", gen)
    scale_a = mx_numerics.random_scales(m, k, gen)
    scale_w = mx_numerics.random_scales(n, k, gen)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory(prefix="amd-mx-") as tmp:
        env = {"FLYDSL_GPU_ARCH": "gfx950", "COMPILE_ONLY": "1", "FLYDSL_DUMP_IR": "1",
               "FLYDSL_DUMP_DIR": tmp, "ROCM_PATH": rocm_path_for_compile(),
               "FLYDSL_RUNTIME_ENABLE_CACHE": "0"}
        with compile_env(env):
            _stub_triton()
            from kernels.gemm.fp4_gemm_4wave import compile_fp4_gemm_4w
            from tests.kernels.utils import gemm_common_utils as amd

            u8 = lambda t: t.view(torch.uint8).contiguous().view(-1)  # noqa: E731
            args_ = (u8(a), u8(amd.shuffle_weight_w4(w.view(torch.uint8), 16, False, False)),
                     out.view(-1), u8(amd.shuffle_scale_w4(scale_a.view(torch.uint8), 1, False)),
                     u8(amd.shuffle_scale_w4(scale_w.view(torch.uint8), 1, False)), m, n)
            launch = compile_fp4_gemm_4w(K=k, MN=(m, n))
            try:
                launch(*args_, None)  # COMPILE_ONLY: compiles, dumps the ISA, launches nothing
            except Exception as exc:
                print(f"note: compile-only launch raised {type(exc).__name__}: {exc}",
                      file=sys.stderr)
        isa = find_isa(Path(tmp))
        if isa is None:
            print("no ISA was produced", file=sys.stderr)
            return 2
        text = isa.read_text()
    start = time.perf_counter()
    report, bindings = run_kernel(text, args_, (1, 1, 1), (256, 1, 1), hazards="record")
    got = bindings.read_back(out.view(-1)).view(m, n)
    close = mx_numerics.check_mx(got, a, w, scale_a, scale_w)
    result = {"kernel": "ROCm/FlyDSL kernels/gemm/fp4_gemm_4wave.py", "shape": [m, n, k],
              "ok": close.ok, "worst": close.worst, "max_abs_err": close.max_abs_err,
              "mismatched": close.mismatched, "instructions": report.instructions,
              "emulation_s": round(time.perf_counter() - start, 1),
              "scaled_mfmas_in_isa": text.count("v_mfma_scale_f32_16x16x128_f8f6f4"),
              "hazards": list(report.hazards), "races": [r.describe() for r in report.races]}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        verdict = "correct" if close.ok else "WRONG"
        print(f"{result['kernel']} {m}x{n}x{k}: {verdict} in the emulator (worst "
              f"{close.worst:.3f} of the tolerance, max abs error {close.max_abs_err:.4g}; "
              f"{report.instructions} instructions)")
        print(f"LDS races: {len(result['races'])}; reads before an outstanding "
              f"direct-to-LDS load is counted complete (in-order vmcnt model): "
              f"{len(result['hazards'])}")
        for hazard in result["hazards"][:3]:
            print(f"  {hazard}")
    return 0 if close.ok else 1


if __name__ == "__main__":
    sys.exit(main())
