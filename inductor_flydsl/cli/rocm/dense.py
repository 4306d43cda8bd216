"""Sections (a) and (b) of ``inductor-flydsl validate-rocm``: numerics of every DEFAULT
dense config against a float64 torch reference, and speed on the dense BF16 NT suite
against ATen and Triton, each kernel timed the way Inductor times a choice."""

from __future__ import annotations

import math
import statistics
from typing import Any


def _runner() -> Any:
    """The launch runner Inductor's generated code uses (kernels built by the build
    workers, launched through FlyDSL compiled functions): timings here are of the same
    launch path."""
    from inductor_flydsl.flydsl_backend.run.kernel_runner import runner

    return runner()


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
    from inductor_flydsl.flydsl_backend.builds import catalog

    jobs = catalog.build_jobs([arch], "DEFAULT", full=not quick)
    tpl = catalog.load_template(catalog.TEMPLATE)
    return [(tpl.GemmConfig(**j.config_json), j.dtype, j.layout, j.op)
            for j in jobs if j.rejected is None]


def run_numerics(arch: str, device: Any, *, quick: bool, log: Any) -> list[dict[str, Any]]:
    from inductor_flydsl.flydsl_backend.offer.suites import NUMERICS_BATCH, NUMERICS_SHAPES

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
    from inductor_flydsl.inductor.adapter import internals

    benchmarker = internals.benchmarker
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

    from inductor_flydsl.flydsl_backend.offer import configs
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
    from inductor_flydsl.flydsl_backend.offer.suites import DENSE_BF16_NT_QUICK, DENSE_BF16_NT_SUITE
    from inductor_flydsl.inductor.adapter import internals

    shapes = DENSE_BF16_NT_QUICK if quick else DENSE_BF16_NT_SUITE
    rows = []
    for i, shape in enumerate(shapes, 1):
        internals.dynamo_reset()  # a fresh static-shape compile per shape, no recompile limit
        rows.append(speed_case(shape, arch, device, _triton_mm()))
        log(f"speed {i}/{len(shapes)}: {'x'.join(map(str, shape))} speedup "
            f"{rows[-1]['speedup'] or float('nan'):.3f}")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None
    return {"rows": rows, "geomean_speedup": geomean,
            "wins": sum(s > 1.02 for s in speedups), "ties": sum(0.98 <= s <= 1.02
                                                                 for s in speedups),
            "losses": sum(s < 0.98 for s in speedups)}


