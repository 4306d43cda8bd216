"""The graph ops of a fused-epilogue region (``inductor_flydsl::gemm_epilogue`` and the
``keep_for_selection`` marker) and the registry of regions this process made (the exact
original ops a selection benchmarks as Inductor's own handling)."""

from __future__ import annotations

import threading

import torch

_regions: dict[str, torch.fx.GraphModule] = {}

_regions_lock = threading.Lock()

MAX_REGIONS = 4096


def remember(region_id: str, gm: torch.fx.GraphModule) -> None:
    with _regions_lock:
        if len(_regions) >= MAX_REGIONS:
            _regions.pop(next(iter(_regions)))
        _regions[region_id] = gm


def region_module(region_id: str) -> torch.fx.GraphModule | None:
    with _regions_lock:
        return _regions.get(region_id)


# flexible_layout: Inductor puts no stride constraint on the op's inputs (its default for
# an op it has no lowering of is to fix their stride order, realizing them: that would
# change how Inductor lowers the region's output, which must stay as without the plugin)
@torch.library.custom_op("inductor_flydsl::gemm_epilogue", mutates_args=(),
                         tags=(torch.Tag.flexible_layout,))
def gemm_epilogue(original: torch.Tensor, epilogue: str, region: str,
                  inputs: str) -> torch.Tensor:
    """``epilogue(a @ b, x0..)``, which ``original`` (the region's own output, computed
    by the original ops the graph still holds) already is: its lowering either returns
    ``original`` as Inductor lowered it or a fused FlyDSL kernel's result. ``inputs``
    names the graph nodes of ``a, b, x0, x1, x2, x3`` (JSON): named, not passed, so the
    op adds no use to them (Inductor decides whether to realize a value by its uses)."""
    return original.clone()


@gemm_epilogue.register_fake
def _gemm_epilogue_fake(original: torch.Tensor, epilogue: str, region: str,
                        inputs: str) -> torch.Tensor:
    return torch.empty_like(original)


@torch.library.custom_op("inductor_flydsl::keep_for_selection", mutates_args=(),
                         tags=(torch.Tag.flexible_layout,))
def keep_for_selection(names: str) -> torch.Tensor:
    """A marker at the top of a graph with ``gemm_epilogue`` nodes: its lowering keeps
    what Inductor lowers the nodes ``names`` (JSON) to until the selections that read
    them by name are lowered (Inductor's interpreter frees a value after its last use,
    and ``gemm_epilogue`` names its inputs instead of using them). Computes nothing."""
    return torch.zeros(())


@keep_for_selection.register_fake
def _keep_for_selection_fake(names: str) -> torch.Tensor:
    return torch.empty(())
