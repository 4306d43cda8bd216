"""Section (c) of ``inductor-flydsl validate-rocm``: the grouped (mixture-of-experts)
GEMM's numerics on ragged groups and its speed on the MoE presets' shapes."""

from __future__ import annotations

import math
import statistics
from typing import Any

from .dense import _runner, bench_ms


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
    from inductor_flydsl.flydsl_backend.builds import catalog

    jobs = catalog.build_jobs([arch], "DEFAULT", full=not quick, template="gemm_grouped")
    tpl = catalog.load_template("gemm_grouped")
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

    from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_GROUPED, fits
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
    from inductor_flydsl.inductor.adapter import internals

    rows = []
    shapes = grouped_speed_shapes(quick)
    for i, shape in enumerate(shapes, 1):
        for routing_name in ("inductor", "zipf"):
            internals.dynamo_reset()
            rows.append(grouped_speed_case(shape, routing_name, arch, device))
        log(f"grouped speed {i}/{len(shapes)}: {shape[0]} speedup "
            f"{rows[-1]['speedup'] or float('nan'):.3f}")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None
    return {"rows": rows, "geomean_speedup": geomean,
            "numerics_failures": sum(r.get("flydsl_numerics_ok") is False for r in rows)}


