"""Section (d) of ``inductor-flydsl validate-rocm``: the MX block-scaled GEMM (MXFP8 /
MXFP4, gfx950 only): numerics of every MX DEFAULT config and pairing, and speed against
ATen's ``torch._scaled_mm``."""

from __future__ import annotations

import math
from typing import Any

from .dense import _runner, bench_ms


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
    from inductor_flydsl.flydsl_backend.builds import catalog
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
    from inductor_flydsl.flydsl_backend.offer.mx_eligibility import (
        alias_variant,
        parse_mx_dtype,
        synthetic_mx_problem,
    )
    from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs
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




def run_mx(arch: str, device: Any, *, quick: bool, numerics: bool, speed: bool, log: Any
           ) -> dict[str, Any]:
    """The MX section of the report (skipped, with the reason, on an arch without scaled
    MFMAs)."""
    from inductor_flydsl.flydsl_backend.offer.mx_eligibility import MX_ARCHS

    if arch not in MX_ARCHS:
        return {"skipped": f"{arch} has no scaled MFMA (MX kernels are gfx950 only)"}
    rows = run_mx_numerics(arch, device, quick=quick, log=log) if numerics else []
    return {"cases": len(rows), "failed": sum(not r["ok"] for r in rows),
            "failures": [r for r in rows if not r["ok"]],
            "speed": run_mx_speed(arch, device, quick=quick, log=log) if speed else None}


