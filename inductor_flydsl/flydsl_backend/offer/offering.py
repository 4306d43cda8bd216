"""Which configs an eligible GEMM is offered, best first: the offering policy.

The search space's configs that fit the arch (:func:`pruned_configs`: at most
``INDUCTOR_FLYDSL_CANDIDATES``, in ``configs.prune_for_shape``'s order) are ranked by the
performance model (:func:`ranked_candidates`), the way Triton's autotuner ranks its
configs with ``prune_configs_by={'perf_model', 'top_k'}``: this module enumerates the
configs and says what the problem is to the model (its shape, the catalog variant of its
kernels); ``performance/ranking.py`` predicts and sorts, knowing nothing of the backend.
:func:`offer` puts the model's ``INDUCTOR_FLYDSL_TOP_K`` best first, then the rest of the
pruned list. Eligibility (``eligibility.py``) is checked before any of this.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import settings
from ...performance.ranking import RankedConfig, preselect, rank, stored_first, top_k
from ...performance.short_lists import shipped_short_list
from ...performance.traffic import model_shape
from ...problems.problem import Problem
from ...provenance.timing_modes import GPU_TIMING_MODES, GRAPH, TimingMode
from ..specs import registry
from ..specs.registry import TemplateSpec

log = logging.getLogger("inductor_flydsl")
CONFIGS_PER_PROBLEM = settings.CANDIDATES.default
ENV_CANDIDATES = settings.CANDIDATES.name
MAX_CANDIDATES = settings.MAX_CANDIDATES


def configs_per_problem() -> int:
    """How many FlyDSL configs a GEMM shape gets (``INDUCTOR_FLYDSL_CANDIDATES``, 1 to
    64; default 12): more can find a faster kernel, each costs a build and a benchmark.
    A bad value is logged and the default used (it must never fail a compile)."""
    return settings.CANDIDATES.value()


def pruned_configs(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                   limit: int = CONFIGS_PER_PROBLEM, spec: TemplateSpec | None = None
                   ) -> list[Any]:
    """The eligible configs of ``spec``'s search space (default: the first template that
    computes ``problem``), at most ``limit``, in the template's pruned order (the dense
    template: ``configs.prune_for_shape``): no performance model."""
    spec = spec or registry.primary(problem)
    return spec.configs(problem, arch, search_space.upper(), limit)


def model_variant(problem: Problem, spec: TemplateSpec | None = None
                  ) -> tuple[str, str, str, str]:
    """(template, op, dtype, layout) of the catalog rows that describe ``problem``'s
    kernels of ``spec`` (default: the first template that computes it): what the model is
    told about them (``comparison.compare`` takes it too)."""
    spec = spec or registry.primary(problem)
    return (spec.name, *spec.model_variant(problem))


def ranked_candidates(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                      epilogue: Any = None, accept: Callable[[Any], bool] | None = None,
                      timing: TimingMode = GRAPH, spec: TemplateSpec | None = None
                      ) -> list[RankedConfig] | None:
    """Every eligible config of the DEFAULT search space, fastest predicted first under
    ``timing`` (how the selection times its choices, as the compiled graph runs them: a
    launch costs the GPU's gap under ``graph``, its host dispatch under ``eager``; see
    ``performance/ranking.py``); None when there is no preselection: top-k is 0, the
    search space is EXHAUSTIVE (every config is tried), the catalog has no figure of any
    of them, or the model fails. The shipped short lists were ranked for graph timing:
    they lead only a graph-timed selection's list."""
    if top_k() == 0 or search_space.upper() == "EXHAUSTIVE":
        return None
    eligible = [c for c in pruned_configs(problem, arch, search_space="DEFAULT",
                                          limit=MAX_CANDIDATES, spec=spec)
                if accept is None or accept(c)]
    template, op, dtype, layout = model_variant(problem, spec)
    try:
        ranked = rank(eligible, model_shape(problem, epilogue), arch=arch, template=template,
                      op=op, dtype=dtype, layout=layout, timing=model_timing(timing))
        if not any(r.prediction is not None for r in ranked):
            return None  # no catalog figures: no basis to preselect on
        # the shipped lists rank the plain GEMM under graph timing: a fused epilogue's
        # traffic, or another timing mode, is ranked here
        # (and of the first template that computes the problem: the shipped lists' own)
        stored = [] if epilogue is not None or model_timing(timing) != GRAPH or \
            template != registry.primary(problem).name else \
            shipped_short_list(problem.id, arch)
        return stored_first(ranked, stored) if stored else ranked
    except Exception as exc:  # the model must never cost a compile its FlyDSL choices
        log.warning("inductor_flydsl: performance model failed for %s (%s: %s); offering "
                    "the pruned configs", problem.summary(), type(exc).__name__, exc)
        return None


@dataclass(frozen=True)
class Offer:
    """The configs offered as candidates, in order; how many of them, first in the list,
    the model preselects (0: no preselection); and the model's ranking they came from
    (None without preselection)."""

    configs: list[Any]
    preselected: int
    ranked: list[RankedConfig] | None


def offer(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
          limit: int = CONFIGS_PER_PROBLEM, epilogue: Any = None,
          accept: Callable[[Any], bool] | None = None, timing: TimingMode = GRAPH,
          spec: TemplateSpec | None = None) -> Offer:
    """What an eligible ``problem`` on ``arch`` is offered.

    The candidates are the model's ``INDUCTOR_FLYDSL_TOP_K`` best, then the rest of the
    pruned list (``INDUCTOR_FLYDSL_CANDIDATES``, ``prune_for_shape``'s order), so a record
    made before the model, or with top-k off, still finds every candidate it measured. With
    no record, only the preselected ones are benchmarked (``inductor/autotune/lookup.py``); the
    others only when a record serves them. ``accept`` (a config's own constraint, e.g. an
    epilogue's) applies before the preselection; ``timing`` is the selection's timing
    mode, which the model ranks by; ``spec`` the template offered (default: the first
    that computes ``problem``)."""
    pruned = [c for c in pruned_configs(problem, arch, search_space=search_space,
                                        limit=limit, spec=spec) if accept is None or accept(c)]
    ranked = ranked_candidates(problem, arch, search_space=search_space, epilogue=epilogue,
                               accept=accept, timing=timing, spec=spec)
    if ranked is None:
        return Offer(pruned, 0, None)
    best = preselect(ranked, min(top_k(), limit))
    return Offer(best + [c for c in pruned if c not in best], len(best), ranked)


def offered_configs(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                    limit: int = CONFIGS_PER_PROBLEM, epilogue: Any = None,
                    accept: Callable[[Any], bool] | None = None,
                    timing: TimingMode = GRAPH, spec: TemplateSpec | None = None
                    ) -> tuple[list[Any], int]:
    """``(configs, k)`` of :func:`offer`: the configs offered as candidates and how many
    of them, first in the list, the model preselects (0: no preselection)."""
    offered = offer(problem, arch, search_space=search_space, limit=limit,
                    epilogue=epilogue, accept=accept, timing=timing, spec=spec)
    return offered.configs, offered.preselected


def model_timing(timing: TimingMode | None) -> TimingMode:
    """The model's mode for a selection timed ``timing``: a GPU's graph or eager timing;
    anything else (no selection, a CPU compile) the graph timing the shipped lists use."""
    return timing if timing in GPU_TIMING_MODES else GRAPH


def candidate_configs(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                      limit: int = CONFIGS_PER_PROBLEM, spec: TemplateSpec | None = None
                      ) -> list[Any]:
    """The configs FlyDSL would try for an eligible ``problem`` on ``arch``, in the
    offered order (:func:`offer`)."""
    return offer(problem, arch, search_space=search_space, limit=limit, spec=spec).configs
