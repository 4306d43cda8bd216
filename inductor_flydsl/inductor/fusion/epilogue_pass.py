"""The post-grad graph pass (``config.post_grad_custom_post_pass``) that turns each
fusable GEMM + epilogue region into a ``gemm_epilogue`` selection node, after running the
user's own passes as Inductor would (``user_passes``)."""

from __future__ import annotations

import functools
import json
import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...version import __version__
from ..adapter import internals, user_passes
from ..autotune import compile_end
from ..vllm.vllm_gemm_rewrite import rewrite_vllm_gemms
from .epilogue_ops import remember
from .epilogue_regions import MAX_OPERANDS, aten, find_region, region_id, region_module_of

log = logging.getLogger("inductor_flydsl")


@dataclass(frozen=True)
class FusionHooks:
    """What the plugin hands the pass and the lowering when it is on: whether a GEMM node
    may become a selection, who counts a failure, who counts the regions made."""

    gate: Callable[[torch.fx.Node], bool]
    report: Callable[[str, BaseException], None]
    count: Callable[[int], None]


_hooks: FusionHooks | None = None


def set_hooks(hooks: FusionHooks | None) -> None:
    global _hooks
    _hooks = hooks


def hooks() -> FusionHooks | None:
    """The plugin's hooks while it is on; None while off (the pass then only runs the
    user's passes)."""
    return _hooks


def fuse_epilogues(graph: torch.fx.Graph,
                   eligible: Callable[[torch.fx.Node], bool]) -> int:
    """Replace each fusable GEMM + epilogue region by one ``gemm_epilogue`` node."""
    fused = 0
    kept: set[str] = set()
    gemms = [x for x in graph.nodes if x.op == "call_function"
             and x.target in (aten.mm.default, aten.addmm.default)]
    for gemm in gemms:
        if not eligible(gemm):
            continue
        found = find_region(gemm)
        if isinstance(found, str):
            log.debug("inductor_flydsl: %s not fused: %s", gemm.name, found)
            continue
        gm = region_module_of(found)
        rid = region_id(gm)
        remember(rid, gm)
        slots = [*found.operands, *([found.a] * (MAX_OPERANDS - len(found.operands)))]
        # The original ops stay where they are (Inductor lowers them exactly as without
        # the plugin); the selection node comes after the region's output and takes its
        # place for every later use. Whichever loses is dead code Inductor drops.
        with graph.inserting_after(found.sink):
            new = graph.call_function(
                torch.ops.inductor_flydsl.gemm_epilogue.default,
                (found.sink, found.spec.text(), rid,
                 json.dumps([x.name for x in (found.a, found.b, *slots)])))
        new.meta.update(found.sink.meta)
        found.sink.replace_all_uses_with(new, delete_user_cb=functools.partial(
            operator.is_not, new))
        fused += 1
        kept.update(x.name for x in (found.a, found.b, *found.operands))
        log.debug("inductor_flydsl: %s + epilogue %s -> gemm_epilogue", gemm.name,
                  found.spec.summary())
    if kept:
        first = next(n for n in graph.nodes if n.op != "placeholder")
        with graph.inserting_before(first):
            graph.call_function(torch.ops.inductor_flydsl.keep_for_selection.default,
                                (json.dumps(sorted(kept)),))
    return fused


class EpilogueFusionPass(internals.CustomInferenceAwareGraphPass):
    """``config.post_grad_custom_post_pass`` while the plugin is on: runs the value that
    was there before (a user's passes, in any form torch accepts: ``user_passes``) as
    Inductor would, then :func:`fuse_epilogues` where the gate allows. Inference-aware, so
    Inductor hands it ``is_inference`` for the user's inference-aware passes; a framework
    that calls it with the graph alone gets ``is_inference=False`` passed on."""

    def __init__(self, inner: Any = None, *, client_captures_graphs: bool = False) -> None:
        self.inner = inner
        # the compile's caller runs the compiled graph inside CUDA/HIP graphs of its own
        # with Inductor's cudagraphs off (vLLM): its selections are timed as graphs
        # (timing_parity.compile_uses_graphs reads it from the compile's config)
        self.client_captures_graphs = client_captures_graphs

    def __call__(self, graph: torch.fx.Graph, is_inference: bool = False) -> None:
        user_passes.run_graph_passes(self.inner, graph, is_inference)
        wired = _hooks
        if wired is None:
            return
        # after a torch._dynamo.reset(), before this compile ends: uuid() puts the
        # compile-end callbacks back only where Inductor computes an FX-graph-cache key
        # (its cache on); this pass runs in every compile that lowers a graph
        compile_end.ensure_installed()
        try:  # vLLM's opaque GEMM ops first: the ATen GEMMs they become fuse like any
            config = internals.config
            rewrite_vllm_gemms(graph, autotunes_gemms=bool(
                config.max_autotune or config.max_autotune_gemm))
        except Exception as exc:  # a node is replaced only once its new nodes exist
            wired.report("lowering vLLM's GEMM ops", exc)
        try:
            count = fuse_epilogues(graph, wired.gate)
        except Exception as exc:  # the graph is only changed by a complete replacement
            wired.report("fusing GEMM epilogues", exc)
            return
        if count:
            wired.count(count)

    def uuid(self) -> Any:
        """The plugin's own identity and the user's passes' ``uuid()``s; ``None`` (Inductor
        bypasses its FX-graph cache) where the user's passes alone would make it bypass."""
        from ...provenance.software import template_version

        inner = user_passes.graph_passes_uuid(self.inner)
        if inner is None:
            return None
        graphs = ("client_captures_graphs",) if self.client_captures_graphs else ()
        # "vllm_gemms": the pass also lowers vLLM's GEMM ops (vllm_gemm_rewrite.py)
        return ("inductor_flydsl.EpilogueFusionPass", __version__, template_version(),
                "vllm_gemms=1", inner, *graphs)
