"""The dense GEMM template (``templates/gemm_dense.py``): ``mm``, ``addmm`` and ``bmm`` in
bf16/fp16, every layout, split-K, and (``gemm_epilogue``) a fused epilogue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...problems.problem import Problem
from ...template_loader import load_template
from ..offer import configs as configs_mod
from ..offer.eligibility import TORCH_TO_TEMPLATE_DTYPE, dense_problem_reasons
from ..offer.resources import estimate
from .registry import CHOICE, TemplateSpec

if TYPE_CHECKING:
    from ..builds.cross_compile import CompileResult

NAME = "gemm_dense"
OPS = ("mm", "addmm", "bmm")
_tpl = load_template(NAME)
# A DEFAULT-list config that fits gfx950 and gfx942 (LDS 55 KiB) with the double-buffered
# main loop: compiled once for every non-main variant.
REPRESENTATIVE = _tpl.GemmConfig(tile_m=64, tile_n=128, tile_k=64, waves_m=2, waves_n=2,
                                 stages=2, group_m=8)


def template_dtype(problem: Problem) -> str:
    return TORCH_TO_TEMPLATE_DTYPE.get(problem.dtype, "bf16")


def model_layout(problem: Problem) -> str:
    """The catalog layout of a problem's kernels (a grouped problem's ``n-t`` style
    layouts, and other mixed ones, are described by ``nt``)."""
    return problem.layout if "-" not in problem.layout else "nt"


def pruned_configs(problem: Problem, arch: str, search_space: str, limit: int) -> list[Any]:
    """The eligible configs of the search space, at most ``limit``, in the pruned order
    (``configs.prune_for_shape``)."""
    dtype = TORCH_TO_TEMPLATE_DTYPE[problem.dtype]
    exhaustive = search_space.upper() == "EXHAUSTIVE"
    space = configs_mod.exhaustive(arch, dtype) if exhaustive else \
        configs_mod.default_configs(arch, dtype)
    if problem.dynamic:  # no split-K: its workspace grows with an M no check bounds
        space = [c for c in space if c.split_k == 1]
    m, n, k = problem.mnk
    return configs_mod.prune_for_shape(space, m, n, k, op=problem.op,
                                       limit=max(limit, 64) if exhaustive else limit)


def search_space(name: str) -> list[Any]:
    if name == "DEFAULT":
        return list(configs_mod.DEFAULT)
    return configs_mod.valid_configs()  # EXHAUSTIVE


def resource_reasons(config: Any, dtype: str, arch: str) -> list[str]:
    _, _, fits, reasons = estimate(config, dtype, arch)
    return [] if fits else list(reasons)


def emulate(result: CompileResult, seed: int = 0) -> dict[str, Any]:
    """The dense kernel on its variant's tail problem (a full tile and the M and N
    tails) against torch in float64."""
    from pathlib import Path

    from ...emulator.gemm import emulate_gemm, tail_shape

    template = load_template(result.template)
    config = template.GemmConfig.from_json(dict(result.config))
    m, n, k = tail_shape(config, result.op, result.layout)
    assert result.isa_path is not None
    return emulate_gemm(Path(result.isa_path).read_text(), template, config, op=result.op,
                        dtype=result.dtype, layout=result.layout, m=m, n=n, k=k, seed=seed,
                        epilogue=result.epilogue).to_json()


def launch_variant(op: str, problem: Problem, epilogue: str) -> tuple[str, str, str]:
    if epilogue:  # the mm variant with the epilogue fused
        return TORCH_TO_TEMPLATE_DTYPE[problem.dtype], problem.layout, "mm"
    return TORCH_TO_TEMPLATE_DTYPE[problem.dtype], problem.layout, op


SPEC = TemplateSpec(
    name=NAME, serves_as=CHOICE, selections=OPS,
    custom_ops=(*OPS, "gemm_epilogue"), main_variant=("bf16", "nt", "mm"),
    serves=lambda problem: problem.op in OPS,
    reasons=dense_problem_reasons,
    configs=pruned_configs,
    model_variant=lambda problem: (problem.op, template_dtype(problem), model_layout(problem)),
    launch_variant=launch_variant,
    kernel_op=lambda problem, inputs: problem.op,
    search_space=search_space,
    representative=lambda: REPRESENTATIVE,
    emulate=emulate,
    resource_reasons=resource_reasons,
    sweep_ops=("mm", "addmm", "bmm", "linear"),
)
