"""Adds FlyDSL candidates to an Inductor GEMM autotuning, when it may.

FlyDSL choices are offered only when ``FLYDSL`` is among
``max_autotune_gemm_backends`` (``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS=ATEN,TRITON,FLYDSL``,
the token upstream uses), the runtime and the problem pass the eligibility checks, and
Inductor benchmarks in-process (where candidates are validated). Otherwise nothing is
added, ATen and Triton are untouched, and a debug log line says why.
"""

from __future__ import annotations

import dataclasses
import logging
import types
from collections.abc import Sequence
from typing import Any

from ...inductor.adapter import internals
from ...inductor.autotune import compile_end
from ...inductor.autotune.gemm_backends import flydsl_requested
from ...inductor.autotune.ir_problem import problem_from_ir
from ..offer.eligibility import (
    problem_reasons,
    runtime_reasons,
)
from ..offer.offering import configs_per_problem, model_timing, offered_configs
from ..specs import registry
from ..specs.registry import TemplateSpec

log = logging.getLogger("inductor_flydsl")


def backend_requested() -> bool:
    """``FLYDSL`` is among Inductor's GEMM backends (``inductor/autotune/gemm_backends.py``)."""
    return flydsl_requested()


def inductor_config_reasons() -> list[str]:
    config = internals.config
    reasons = []
    if config.cpp_wrapper or config.aot_inductor.output_path or getattr(
            config, "aot_mode", False):
        reasons.append("C++ wrapper / AOTInductor codegen is not supported")
    elif internals.V.aot_compilation:  # an AOT compile through another wrapper (fx_wrapper)
        reasons.append("ahead-of-time compilation is not supported (the kernels are loaded "
                       "by this package's Python runtime)")
    if config.autotune_in_subproc:
        reasons.append("autotune_in_subproc is on (candidates are validated in-process)")
    if getattr(config, "pipeline_max_autotune_gemm", False):
        reasons.append("pipelined GEMM autotuning benchmarks in a subprocess, where "
                       "candidates cannot be validated")
    return reasons


def _offsets(input_nodes: Sequence[Any]) -> tuple[int, ...]:
    """Storage offsets in elements; 1 (misaligned) where Inductor knows or suspects the
    buffer is not aligned (e.g. a graph input whose example tensor was misaligned)."""
    offsets = []
    for node in input_nodes:
        try:
            offsets.append(1 if internals.is_unaligned(node) else int(node.get_layout().offset))
        except (TypeError, ValueError, AttributeError, NotImplementedError):
            offsets.append(1)  # symbolic or unknown offset: treated as misaligned
    return tuple(offsets)


def runtime_target(device: Any) -> tuple[str | None, list[str]]:
    """(arch, reasons): the gfx arch FlyDSL kernels would be compiled for on ``device``,
    or the reasons they cannot run there."""
    reasons = runtime_reasons(device)
    if reasons:
        return None, reasons
    from ...provenance.device import rocm_arch

    return rocm_arch(device), []


def start_build_server() -> None:
    """A selection offers FlyDSL candidates: start the build server and its workers now
    (once they run: any worker that exited idle), so they are warm when the candidates'
    builds come. Not at ``enable()``: that runs at ``import torch`` in every
    process (Inductor's compile workers, DataLoader workers, vLLM's), which must start no
    process and ask no device."""
    try:
        from ..builds.prebuild import prewarm

        prewarm()
    except Exception as exc:  # never fail the compile: builds start the server themselves
        log.debug("inductor_flydsl: no build prewarm: %s", exc)


def fuses_epilogues(device: Any) -> bool:
    """Whether FlyDSL candidates with a fused epilogue may be offered on ``device``: the
    epilogue-fusion graph pass asks before it turns a GEMM and its epilogue into one
    selection (``inductor/fusion/epilogue_fusion.py``)."""
    if not backend_requested() or inductor_config_reasons():
        return False
    arch, reasons = runtime_target(device)
    return arch is not None and not reasons


def selection_timing() -> str | None:
    """How the selection being offered times its choices (decided before the providers
    are asked: ``inductor/timing/timing_parity.selection_timing``); None outside a selection."""
    from ...inductor.autotune.selection import current_selection

    ctx = current_selection.get()
    return None if ctx is None else ctx.timing


def flydsl_choices(name: str, input_nodes: Sequence[Any], layout: Any,
                   choices: Sequence[Any]) -> list[Any]:
    if name == EPILOGUE_SELECTION:
        return fused_epilogue_choices(input_nodes, layout)
    if not backend_requested() or name not in registry.selections():
        return []
    arch, reasons = runtime_target(layout.device)
    reasons += inductor_config_reasons()
    problem = problem_from_ir(name, input_nodes, layout, choices)
    if name == "grouped_mm" and len(input_nodes) == 2:
        # 3-D x 3-D without offsets: every group has the same M, which is a bmm; the
        # dense template serves it (the key stays grouped_mm's)
        problem = dataclasses.replace(problem, op="bmm")
    if name == "addmm" and not problem.epilogue:
        reasons.append("no ATen choice to take alpha/beta from (ATen backend off)")
    specs = registry.serving(problem)
    if not reasons and not specs:
        reasons = problem_reasons(problem)
    if reasons:
        log.debug("inductor_flydsl: no FlyDSL choices for %s: %s", problem.summary(),
                  "; ".join(reasons))
        return []
    made = [caller for spec in specs
            for caller in _template_choices(spec, problem, input_nodes, layout, str(arch))]
    if made:
        start_build_server()
    return made


def _template_choices(spec: TemplateSpec, problem: Any, input_nodes: Sequence[Any],
                      layout: Any, arch: str) -> list[Any]:
    """The choices one template (``spec``) offers an eligible problem: its offered
    configs (``offering.offer``), each a FlyDSL caller of the custom op it launches."""
    reasons = spec.reasons(problem, offsets=_offsets(input_nodes), arch=arch)
    if reasons:
        log.debug("inductor_flydsl: no FlyDSL choices for %s: %s", problem.summary(),
                  "; ".join(reasons))
        return []
    from .choices import FlydslChoiceCaller, kernel_choice

    kernel_op = spec.kernel_op(problem, len(input_nodes))
    configs, preselected = offered_configs(
        problem, arch, search_space=str(internals.config.max_autotune_gemm_search_space),
        limit=configs_per_problem(), timing=model_timing(selection_timing()), spec=spec)
    epilogue = dict(problem.epilogue)
    made = [FlydslChoiceCaller(kernel_choice(kernel_op), input_nodes, layout, c,
                               template=spec.name, alpha=float(epilogue.get("alpha", 1.0)),
                               beta=float(epilogue.get("beta", 1.0)),
                               dynamic_m=problem.dynamic) for c in configs]
    _describe_variants(made, spec, kernel_op, problem)
    # Built in parallel only once the tuning DB has narrowed the choices (an exact winner,
    # a prior's short list): the hooks call this with the candidates Inductor will run.
    _hand_out(made, configs, preselected, arch, spec, kernel_op, problem)
    log.debug("inductor_flydsl: %d FlyDSL %s choices for %s (%s preselected by the model)",
              len(made), spec.name, problem.summary(), preselected or "none")
    return made


def _hand_out(made: Sequence[Any], configs: Sequence[Any], preselected: int, arch: str,
              spec: TemplateSpec, op: str, problem: Any, epilogue: str = "") -> None:
    """Give each candidate its build starter (``prepare``: the parallel builds of the
    candidates Inductor will run) and whether the model preselected it."""
    by_id = {caller.config_id: config for caller, config in zip(made, configs, strict=True)}

    def prepare(selected: Sequence[Any]) -> None:
        _start_builds(selected, [by_id[c.config_id] for c in selected], arch, spec, op,
                      problem, epilogue)

    for index, caller in enumerate(made):
        caller.inductor_flydsl.prepare = prepare
        caller.inductor_flydsl.preselected = index < preselected if preselected else None


def _describe_variants(made: Sequence[Any], spec: TemplateSpec, op: str, problem: Any,
                       epilogue: str = "") -> None:
    """Each candidate's config text names its variant, so a graph loaded from the FX-graph
    cache can have its variants built before its first call (loaded_variants.py)."""
    try:
        dtype, layout, variant_op = spec.launch_variant(op, problem, epilogue)
    except (KeyError, ValueError) as exc:  # built at the first launch instead
        log.debug("inductor_flydsl: variant of %s not described: %s", op, exc)
        return
    for caller in made:
        caller.describe_variant(spec.name, dtype, layout, variant_op)


def _start_builds(made: Sequence[Any], configs: Sequence[Any], arch: str, spec: TemplateSpec,
                  op: str, problem: Any, epilogue: str = "") -> None:
    """Start the candidates' parallel builds (prebuild.py) and hand each its own."""
    from ..builds.prebuild import start_builds

    try:
        dtype, layout, variant_op = spec.launch_variant(op, problem, epilogue)
        builds = start_builds(spec.name, configs, arch=arch, dtype=dtype, layout=layout,
                              op=variant_op, epilogue=epilogue)
    except Exception as exc:  # never fail the compile: candidates build on first launch
        log.warning("inductor_flydsl: could not start parallel builds: %s", exc)
        return
    for caller in made:
        caller.inductor_flydsl.build = builds.get(caller.config_id)


def build_loaded_variants(args: Any) -> None:
    """A compile-end callback (``inductor/autotune/compile_end.py``): the FlyDSL variants of the
    graphs loaded since the last call (from the FX-graph cache too) are built as one
    batch now, before their first call, for the arch of the current GPU; nothing where
    FlyDSL cannot launch."""
    import torch

    from ..run.kernel_runner import runner
    from ..run.loaded_variants import WATCH

    runtime = runner().runtime
    index = torch.cuda.current_device() if torch.cuda.is_available() else None
    device = torch.device("cuda", index) if index is not None else torch.device("cpu")
    if runtime.reasons(device):
        return
    arch = runtime.arch(types.SimpleNamespace(device=device))
    WATCH.start_builds(internals.PyCodeCache.modules, arch)


class FlydslChoiceProvider:
    """The FlyDSL backend as the hooks see it
    (``inductor.autotune.choice_provider.ChoiceProvider``)."""

    def __init__(self) -> None:
        compile_end.register(build_loaded_variants)

    def __call__(self, name: str, input_nodes: Sequence[Any], layout: Any,
                 choices: Sequence[Any]) -> list[Any]:
        return flydsl_choices(name, input_nodes, layout, choices)

    def fuses_epilogues(self, device: Any) -> bool:
        return fuses_epilogues(device)

    def captures_graphs(self, device: Any) -> bool:
        from ..run.kernel_runner import runner

        return runner().runtime.captures_graphs(device)


EPILOGUE_SELECTION = "gemm_epilogue"  # inductor/autotune/selection.py: EPILOGUE_SELECTION


def _operand_reasons(input_nodes: Sequence[Any], spec: Any) -> list[str]:
    """A fused kernel reads a col or tile operand 4 elements at a time and a row operand
    one at a time: their storage offset (and a tile's row stride) must keep the 4-element
    loads aligned."""
    reasons = []
    offsets = _offsets(input_nodes[2:2 + len(spec.operands)])
    for i, (operand, node, offset) in enumerate(zip(spec.operands, input_nodes[2:],
                                                    offsets, strict=False)):
        if operand.kind in ("col", "tile") and offset % 4:
            reasons.append(f"operand x{i} ({operand.kind}) is not 4-element aligned")
        if operand.kind == "tile":
            try:
                row_stride = int(node.get_stride()[-2])
            except (TypeError, ValueError, IndexError):
                row_stride = 1
            if row_stride % 4:
                reasons.append(f"operand x{i} (tile) has a row stride of {row_stride}, "
                               "not a multiple of 4")
    return reasons


def fused_epilogue_choices(input_nodes: Sequence[Any], layout: Any) -> list[Any]:
    """FlyDSL candidates computing the active ``gemm_epilogue`` selection's GEMM with its
    epilogue fused (dense template, ``mm`` variant with the epilogue)."""
    from ...inductor.autotune.selection import active_epilogue
    from ...template_loader import load_template
    from .choices import FlydslChoiceCaller, kernel_choice

    config = internals.config

    current = active_epilogue()
    if current is None or not backend_requested():
        return []
    spec_text = current.spec.text()
    arch, reasons = runtime_target(layout.device)
    reasons += inductor_config_reasons()
    a, b = input_nodes[0], input_nodes[1]
    gemm_layout = internals.FixedLayout(layout.device, a.get_dtype(), list(layout.size))
    problem = problem_from_ir("mm", [a, b], gemm_layout, [])
    choices_op = EPILOGUE_SELECTION
    spec = registry.for_custom_op(choices_op)[0]  # the template that fuses epilogues
    if not reasons:
        reasons = spec.reasons(problem, offsets=_offsets([a, b]), arch=arch)
        reasons += _operand_reasons(input_nodes, current.spec)
    template = load_template(spec.name)
    configs, preselected = ([], 0) if reasons else offered_configs(
        problem, str(arch), search_space=str(config.max_autotune_gemm_search_space),
        limit=configs_per_problem(), epilogue=current.spec,
        accept=lambda c: template.epilogue_reason(c, op="mm", epilogue=spec_text) is None,
        timing=model_timing(selection_timing()), spec=spec)
    if not configs:
        log.debug("inductor_flydsl: no fused FlyDSL choices for %s with %s: %s",
                  problem.summary(), current.spec.summary(),
                  "; ".join(reasons) or "no config takes this epilogue")
        return []
    made = [FlydslChoiceCaller(kernel_choice(choices_op), input_nodes, layout, c,
                               template=spec.name, alpha=1.0, beta=0.0, epilogue=spec_text)
            for c in configs]
    _describe_variants(made, spec, choices_op, problem, epilogue=spec_text)
    _hand_out(made, configs, preselected, str(arch), spec, choices_op, problem, spec_text)
    start_build_server()
    log.debug("inductor_flydsl: %d fused FlyDSL choices for %s with %s", len(made),
              problem.summary(), current.spec.summary())
    return made
