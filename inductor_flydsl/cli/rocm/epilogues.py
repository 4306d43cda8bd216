"""Section (e) of ``inductor-flydsl validate-rocm``: FlyDSL GEMMs with fused epilogues.

On Llama-3-8B MLP and attention-projection shapes (hidden 4096, FFN 14336, K/V 1024 with
grouped-query attention), for decode and prefill M, each case is timed five ways:

- ``flydsl_fused``: the best DEFAULT dense config with the epilogue fused into its store
  (``templates/gemm_dense.py`` with ``epilogue=``), checked against the float64
  reference of ``epilogue_spec`` first;
- ``flydsl_unfused``: the best plain FlyDSL config, then the epilogue in torch;
- ``aten_unfused``: ``torch.mm`` then the epilogue in torch;
- ``triton_fused``: ``torch.compile`` max-autotune with only Triton templates, which
  fuse the epilogue into the template;
- ``inductor``: ``torch.compile`` max-autotune with ATen and Triton, Inductor's own
  decision (fused template or GEMM plus a separate epilogue kernel).

Speedup is ``inductor / flydsl_fused``: what the plugin's fused candidate would gain over
what Inductor picks without it. Only runs on a ROCm GPU (``validate.preflight``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

HIDDEN, FFN, KV = 4096, 14336, 1024


def _runner() -> Any:
    """The launch runner of Inductor's generated code (same launch path)."""
    from inductor_flydsl.flydsl_backend.run.kernel_runner import runner

    return runner()

# name -> (N, K, epilogue spec (JSON), how the model computes it from y = x @ W.T, extras)
CASES: dict[str, tuple[int, int, dict[str, Any]]] = {
    # SwiGLU: the gate projection with silu(gate) * up (up computed beforehand)
    "mlp_gate_silu_mul": (FFN, HIDDEN, {
        "operands": [{"kind": "tile", "dtype": "bfloat16"}],
        "steps": [["silu", "acc"], ["mul", "s0", "x0"]], "out_dtype": "bfloat16"}),
    # the down projection with the residual add
    "mlp_down_residual": (HIDDEN, FFN, {
        "operands": [{"kind": "tile", "dtype": "bfloat16"}],
        "steps": [["add", "acc", "x0"]], "out_dtype": "bfloat16"}),
    # the output projection with the residual add
    "attn_o_residual": (HIDDEN, HIDDEN, {
        "operands": [{"kind": "tile", "dtype": "bfloat16"}],
        "steps": [["add", "acc", "x0"]], "out_dtype": "bfloat16"}),
    # a K/V projection with a bias and a per-channel scale (quantization-style)
    "attn_kv_bias_scale": (KV, HIDDEN, {
        "operands": [{"kind": "col", "dtype": "bfloat16"}, {"kind": "col", "dtype": "float32"}],
        "steps": [["add", "acc", "x0"], ["mul", "s0", "x1"]], "out_dtype": "bfloat16"}),
    # an MLP with GELU (tanh) and a bias, as in GPT-style blocks
    "mlp_up_bias_gelu": (FFN, HIDDEN, {
        "operands": [{"kind": "col", "dtype": "bfloat16"}],
        "steps": [["add", "acc", "x0"], ["gelu_tanh", "s0"]], "out_dtype": "bfloat16"}),
}
M_VALUES = (16, 128, 2048)
M_QUICK = (16, 2048)


def _extras(spec: Any, m: int, n: int, device: Any) -> list[Any]:
    import torch

    made = []
    for operand in spec.operands:
        shape = (m, n) if operand.kind == "tile" else (n,) if operand.kind == "col" else (m,)
        made.append(torch.randn(shape, device=device, dtype=getattr(torch, operand.dtype)))
    return made


def _torch_epilogue(spec: Any) -> Callable[..., Any]:
    from inductor_flydsl.problems.epilogue_spec import reference

    def apply(y: Any, extras: list[Any]) -> Any:
        return reference(spec, y, extras)

    return apply


def _compiled(spec: Any, backends: str) -> Callable[..., Any]:
    import torch

    apply = _torch_epilogue(spec)

    def fn(a: Any, b: Any, *extras: Any) -> Any:
        return apply(torch.mm(a, b), list(extras))

    return torch.compile(fn, dynamic=False,
                         options={"max_autotune": True, "triton.cudagraphs": False,
                                  "max_autotune_gemm_backends": backends})


def epilogue_case(name: str, m: int, arch: str, device: Any,
                  bench_ms: Callable[..., float]) -> dict[str, Any]:
    import torch

    from inductor_flydsl.flydsl_backend.offer import configs
    from inductor_flydsl.inductor.adapter import internals
    from inductor_flydsl.numerics.tolerances import check_close
    from inductor_flydsl.problems.epilogue_spec import EpilogueSpec, reference
    from inductor_flydsl.template_loader import load_template

    gemm = load_template("gemm_dense")
    n, k, spec_json = CASES[name]
    spec = EpilogueSpec.from_json(spec_json)
    text = spec.text()
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=torch.bfloat16).t()  # x @ W.T
    extras = _extras(spec, m, n, device)
    apply = _torch_epilogue(spec)
    row: dict[str, Any] = {"case": name, "shape": [m, n, k], "epilogue": spec.summary()}
    row["aten_unfused_ms"] = bench_ms(lambda: apply(torch.mm(a, b), extras))
    for key, backends in (("triton_fused_ms", "TRITON"), ("inductor_ms", "ATEN,TRITON")):
        try:
            internals.dynamo_reset()
            fn = _compiled(spec, backends)
            fn(a, b, *extras)
            row[key] = bench_ms(lambda f=fn: f(a, b, *extras))
        except Exception as exc:  # no Triton config for the shape, compile error, ...
            row[key], row[f"{key}_error"] = None, f"{type(exc).__name__}: {exc}"[:300]
    out = torch.empty(m, n, device=device, dtype=getattr(torch, spec.out_dtype))
    plain = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    fused, unfused = {}, {}
    for config in configs.default_configs(arch, "bf16"):
        if k % config.tile_k or k < config.tile_k:
            continue
        try:
            if gemm.epilogue_reason(config, op="mm", epilogue=text) is None:
                gemm.launch(a, b, None, out, 1.0, 0.0, config, epilogue=text,
                            extras=tuple(extras), runner=_runner())
                fused[config] = bench_ms(lambda c=config: gemm.launch(
                    a, b, None, out, 1.0, 0.0, c, epilogue=text, extras=tuple(extras),
                        runner=_runner()))
            def separate(c: Any = config) -> Any:
                gemm.launch(a, b, None, plain, 1.0, 0.0, c, runner=_runner())
                return apply(plain, extras)

            separate()
            unfused[config] = bench_ms(separate)
        except Exception as exc:
            row.setdefault("flydsl_errors", []).append(f"{config}: {exc}"[:200])
    if fused:
        best = min(fused, key=fused.__getitem__)
        gemm.launch(a, b, None, out, 1.0, 0.0, best, epilogue=text, extras=tuple(extras),
            runner=_runner())
        expected = reference(spec, torch.mm(a.double(), b.double()), extras).double()
        report = check_close(out, expected, "bf16" if spec.out_dtype == "bfloat16" else
                             "fp16" if spec.out_dtype == "float16" else "fp32", k,
                             scale=max(float(expected.abs().mean()), 1e-30))
        row.update(flydsl_fused_ms=fused[best], flydsl_fused_config=best.to_json(),
                   numerics_ok=report.ok, worst=report.worst)
    else:
        row.update(flydsl_fused_ms=None, numerics_ok=None)
    row["flydsl_unfused_ms"] = min(unfused.values()) if unfused else None
    baseline = row.get("inductor_ms") or row["aten_unfused_ms"]
    row["speedup"] = baseline / row["flydsl_fused_ms"] if row["flydsl_fused_ms"] else None
    row["fusion_gain"] = (row["flydsl_unfused_ms"] / row["flydsl_fused_ms"]
                          if row["flydsl_fused_ms"] and row["flydsl_unfused_ms"] else None)
    return row


def run_epilogues(arch: str, device: Any, *, quick: bool, log: Callable[[str], None],
                  bench_ms: Callable[..., float]) -> dict[str, Any]:
    rows = []
    plan = [(name, m) for name in CASES for m in (M_QUICK if quick else M_VALUES)]
    for i, (name, m) in enumerate(plan, 1):
        rows.append(epilogue_case(name, m, arch, device, bench_ms))
        log(f"epilogues {i}/{len(plan)}: {name} M={m} speedup "
            f"{rows[-1]['speedup'] or float('nan'):.3f}")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None
    return {"rows": rows, "geomean_speedup": geomean,
            "numerics_failures": sum(r.get("numerics_ok") is False for r in rows)}


EPILOGUE_COLUMNS = ("case", "M", "N", "K", "FlyDSL fused ms", "FlyDSL + torch ms",
                    "ATen + torch ms", "Triton fused ms", "Inductor ms", "speedup", "numerics")


def epilogue_table_rows(report: dict[str, Any]) -> list[list[str]]:
    def ms(value: Any) -> str:
        return "-" if value is None else f"{value:.4f}"

    return [[r["case"], *(str(x) for x in r["shape"]), ms(r["flydsl_fused_ms"]),
             ms(r["flydsl_unfused_ms"]), ms(r["aten_unfused_ms"]), ms(r.get("triton_fused_ms")),
             ms(r.get("inductor_ms")), "-" if r["speedup"] is None else f"{r['speedup']:.3f}",
             {True: "ok", False: "FAIL", None: "-"}[r["numerics_ok"]]] for r in report["rows"]]
