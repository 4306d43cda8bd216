"""The MX template (``templates/gemm_mx.py``): block-scaled FP8/FP6/FP4 ``scaled_mm``
with E8M0 scales per 32 K elements (B's per row, ``nt``, or per 32x32 block,
``nt_b32``), bf16/fp16 out, gfx950 only (scaled MFMAs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...template_loader import load_template
from ..offer import configs as configs_mod
from ..offer.mx_eligibility import (
    MX_OP,
    mx_candidate_configs,
    mx_layout,
    mx_problem_reasons,
    variant_dtype,
)
from .registry import CHOICE, TemplateSpec

if TYPE_CHECKING:
    from ..builds.cross_compile import CompileResult

NAME = "gemm_mx"
BIAS_OP = "scaled_mm_bias"  # its own custom op: the bias is a positional input
_tpl = load_template(NAME)
# compiled once for every non-main variant
REPRESENTATIVE = _tpl.MxConfig(tile_m=64, tile_n=128, tile_k=256, waves_m=1, waves_n=2,
                               stages=2)


def emulate(result: CompileResult, seed: int = 0) -> dict[str, Any]:
    """The MX kernel against its float64 dequantize-then-matmul reference."""
    from pathlib import Path

    from ...emulator.mx import emulate_mx, mx_tail_shape

    template = load_template(result.template)
    config = template.GemmConfig.from_json(dict(result.config))
    m, n, k = mx_tail_shape(config)
    assert result.isa_path is not None
    return emulate_mx(Path(result.isa_path).read_text(), template, config,
                      dtype=result.dtype, op=result.op, m=m, n=n, k=k, seed=seed,
                      layout=result.layout).to_json()


def resource_reasons(config: Any, dtype: str, arch: str) -> list[str]:
    reason = _tpl.resource_reason(config, dtype, arch)
    return [reason] if reason else []


SPEC = TemplateSpec(
    name=NAME, serves_as=CHOICE, selections=(MX_OP,), custom_ops=(MX_OP, BIAS_OP),
    main_variant=("e4m3xe4m3_bf16", "nt", "mm"),
    serves=lambda problem: problem.op == MX_OP,
    reasons=mx_problem_reasons,
    configs=lambda problem, arch, search_space, limit: mx_candidate_configs(
        problem, arch, limit=limit),
    model_variant=lambda problem: ("mm", variant_dtype(problem), mx_layout(problem)),
    launch_variant=lambda op, problem, epilogue: (
        variant_dtype(problem), mx_layout(problem), "addmm" if op == BIAS_OP else "mm"),
    kernel_op=lambda problem, inputs: BIAS_OP if inputs == 5 else MX_OP,
    search_space=lambda name: list(configs_mod.DEFAULT_MX),  # no wider MX space yet
    representative=lambda: REPRESENTATIVE,
    emulate=emulate,
    resource_reasons=resource_reasons,
    sweep_ops=(MX_OP,),
    # gfx942 is listed by compile-check and rejected with the reason (no scaled MFMAs)
    listed_archs=tuple(load_template("gemm_dense").ARCHS),
    # only the configs of the format pairing's DEFAULT list; every bf16 mm pairing (of
    # every layout) is a main variant
    variant_configs=lambda space, dtype: [c for c in space
                                          if c in configs_mod.mx_default_configs(dtype)],
    is_main_variant=lambda dtype, layout, op: dtype.endswith("_bf16") and op == "mm",
)
