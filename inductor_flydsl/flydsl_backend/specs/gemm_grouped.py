"""The grouped GEMM template (``templates/gemm_grouped.py``): ``torch._grouped_mm`` of
2-D ragged activations over 3-D weights with int32 group offsets, bf16/fp16. (A 3-D x
3-D ``grouped_mm`` without offsets is a ``bmm``: the provider hands it to the dense
template.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...problems.problem import Problem
from ...template_loader import load_template
from ..offer import configs as configs_mod
from ..offer.eligibility import GROUPED_OP, TORCH_TO_TEMPLATE_DTYPE, grouped_problem_reasons
from .gemm_dense import REPRESENTATIVE, model_layout, resource_reasons, template_dtype
from .registry import CHOICE, TemplateSpec

if TYPE_CHECKING:
    from ..builds.cross_compile import CompileResult

NAME = "gemm_grouped"


def pruned_configs(problem: Problem, arch: str, search_space: str, limit: int) -> list[Any]:
    """The grouped DEFAULT configs that fit ``arch``, pruned for the average group's rows
    (T / G: Inductor benchmarks near-uniform groups) as a dense problem of that M,
    whatever the search space."""
    dtype = TORCH_TO_TEMPLATE_DTYPE[problem.dtype]
    space = [c for c in configs_mod.DEFAULT_GROUPED if configs_mod.fits(c, arch, dtype)]
    t, n, k = problem.mnk
    rows = max(1, -(-t // max(problem.groups, 1)))
    return configs_mod.prune_for_shape(space, rows, n, k, op="bmm", limit=limit)


def search_space(name: str) -> list[Any]:
    if name == "DEFAULT":
        return list(configs_mod.DEFAULT_GROUPED)
    return [c for c in configs_mod.valid_configs() if c.split_k == 1]  # EXHAUSTIVE


def emulate(result: CompileResult, seed: int = 0) -> dict[str, Any]:
    """The grouped kernel on every ragged scenario (``emulator.grouped``)."""
    from pathlib import Path

    from ...emulator.grouped import emulate_grouped_scenarios

    template = load_template(result.template)
    config = template.GemmConfig.from_json(dict(result.config))
    assert result.isa_path is not None
    return emulate_grouped_scenarios(Path(result.isa_path).read_text(), template, config,
                                     dtype=result.dtype, layout=result.layout, seed=seed)


SPEC = TemplateSpec(
    name=NAME, serves_as=CHOICE, selections=(GROUPED_OP,), custom_ops=(GROUPED_OP,),
    main_variant=("bf16", "nt", GROUPED_OP),
    serves=lambda problem: problem.op == GROUPED_OP,
    reasons=lambda problem, *, offsets=(), arch=None: grouped_problem_reasons(
        problem, offsets=offsets),
    configs=pruned_configs,
    model_variant=lambda problem: (GROUPED_OP, template_dtype(problem),
                                   model_layout(problem)),
    launch_variant=lambda op, problem, epilogue: (TORCH_TO_TEMPLATE_DTYPE[problem.dtype],
                                                  problem.layout, op),
    kernel_op=lambda problem, inputs: GROUPED_OP,
    search_space=search_space,
    representative=lambda: REPRESENTATIVE,
    emulate=emulate,
    resource_reasons=resource_reasons,
    sweep_ops=(GROUPED_OP,),
)
