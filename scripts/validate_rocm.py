#!/usr/bin/env python
"""Validate the FlyDSL GEMM kernels on an AMD GPU (MI300 = gfx942, MI350/MI355X = gfx950).

The one command to run on a ROCm machine:

    python scripts/validate_rocm.py                  # numerics + speed, table
    python scripts/validate_rocm.py --quick          # a subset of both (minutes)
    python scripts/validate_rocm.py --json --out report.md

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

(e) fused epilogues (``scripts/rocm_epilogues.py``): on Llama-3-8B MLP and attention
    projections (SwiGLU gate with ``silu(gate) * up``, down and output projections with
    the residual add, a K/V projection with bias and per-channel scale, a GELU MLP) at
    M = 16, 128, 2048: the best DEFAULT dense config with the epilogue fused (numerics
    against float64 first) vs the best plain FlyDSL config plus the epilogue in torch vs
    ATen plus the epilogue vs Triton with the epilogue fused vs Inductor's own
    max-autotune decision. ``--skip-epilogues`` leaves it out.

Exit status: 0 all numerics passed, 1 a numerics failure, 2 unsupported environment.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Keep the plugin out of the baselines (it activates only with INDUCTOR_FLYDSL=1).
os.environ["INDUCTOR_FLYDSL"] = "0"

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, str(ROOT))

EXIT_OK, EXIT_NUMERICS, EXIT_ENV = 0, 1, 2


def _runner() -> Any:
    """The launch runner Inductor's generated code uses (kernels built by the build
    workers, launched through FlyDSL compiled functions): timings here are of the same
    launch path."""
    from inductor_flydsl.flydsl_backend.kernel_runner import runner

    return runner()


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
    from inductor_flydsl.flydsl_backend.eligibility import SUPPORTED_ARCHS, hip_major
    from inductor_flydsl.flydsl_backend.flydsl_runtime import HIP_LIBRARY

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
    try:
        ctypes.CDLL(HIP_LIBRARY)
    except OSError as exc:
        return Preflight(False, f"no ROCm 7 runtime: {HIP_LIBRARY} cannot be loaded "
                         f"({exc}). FlyDSL launches need it (without it the process aborts).",
                         hip=hip,
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


# ---------------------------------------------------------------------------
# Numerics
# ---------------------------------------------------------------------------

_TORCH_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16"}
ADDMM_ALPHA, ADDMM_BETA = 1.5, 0.5


def make_operand(rows: int, cols: int, *, col_major: bool, batch: int | None, dtype: str,
                 device: Any, pad: int = 0, generator: Any = None) -> Any:
    """A (batch, rows, cols) or (rows, cols) randn tensor; ``col_major`` stores it
    transposed; ``pad`` extra elements per stored row (a leading dimension > extent)."""
    import torch

    torch_dtype = getattr(torch, _TORCH_DTYPE_NAMES[dtype])
    outer, inner = (cols, rows) if col_major else (rows, cols)
    lead = (batch,) if batch else ()
    storage = torch.randn(*lead, outer, inner + pad, generator=generator, dtype=torch.float32,
                          device=device).to(torch_dtype)
    view = storage[..., :inner]
    return view.transpose(-1, -2) if col_major else view


def adapt_shape(shape: tuple[int, int, int], config: Any, layout: str, op: str
                ) -> tuple[int, int, int]:
    """Round M, N, K up to what the kernel requires for this config and layout."""
    from inductor_flydsl.template_loader import load_template

    req = load_template("gemm_dense").divisibility_requirements(config, op, layout)
    m, n, k = shape

    def up(value: int, multiple: int) -> int:
        return -(-value // multiple) * multiple

    k = max(up(k, req["k_multiple"]), req["k_min"])
    return up(m, req["m_multiple"]), up(n, req["n_multiple"]), k


def numerics_case(config: Any, *, dtype: str, layout: str, op: str,
                  shape: tuple[int, int, int], device: Any, pad: int = 0, batch: int = 3,
                  seed: int = 0) -> dict[str, Any]:
    """Launch the kernel once and compare with float64 torch; return a JSON-able row."""
    import torch

    from inductor_flydsl.numerics.tolerances import check_close
    from inductor_flydsl.template_loader import load_template

    gemm = load_template("gemm_dense")
    m, n, k = adapt_shape(shape, config, layout, op)
    gen = torch.Generator(device=device).manual_seed(seed)
    nb = batch if op == "bmm" else None
    a = make_operand(m, k, col_major=layout[0] == "t", batch=nb, dtype=dtype, device=device,
                     pad=pad, generator=gen)
    b = make_operand(k, n, col_major=layout[1] == "t", batch=nb, dtype=dtype, device=device,
                     pad=pad, generator=gen)
    bias = None
    alpha, beta = (ADDMM_ALPHA, ADDMM_BETA) if op == "addmm" else (1.0, 0.0)
    if op == "addmm":
        bias = torch.randn(n, generator=gen, device=device).to(a.dtype)
    out = torch.empty(*((nb,) if nb else ()), m, n, device=device, dtype=a.dtype)
    row: dict[str, Any] = {"config": config.to_json(), "dtype": dtype, "layout": layout,
                           "op": op, "shape": [m, n, k], "batch": nb, "pad": pad}
    try:
        gemm.launch(a, b, bias, out, alpha, beta, config, runner=_runner())
        torch.cuda.synchronize(device)
    except Exception as exc:  # a compile or launch error is a failed case, not a crash
        return {**row, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    ref = alpha * torch.matmul(a.double(), b.double())
    if op == "addmm":
        ref = ref + beta * bias.double()
        low = torch.addmm(bias, a, b, beta=beta, alpha=alpha)
    else:
        low = torch.bmm(a, b) if op == "bmm" else torch.mm(a, b)
    kernel = check_close(out, ref, dtype, k, scale=abs(alpha))
    aten = check_close(low, ref, dtype, k, scale=abs(alpha))
    return {**row, "ok": kernel.ok, "error": None if kernel.ok else
            f"{kernel.mismatched}/{kernel.numel} elements out of tolerance",
            "kernel": kernel.to_json(), "torch_worst": aten.worst, "torch_ok": aten.ok}


def numerics_plan(arch: str, quick: bool) -> list[tuple[Any, str, str, str]]:
    """(config, dtype, layout, op) cases: DEFAULT configs that fit ``arch``."""
    from inductor_flydsl.flydsl_backend import catalog

    jobs = catalog.build_jobs([arch], "DEFAULT", full=not quick)
    tpl = catalog._tpl
    return [(tpl.GemmConfig(**j.config_json), j.dtype, j.layout, j.op)
            for j in jobs if j.rejected is None]


def run_numerics(arch: str, device: Any, *, quick: bool, log: Any) -> list[dict[str, Any]]:
    from inductor_flydsl.flydsl_backend.suites import NUMERICS_BATCH, NUMERICS_SHAPES

    shapes = NUMERICS_SHAPES[:3] if quick else NUMERICS_SHAPES
    plan = numerics_plan(arch, quick)
    rows = []
    for i, (config, dtype, layout, op) in enumerate(plan, 1):
        for j, shape in enumerate(shapes):
            pad = 8 if j % 2 else 0  # every other shape with padded leading dimensions
            rows.append(numerics_case(config, dtype=dtype, layout=layout, op=op, shape=shape,
                                      device=device, pad=pad, batch=NUMERICS_BATCH, seed=j))
        bad = sum(not r["ok"] for r in rows)
        log(f"numerics {i}/{len(plan)} cases, {len(rows)} launches, {bad} failed")
    return rows


# ---------------------------------------------------------------------------
# Speed
# ---------------------------------------------------------------------------


TIMING = "graph"  # --timing


def bench_ms(fn: Any, *, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """Milliseconds of ``fn()`` the way Inductor times a choice (issue 42), for every
    kernel alike: ``--timing graph`` (default) captures ``fn`` once and times the replay
    (``benchmark_gpu_with_cuda_graph``: no host dispatch, as under cudagraph trees);
    ``--timing eager`` one call between events after a cache flush
    (``benchmark_gpu``: host dispatch included, as a graph without cudagraphs runs)."""
    from torch._inductor.runtime.benchmarking import benchmarker

    if TIMING == "graph":
        return float(benchmarker.benchmark_gpu_with_cuda_graph(fn, warmup=warmup_ms,
                                                               rep=rep_ms))
    return float(benchmarker.benchmark_gpu(fn, warmup=warmup_ms, rep=rep_ms))


def _triton_mm() -> Any:
    import torch

    def mm(a: Any, b: Any) -> Any:
        return torch.mm(a, b)

    # torch.compile takes mode or options, not both: this is max-autotune-no-cudagraphs.
    return torch.compile(mm, dynamic=False,
                         options={"max_autotune": True, "triton.cudagraphs": False,
                                  "max_autotune_gemm_backends": "TRITON"})


def speed_case(shape: tuple[int, int, int], arch: str, device: Any, triton_mm: Any
               ) -> dict[str, Any]:
    import torch

    from inductor_flydsl.flydsl_backend import configs
    from inductor_flydsl.numerics.tolerances import check_close
    from inductor_flydsl.template_loader import load_template

    gemm = load_template("gemm_dense")
    m, n, k = shape
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=torch.bfloat16).t()  # NT: x @ W.T
    row: dict[str, Any] = {"shape": [m, n, k]}
    row["aten_ms"] = bench_ms(lambda: torch.mm(a, b))
    try:
        triton_mm(a, b)
        row["triton_ms"] = bench_ms(lambda: triton_mm(a, b))
    except Exception as exc:  # no valid Triton config for the shape, compile error, ...
        row["triton_ms"], row["triton_error"] = None, f"{type(exc).__name__}: {exc}"[:300]
    out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    timings = {}
    for config in configs.default_configs(arch, "bf16"):
        if k % config.tile_k or k < config.tile_k:
            continue
        try:
            gemm.launch(a, b, None, out, 1.0, 0.0, config, runner=_runner())
            timings[config] = bench_ms(lambda c=config: gemm.launch(a, b, None, out, 1.0, 0.0, c,
                runner=_runner()))
        except Exception as exc:
            row.setdefault("flydsl_errors", []).append(f"{config}: {exc}"[:200])
    if timings:
        best = min(timings, key=timings.__getitem__)
        gemm.launch(a, b, None, out, 1.0, 0.0, best, runner=_runner())
        ref = torch.mm(a.double(), b.double())
        row.update(flydsl_ms=timings[best], flydsl_config=best.to_json(),
                   flydsl_configs_timed=len(timings),
                   flydsl_numerics_ok=check_close(out, ref, "bf16", k).ok)
    else:
        row.update(flydsl_ms=None, flydsl_config=None, flydsl_configs_timed=0)
    baselines = [t for t in (row["aten_ms"], row["triton_ms"]) if t]
    row["baseline_ms"] = min(baselines)
    row["speedup"] = row["baseline_ms"] / row["flydsl_ms"] if row["flydsl_ms"] else None
    flops = 2.0 * m * n * k
    row["flydsl_tflops"] = flops / row["flydsl_ms"] / 1e9 if row["flydsl_ms"] else None
    return row


def run_speed(arch: str, device: Any, *, quick: bool, log: Any) -> dict[str, Any]:
    import torch

    from inductor_flydsl.flydsl_backend.suites import DENSE_BF16_NT_QUICK, DENSE_BF16_NT_SUITE

    shapes = DENSE_BF16_NT_QUICK if quick else DENSE_BF16_NT_SUITE
    rows = []
    for i, shape in enumerate(shapes, 1):
        torch._dynamo.reset()  # a fresh static-shape compile per shape, no recompile limit
        rows.append(speed_case(shape, arch, device, _triton_mm()))
        log(f"speed {i}/{len(shapes)}: {'x'.join(map(str, shape))} speedup "
            f"{rows[-1]['speedup'] or float('nan'):.3f}")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None
    return {"rows": rows, "geomean_speedup": geomean,
            "wins": sum(s > 1.02 for s in speedups), "ties": sum(0.98 <= s <= 1.02
                                                                 for s in speedups),
            "losses": sum(s < 0.98 for s in speedups)}


# ---------------------------------------------------------------------------
# Grouped GEMM (mixture of experts)
# ---------------------------------------------------------------------------


def grouped_numerics_case(config: Any, *, dtype: str, layout: str, group_rows: list[int],
                          n: int, k: int, device: Any, scenario: str = "",
                          seed: int = 0) -> dict[str, Any]:
    """Launch the grouped kernel once on ragged groups; compare with a per-group float64
    reference (rows past the last group must stay untouched)."""
    import torch

    from inductor_flydsl.emulator.grouped import make_grouped_operands
    from inductor_flydsl.numerics.gemm import grouped_reference
    from inductor_flydsl.numerics.tolerances import check_close
    from inductor_flydsl.template_loader import load_template

    grouped = load_template("gemm_grouped")
    a, b, offs, out = (t.to(device) for t in make_grouped_operands(
        dtype, layout, group_rows, n, k, seed=seed))
    if layout[1] == "t":  # keep B K-contiguous on the device too
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    row: dict[str, Any] = {"config": config.to_json(), "dtype": dtype, "layout": layout,
                           "scenario": scenario, "group_rows": group_rows, "n": n, "k": k}
    try:
        grouped.launch(a, b, offs, out, config, runner=_runner())
        torch.cuda.synchronize(device)
    except Exception as exc:  # a compile or launch error is a failed case, not a crash
        return {**row, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    used = int(offs[-1])
    ref = grouped_reference(a, b, offs)
    kernel = check_close(out[:used], ref[:used], dtype, k)
    untouched = bool(torch.isnan(out[used:].float()).all())
    ok = kernel.ok and untouched
    error = None if ok else ("rows past the last group were written" if kernel.ok else
                             f"{kernel.mismatched}/{kernel.numel} elements out of tolerance")
    return {**row, "ok": ok, "error": error, "kernel": kernel.to_json()}


def run_grouped_numerics(arch: str, device: Any, *, quick: bool, log: Any
                         ) -> list[dict[str, Any]]:
    from inductor_flydsl.emulator.grouped import grouped_scenarios
    from inductor_flydsl.flydsl_backend import catalog

    jobs = catalog.build_jobs([arch], "DEFAULT", full=not quick, template="gemm_grouped")
    tpl = catalog._tpl
    plan = [(tpl.GemmConfig(**j.config_json), j.dtype, j.layout) for j in jobs
            if j.rejected is None]
    rows = []
    for i, (config, dtype, layout) in enumerate(plan, 1):
        for seed, (name, (group_rows, n, k)) in enumerate(grouped_scenarios(config).items()):
            rows.append(grouped_numerics_case(config, dtype=dtype, layout=layout,
                                              group_rows=group_rows, n=n, k=k,
                                              device=device, scenario=name, seed=seed))
        log(f"grouped numerics {i}/{len(plan)} configs, "
            f"{sum(not r['ok'] for r in rows)} failed")
    return rows


def grouped_speed_shapes(quick: bool) -> list[tuple[str, int, int, int, int]]:
    """(model layer, G, T, N, K) of the MoE sweep presets."""
    from inductor_flydsl.sweep import presets

    models = (("mixtral-8x7b", presets.MOE_MIXTRAL_8X7B),
              ("deepseek-v3-ep8", presets.MOE_DEEPSEEK_V3_EP8),
              ("qwen3-30b-a3b", presets.MOE_QWEN3_30B_A3B))
    tokens = presets.MOE_TOKENS[1:2] if quick else presets.MOE_TOKENS
    return [(f"{model} {name}", groups, t, n, k) for model, layers in models
            for name, groups, n, k, _ in layers for t in tokens]


def _triton_grouped_mm() -> Any:
    import torch

    def grouped_mm(x: Any, w: Any, offs: Any) -> Any:
        return torch._grouped_mm(x, w, offs=offs)

    return torch.compile(grouped_mm, dynamic=False,
                         options={"max_autotune": True, "triton.cudagraphs": False,
                                  "max_autotune_gemm_backends": "TRITON"})


def grouped_speed_case(shape: tuple[str, int, int, int, int], routing_name: str, arch: str,
                       device: Any) -> dict[str, Any]:
    import torch

    from inductor_flydsl.flydsl_backend.configs import DEFAULT_GROUPED, fits
    from inductor_flydsl.numerics.gemm import grouped_reference
    from inductor_flydsl.numerics.tolerances import check_close
    from inductor_flydsl.problems.routing import group_sizes, offsets
    from inductor_flydsl.template_loader import load_template

    grouped = load_template("gemm_grouped")
    label, groups, t, n, k = shape
    x = torch.randn(t, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(groups, n, k, device=device, dtype=torch.bfloat16).transpose(-1, -2)
    offs = offsets(group_sizes(routing_name, t, groups)).to(device)
    row: dict[str, Any] = {"layer": label, "shape": [groups, t, n, k], "routing": routing_name}
    row["aten_ms"] = bench_ms(lambda: torch._grouped_mm(x, w, offs=offs))
    try:
        triton = _triton_grouped_mm()
        triton(x, w, offs)
        row["triton_ms"] = bench_ms(lambda: triton(x, w, offs))
    except Exception as exc:
        row["triton_ms"], row["triton_error"] = None, f"{type(exc).__name__}: {exc}"[:300]
    out = torch.empty(t, n, device=device, dtype=torch.bfloat16)
    timings = {}
    for config in (c for c in DEFAULT_GROUPED if fits(c, arch, "bf16")):
        if k % config.tile_k or k < config.tile_k * max(1, config.stages - 1):
            continue
        try:
            grouped.launch(x, w, offs, out, config, runner=_runner())
            timings[config] = bench_ms(lambda c=config: grouped.launch(x, w, offs, out, c,
                runner=_runner()))
        except Exception as exc:
            row.setdefault("flydsl_errors", []).append(f"{config}: {exc}"[:200])
    if timings:
        best = min(timings, key=timings.__getitem__)
        grouped.launch(x, w, offs, out, best, runner=_runner())
        ref = grouped_reference(x, w, offs)
        row.update(flydsl_ms=timings[best], flydsl_config=best.to_json(),
                   flydsl_numerics_ok=check_close(out, ref, "bf16", k).ok)
    else:
        row.update(flydsl_ms=None, flydsl_config=None)
    baselines = [v for v in (row["aten_ms"], row["triton_ms"]) if v]
    row["baseline_ms"] = min(baselines)
    # a wrong result has no speed
    fast_and_right = row["flydsl_ms"] and row.get("flydsl_numerics_ok")
    row["speedup"] = row["baseline_ms"] / row["flydsl_ms"] if fast_and_right else None
    return row


def run_grouped_speed(arch: str, device: Any, *, quick: bool, log: Any) -> dict[str, Any]:
    import torch

    rows = []
    shapes = grouped_speed_shapes(quick)
    for i, shape in enumerate(shapes, 1):
        for routing_name in ("inductor", "zipf"):
            torch._dynamo.reset()
            rows.append(grouped_speed_case(shape, routing_name, arch, device))
        log(f"grouped speed {i}/{len(shapes)}: {shape[0]} speedup "
            f"{rows[-1]['speedup'] or float('nan'):.3f}")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None
    return {"rows": rows, "geomean_speedup": geomean,
            "numerics_failures": sum(r.get("flydsl_numerics_ok") is False for r in rows)}


GROUPED_COLUMNS = ["layer", "G x T x N x K", "routing", "FlyDSL ms", "best config", "ATen ms",
                   "Triton ms", "speedup vs best"]


def grouped_table_rows(speed: dict[str, Any]) -> list[list[str]]:
    return [[r["layer"], "x".join(map(str, r["shape"])), r["routing"], _ms(r["flydsl_ms"]),
             _config_name(r["flydsl_config"]), _ms(r["aten_ms"]), _ms(r["triton_ms"]),
             "-" if r["speedup"] is None else f"{r['speedup']:.3f}"] for r in speed["rows"]]


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _config_name(config: dict[str, int] | None) -> str:
    if not config:
        return "-"
    return (f"{config['tile_m']}x{config['tile_n']}x{config['tile_k']} "
            f"w{config['waves_m']}x{config['waves_n']} s{config['stages']} g{config['group_m']}")


def speed_table_rows(speed: dict[str, Any]) -> list[list[str]]:
    return [["x".join(map(str, r["shape"])), _ms(r["flydsl_ms"]), _config_name(r["flydsl_config"]),
             _ms(r["aten_ms"]), _ms(r["triton_ms"]),
             "-" if r["speedup"] is None else f"{r['speedup']:.3f}"] for r in speed["rows"]]


# ---------------------------------------------------------------------------
# MX block-scaled GEMM (gfx950)
# ---------------------------------------------------------------------------

MX_COLUMNS = ["layer", "format", "M x N x K", "FlyDSL ms", "best config", "ATen ms",
              "speedup vs ATen"]


def _aten_scaled_mm(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out_dtype: Any
                    ) -> Any:
    import torch

    return torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype)


def mx_numerics_case(config: Any, *, dtype: str, op: str, shape: tuple[int, int, int],
                     device: Any, seed: int = 0) -> dict[str, Any]:
    """Launch the MX kernel once; compare with the float64 MX reference and, where ATen
    runs on these scales, with ATen's result."""
    import torch

    from inductor_flydsl.emulator.mx import make_mx_operands
    from inductor_flydsl.numerics.mx import check_mx
    from inductor_flydsl.template_loader import load_template

    mx = load_template("gemm_mx")
    m, n, k = shape
    tensors = make_mx_operands(dtype, op, m, n, k, seed=seed)
    a, b, scale_a, scale_b, bias, out = (None if t is None else t.to(device) for t in tensors)
    row: dict[str, Any] = {"config": config.to_json(), "dtype": dtype, "op": op,
                           "shape": [m, n, k]}
    try:
        mx.launch(a, b, scale_a, scale_b, bias, out, config, runner=_runner())
        torch.cuda.synchronize(device)
    except Exception as exc:  # a compile or launch error is a failed case, not a crash
        return {**row, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    report = check_mx(out, a, b.t(), scale_a, scale_b, bias)
    row.update(ok=report.ok, kernel=report.to_json(),
               error=None if report.ok else f"{report.mismatched}/{report.numel} elements "
               "out of tolerance")
    try:
        aten = _aten_scaled_mm(a, b, scale_a, scale_b, bias, out.dtype)
    except Exception as exc:  # ATen may not take this layout or pairing: not our failure
        row["aten"] = f"not run: {type(exc).__name__}: {str(exc)[:160]}"
    else:
        agrees = check_mx(aten, a, b.t(), scale_a, scale_b, bias).ok
        row["aten"] = "agrees" if agrees else "DISAGREES with the float64 reference"
        if not agrees and report.ok:
            row.update(ok=False, error="ATen's result on these scales disagrees with the "
                       "float64 reference this kernel matches: the two read the scales "
                       "differently")
    return row


def run_mx_numerics(arch: str, device: Any, *, quick: bool, log: Any) -> list[dict[str, Any]]:
    from inductor_flydsl.emulator.mx import mx_tail_shape
    from inductor_flydsl.flydsl_backend import catalog
    from inductor_flydsl.template_loader import load_template

    mx = load_template("gemm_mx")
    dtypes = ["e4m3xe4m3_bf16", "e2m1xe2m1_bf16"] if quick else list(mx.DTYPES)
    jobs = [j for j in catalog.build_jobs([arch], template="gemm_mx", dtypes=dtypes,
                                          ops=["mm", "addmm"]) if j.rejected is None]
    rows = []
    for i, job in enumerate(jobs, 1):
        config = mx.MxConfig(**job.config_json)
        m, n, k = mx_tail_shape(config)
        for seed, shape in enumerate(((m, n, k), (1, n, k))):
            rows.append(mx_numerics_case(config, dtype=job.dtype, op=job.op, shape=shape,
                                         device=device, seed=seed))
        log(f"mx numerics {i}/{len(jobs)} variants, {sum(not r['ok'] for r in rows)} failed")
    return rows


def mx_speed_shapes(quick: bool) -> list[tuple[str, int, int, int]]:
    from inductor_flydsl.sweep.presets import LLAMA3_8B, LLAMA3_70B, MX_TOKENS

    models = (("llama3-8b", LLAMA3_8B),) if quick else (("llama3-8b", LLAMA3_8B),
                                                       ("llama3-70b", LLAMA3_70B))
    tokens = (16, 4096) if quick else MX_TOKENS
    return [(f"{model}.{layer}", m, n, k) for model, layers in models
            for layer, n, k in layers if layer != "gate/up" for m in tokens]


def mx_speed_case(shape: tuple[str, int, int, int], fmt: str, arch: str, device: Any
                  ) -> dict[str, Any]:
    import torch

    from inductor_flydsl.emulator.mx import make_mx_operands
    from inductor_flydsl.flydsl_backend.mx_eligibility import (
        alias_variant,
        parse_mx_dtype,
        synthetic_mx_problem,
    )
    from inductor_flydsl.flydsl_backend.offering import candidate_configs
    from inductor_flydsl.numerics.mx import check_mx
    from inductor_flydsl.template_loader import load_template

    mx = load_template("gemm_mx")
    name, m, n, k = shape
    short = alias_variant(fmt)
    a, b, scale_a, scale_b, _, out = (t.to(device) for t in make_mx_operands(
        short, "mm", m, n, k) if t is not None)
    row: dict[str, Any] = {"layer": name, "format": fmt, "shape": [m, n, k]}
    try:
        _aten_scaled_mm(a, b, scale_a, scale_b, None, torch.bfloat16)
        row["aten_ms"] = bench_ms(lambda: _aten_scaled_mm(a, b, scale_a, scale_b, None,
                                                          torch.bfloat16))
    except Exception as exc:
        row["aten_ms"], row["aten_error"] = None, f"{type(exc).__name__}: {exc}"[:300]
    problem = synthetic_mx_problem(m, n, k, formats=parse_mx_dtype(fmt))
    timings = {}
    for config in candidate_configs(problem, arch):
        try:
            mx.launch(a, b, scale_a, scale_b, None, out, config, runner=_runner())
            timings[config] = bench_ms(
                lambda c=config: mx.launch(a, b, scale_a, scale_b, None, out, c, runner=_runner()))
        except Exception as exc:
            row.setdefault("flydsl_errors", []).append(f"{config}: {exc}"[:200])
    if timings:
        best = min(timings, key=timings.__getitem__)
        mx.launch(a, b, scale_a, scale_b, None, out, best, runner=_runner())
        row.update(flydsl_ms=timings[best], flydsl_config=best.to_json(),
                   flydsl_numerics_ok=check_mx(out, a, b.t(), scale_a, scale_b).ok)
    else:
        row.update(flydsl_ms=None, flydsl_config=None)
    row["speedup"] = (row["aten_ms"] / row["flydsl_ms"]
                      if row["aten_ms"] and row["flydsl_ms"] else None)
    return row


def run_mx_speed(arch: str, device: Any, *, quick: bool, log: Any) -> dict[str, Any]:
    shapes = mx_speed_shapes(quick)
    rows = []
    for i, shape in enumerate(shapes, 1):
        for fmt in ("mxfp8", "mxfp4"):
            rows.append(mx_speed_case(shape, fmt, arch, device))
        log(f"mx speed {i}/{len(shapes)}: {shape[0]} M={shape[1]}")
    geomeans = {}
    for fmt in ("mxfp8", "mxfp4"):
        speedups = [r["speedup"] for r in rows if r["format"] == fmt and r["speedup"]]
        geomeans[fmt] = (math.exp(sum(math.log(x) for x in speedups) / len(speedups))
                         if speedups else None)
    return {"rows": rows, "geomean_speedup": geomeans,
            "numerics_failures": sum(1 for r in rows if r.get("flydsl_numerics_ok") is False)}


def mx_table_rows(speed: dict[str, Any]) -> list[list[str]]:
    return [[r["layer"], r["format"], "x".join(map(str, r["shape"])), _ms(r.get("flydsl_ms")),
             _config_name(r.get("flydsl_config")), _ms(r.get("aten_ms")),
             "-" if r.get("speedup") is None else f"{r['speedup']:.2f}"]
            for r in speed["rows"]]


SPEED_COLUMNS = ["M x N x K", "FlyDSL ms", "best config", "ATen ms", "Triton ms",
                 "speedup vs best"]


def markdown_report(report: dict[str, Any]) -> str:
    pre = report["preflight"]
    lines = ["# FlyDSL GEMM validation", "", f"- device: {pre['message']}",
             f"- mode: {'quick' if report['quick'] else 'full'}", ""]
    if report.get("numerics") is not None:
        n = report["numerics"]
        lines += ["## Numerics (float64 torch reference)", "",
                  f"{n['cases']} launches, {n['failed']} failed; torch's own low-precision "
                  f"result out of tolerance in {n['torch_out_of_tolerance']} cases.", ""]
        for r in n["failures"][:50]:
            lines.append(f"- FAIL {r['dtype']} {r['layout']} {r['op']} "
                         f"{'x'.join(map(str, r['shape']))} {_config_name(r['config'])}: "
                         f"{r['error']}")
        lines.append("")
    if report.get("speed") is not None:
        s = report["speed"]
        lines += ["## Speed, dense BF16 NT", "", "| " + " | ".join(SPEED_COLUMNS) + " |",
                  "|" + "---|" * len(SPEED_COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in speed_table_rows(s)]
        geo = s["geomean_speedup"]
        lines += ["", f"Geomean speedup over the faster of ATen and Triton: "
                  f"{'-' if geo is None else f'{geo:.3f}'} ({s['wins']} wins, {s['ties']} ties "
                  f"within 2 %, {s['losses']} losses)", ""]
    if report.get("grouped") is not None:
        g = report["grouped"]
        lines += ["## Grouped GEMM (mixture of experts)", "",
                  f"Numerics: {g['cases']} launches, {g['failed']} failed.", ""]
        lines += [f"- FAIL {r['dtype']} {r['layout']} {r['scenario']} "
                  f"{_config_name(r['config'])}: {r['error']}" for r in g["failures"][:50]]
        if g.get("speed"):
            lines += ["", "| " + " | ".join(GROUPED_COLUMNS) + " |",
                      "|" + "---|" * len(GROUPED_COLUMNS)]
            lines += ["| " + " | ".join(row) + " |" for row in grouped_table_rows(g["speed"])]
            geo = g["speed"]["geomean_speedup"]
            lines += ["", f"Geomean speedup over the faster of ATen and Triton: "
                      f"{'-' if geo is None else f'{geo:.3f}'}", ""]
    if report.get("mx") is not None:
        x = report["mx"]
        lines += ["## MX block-scaled GEMM (MXFP8 / MXFP4)", ""]
        if x.get("skipped"):
            lines += [f"Skipped: {x['skipped']}", ""]
        else:
            lines += [f"Numerics: {x['cases']} launches, {x['failed']} failed.", ""]
            lines += [f"- FAIL {r['dtype']} {r['op']} {'x'.join(map(str, r['shape']))} "
                      f"{_config_name(r['config'])}: {r['error']}" for r in x["failures"][:50]]
            if x.get("speed"):
                lines += ["", "| " + " | ".join(MX_COLUMNS) + " |", "|" + "---|" * len(MX_COLUMNS)]
                lines += ["| " + " | ".join(row) + " |" for row in mx_table_rows(x["speed"])]
                geo = x["speed"]["geomean_speedup"]
                lines += ["", "Geomean speedup over ATen: " + ", ".join(
                    f"{fmt} {'-' if v is None else f'{v:.3f}'}" for fmt, v in geo.items()), ""]
    return "\n".join(lines)


def run_mx(arch: str, device: Any, *, quick: bool, numerics: bool, speed: bool, log: Any
           ) -> dict[str, Any]:
    """The MX section of the report (skipped, with the reason, on an arch without scaled
    MFMAs)."""
    from inductor_flydsl.flydsl_backend.mx_eligibility import MX_ARCHS

    if arch not in MX_ARCHS:
        return {"skipped": f"{arch} has no scaled MFMA (MX kernels are gfx950 only)"}
    rows = run_mx_numerics(arch, device, quick=quick, log=log) if numerics else []
    return {"cases": len(rows), "failed": sum(not r["ok"] for r in rows),
            "failures": [r for r in rows if not r["ok"]],
            "speed": run_mx_speed(arch, device, quick=quick, log=log) if speed else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
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
                        help="leave out the fused-epilogue comparison (rocm_epilogues.py)")
    parser.add_argument("--skip-graphs", action="store_true",
                        help="leave out FlyDSL under cudagraph trees and the recorded-vs-"
                             "profiler timing check (rocm_graphs.py)")
    parser.add_argument("--timing", choices=("graph", "eager"), default="graph",
                        help="how the speed sections time each kernel: graph replay (as "
                             "max-autotune's compiled graphs run, the default) or one call "
                             "between events, host dispatch included (as a graph without "
                             "cudagraphs runs)")
    args = parser.parse_args(argv)

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
    global TIMING
    TIMING = args.timing
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
        from rocm_epilogues import run_epilogues

        report["epilogues"] = run_epilogues(pre.arch, device, quick=args.quick, log=log,
                                            bench_ms=bench_ms)
    if not args.skip_graphs:
        from rocm_graphs import run_graphs

        report["graphs"] = run_graphs(pre.arch, device, quick=args.quick, log=log)
    report["seconds"] = round(time.perf_counter() - start, 1)
    if args.out:
        args.out.write_text(markdown_report(report))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        if "numerics" in report:
            n = report["numerics"]
            console.print(f"numerics: {n['cases']} launches, {n['failed']} failed, worst "
                          f"error/tolerance {n['worst']}")
            for r in n["failures"][:20]:
                console.print(f"  FAIL {r['dtype']} {r['layout']} {r['op']} {r['shape']} "
                              f"{_config_name(r['config'])}: {r['error']}")
        if "speed" in report:
            table = Table(title=f"dense BF16 NT on {pre.device_name} ({pre.arch})")
            for column in SPEED_COLUMNS:
                table.add_column(column)
            for row in speed_table_rows(report["speed"]):
                table.add_row(*row)
            console.print(table)
            geo = report["speed"]["geomean_speedup"]
            console.print(f"geomean speedup: {'-' if geo is None else f'{geo:.3f}'}")
        if "grouped" in report:
            g = report["grouped"]
            console.print(f"grouped numerics: {g['cases']} launches, {g['failed']} failed")
            if g["speed"]:
                table = Table(title=f"grouped GEMM (MoE) on {pre.device_name} ({pre.arch})")
                for column in GROUPED_COLUMNS:
                    table.add_column(column)
                for row in grouped_table_rows(g["speed"]):
                    table.add_row(*row)
                console.print(table)
        mx_report = report.get("mx") or {}
        if mx_report.get("skipped"):
            console.print(f"MX GEMM skipped: {mx_report['skipped']}")
        elif mx_report:
            console.print(f"MX numerics: {mx_report['cases']} launches, "
                          f"{mx_report['failed']} failed")
            if mx_report.get("speed"):
                table = Table(title=f"MX GEMM on {pre.device_name} ({pre.arch})")
                for column in MX_COLUMNS:
                    table.add_column(column)
                for row in mx_table_rows(mx_report["speed"]):
                    table.add_row(*row)
                console.print(table)
                console.print(f"geomean speedup over ATen: "
                              f"{mx_report['speed']['geomean_speedup']}")
        if report.get("epilogues"):
            from rocm_epilogues import EPILOGUE_COLUMNS, epilogue_table_rows

            table = Table(title=f"fused epilogues (Llama-3-8B shapes) on {pre.device_name} "
                                f"({pre.arch})")
            for column in EPILOGUE_COLUMNS:
                table.add_column(column)
            for row in epilogue_table_rows(report["epilogues"]):
                table.add_row(*row)
            console.print(table)
            console.print(f"geomean speedup of the fused FlyDSL kernel over Inductor's own: "
                          f"{report['epilogues']['geomean_speedup']}")
    grouped_report = report.get("grouped") or {}
    mx_report = report.get("mx") or {}
    failed = (report.get("epilogues", {}).get("numerics_failures", 0)
              + report.get("numerics", {}).get("failed", 0) + grouped_report.get("failed", 0)
              + (grouped_report.get("speed") or {}).get("numerics_failures", 0)
              + mx_report.get("failed", 0)
              + (mx_report.get("speed") or {}).get("numerics_failures", 0))
    return EXIT_NUMERICS if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
