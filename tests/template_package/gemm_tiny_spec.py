"""The spec of the test-only template ``gemm_tiny``: bf16 ``mm`` only, one config."""

from __future__ import annotations

from typing import Any

from inductor_flydsl.flydsl_backend.offer.configs import fits
from inductor_flydsl.flydsl_backend.offer.eligibility import dense_problem_reasons
from inductor_flydsl.flydsl_backend.specs import gemm_dense
from inductor_flydsl.flydsl_backend.specs.registry import CHOICE, TemplateSpec
from inductor_flydsl.problems.problem import Problem
from inductor_flydsl.template_loader import load_template

NAME = "gemm_tiny"
ONLY = load_template(NAME).GemmConfig(tile_m=32, tile_n=64, tile_k=64, waves_m=1, waves_n=2,
                                      stages=2, group_m=1)


def _reasons(problem: Problem, *, offsets: tuple[int, ...] = (),
             arch: str | None = None) -> list[str]:
    reasons = dense_problem_reasons(problem, offsets=offsets, arch=arch)
    if problem.dtype != "bfloat16":
        reasons.append(f"{NAME} takes bfloat16 only, not {problem.dtype}")
    return reasons


def _configs(problem: Problem, arch: str, search_space: str, limit: int) -> list[Any]:
    return [ONLY] if fits(ONLY, arch, "bf16") else []


SPEC = TemplateSpec(
    name=NAME, serves_as=CHOICE, selections=("mm",), custom_ops=("mm",),
    main_variant=("bf16", "nt", "mm"),
    serves=lambda problem: problem.op == "mm" and problem.dtype == "bfloat16",
    reasons=_reasons,
    configs=_configs,
    model_variant=lambda problem: ("mm", "bf16", gemm_dense.model_layout(problem)),
    launch_variant=gemm_dense.launch_variant,
    kernel_op=lambda problem, inputs: "mm",
    search_space=lambda name: [ONLY],
    representative=lambda: ONLY,
    emulate=gemm_dense.emulate,
    resource_reasons=gemm_dense.resource_reasons,
    sweep_ops=("mm", "linear"),
)
