"""The lowering of ``gemm_epilogue``: one selection, ``gemm_epilogue``, between
Inductor's own handling of the region (the original ops, as Inductor lowered them) and
FlyDSL kernels with the epilogue fused, made with its epilogue as the selection's
(``autotune/selection.py``: ``selecting_epilogue``, read by the choice provider and the
problem key)."""

from __future__ import annotations

import functools
import json
from typing import Any

import torch

from ...problems.epilogue_spec import EpilogueSpec
from ..adapter import internals
from ..autotune.gemm_backends import without_flydsl
from ..autotune.selection import EPILOGUE_SELECTION as SELECTION_NAME
from ..autotune.selection import selecting_epilogue
from . import epilogue_pass
from .epilogue_ops import region_module
from .epilogue_regions import aten


def _inner_patches() -> dict[str, Any]:
    """Inductor's own settings for compiling the region as a competitor, FlyDSL left out."""
    config = internals.config
    return {"max_autotune": config.max_autotune, "max_autotune_gemm": config.max_autotune_gemm,
            "max_autotune_gemm_backends": without_flydsl(),
            "benchmark_fusion": config.benchmark_fusion,
            "benchmark_epilogue_fusion": config.benchmark_epilogue_fusion}


def _has_fixed_layout(x: Any) -> bool:
    """A buffer already (a realized value) whose layout is fixed."""
    return bool(internals.is_storage_and_layout(x)) and isinstance(x.get_layout(),
                                                                    internals.FixedLayout)


def _benchmark_copy(x: Any) -> Any:
    """A realized copy of ``x`` (Inductor's own ``clone`` lowering): what a choice is
    benchmarked on when ``x`` itself must stay as Inductor left it (unrealized, or its
    layout not yet fixed). Unused, it is dead code Inductor drops."""
    copy = internals.lowerings[aten.clone.default](x)
    copy.realize()
    return copy


def lower_keep_for_selection(names: str) -> Any:
    """Inductor's interpreter frees each value after its last use; the values the
    selections read by name are taken off those lists (they live until the graph is
    lowered). Returns an unrealized scalar: no code is generated for it."""
    graph = internals.V.graph
    keep = set(json.loads(names))
    for freed in getattr(graph, "user_to_last_uses", {}).values():
        freed[:] = [node for node in freed if node.name not in keep]
    return internals.lowerings[aten.full.default](
        [], 0.0, dtype=torch.float32, device=torch.device("cpu"))


def _lowered(names: list[str]) -> list[Any] | None:
    """What Inductor lowered the graph nodes ``names`` to (the graph being lowered runs
    them in order: they come before the region's output), or None if one is missing."""
    graph = internals.V.graph
    by_name = {node.name: node for node in graph.module.graph.nodes}
    nodes = [by_name.get(name) for name in names]
    if any(node is None or node not in graph.env for node in nodes):
        return None
    return [graph.env[node] for node in nodes]


def lower_gemm_epilogue(original: Any, epilogue: str, region: str, inputs: str) -> Any:
    """One selection between Inductor's own handling of the region (``original``, the
    region as Inductor lowered it, untouched: benchmarked as a subgraph of the same ops)
    and FlyDSL kernels with the epilogue fused. Nothing Inductor lowered is changed: the
    choices read the inputs Inductor has already made buffers with fixed layouts (the
    GEMM's, by its own lowering) and realized copies of the others; when Inductor's own
    handling wins, ``original`` itself is the result (the copies are dead code)."""
    gm = region_module(region)
    if gm is None:
        return original
    try:
        lowered = _lowered(json.loads(inputs))
        if lowered is None:
            return original
        # Every choice reads the selection's inputs (Inductor's benchmark keys them by
        # name), and SubgraphChoiceCaller fixes its inputs' layouts: a value that is not
        # a buffer with a fixed layout yet (its layout is Inductor's to decide later) is
        # read through a realized copy, so Inductor's lowering of it stays as it was.
        nodes = [x if _has_fixed_layout(x) else _benchmark_copy(x) for x in lowered]
        spec = EpilogueSpec.from_json(epilogue)

        def original_ops(*tensors: torch.Tensor) -> torch.Tensor:
            return gm(*tensors)

        original_ops.__name__ = "inductor_region"
        template = internals.SubgraphTemplate(name=SELECTION_NAME)
        choices = template.generate_custom_op_choices(
            name=SELECTION_NAME, decompositions=[original_ops], input_nodes=nodes,
            non_tensor_args=[{}], config_patches_list=[_inner_patches()])
        for choice in choices:
            # When Inductor's own handling wins, the result is the region as Inductor
            # lowered it in the graph, not a separately compiled subgraph
            choice.output_node = functools.partial(  # type: ignore[method-assign]
                _identity, original)
        with selecting_epilogue(spec, region):
            node, _ = internals.autotune_select_algorithm(
                SELECTION_NAME, choices, nodes, choices[0].layout,
                return_multi_template=False)
    except Exception as exc:
        wired = epilogue_pass.hooks()
        if wired is not None:
            wired.report("selecting a fused epilogue", exc)
        return original
    return node


def _identity(value: Any) -> Any:
    return value


