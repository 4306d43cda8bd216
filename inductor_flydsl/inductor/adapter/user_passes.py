"""A user's own Inductor graph passes, run and keyed exactly as Inductor would run and key
them without the plugin.

The plugin's post-grad pass (``epilogue_fusion.EpilogueFusionPass``) takes the place of
``config.post_grad_custom_post_pass`` and keeps the user's value inside it. torch accepts
there (``custom_graph_pass.CustomGraphPassType``, torch 2.13 and 2.14): ``None``, a
callable, a ``CustomGraphPass``, a ``CustomInferenceAwareGraphPass`` (called with
``is_inference``), or a list or tuple of those, run in order
(``fx_passes/post_grad.py: post_grad_passes``). Its FX-graph-cache key holds each pass's
``uuid()``; a pass that is not a ``CustomGraphPass``, or whose ``uuid()`` is falsy, makes
Inductor bypass the cache (``codecache.FxGraphHashDetails._check_custom_passes``).
:func:`run_graph_passes` and :func:`graph_passes_uuid` do the same for the value kept.
"""

from __future__ import annotations

from typing import Any

from . import internals


def graph_passes(value: Any) -> tuple[Any, ...]:
    """The passes a ``post_grad_custom_post_pass`` value holds, in the order Inductor runs
    them (Inductor's own ``get_custom_graph_passes``)."""
    return tuple(internals.get_custom_graph_passes(value))


def run_graph_passes(value: Any, graph: Any, is_inference: bool) -> None:
    """Runs the passes ``value`` holds on ``graph`` as Inductor would: in order, an
    inference-aware one given ``is_inference``. Their exceptions are theirs: they
    propagate, as they would without the plugin."""
    aware = internals.CustomInferenceAwareGraphPass
    for graph_pass in graph_passes(value):
        if isinstance(graph_pass, aware):
            graph_pass(graph, is_inference=is_inference)
        else:
            graph_pass(graph)


def graph_passes_uuid(value: Any) -> tuple[Any, ...] | None:
    """What the passes ``value`` holds put in Inductor's FX-graph-cache key: their own
    ``uuid()``s in order, or ``None`` (Inductor then bypasses its cache, as it would for
    these passes without the plugin) when one of them is not a ``CustomGraphPass`` or has
    no ``uuid()``. Never a ``repr`` (it would hold memory addresses: a different key in
    every process)."""
    ids = []
    for graph_pass in graph_passes(value):
        if not isinstance(graph_pass, internals.CustomGraphPass):
            return None
        uuid = graph_pass.uuid()
        if not uuid:
            return None
        ids.append(uuid)
    return tuple(ids)


def scheduler_pass_uuid(value: Any) -> Any | None:
    """What a ``_post_fusion_custom_pass`` value puts in the cache key: its ``uuid()`` if it
    is a ``CustomSchedulerPass``, else ``None`` (the wrapper of a plain callable is itself
    no ``CustomSchedulerPass``, so Inductor bypasses its cache, as it would without the
    plugin)."""
    if value is None:
        return ()
    if isinstance(value, internals.CustomSchedulerPass):
        return value.uuid()
    return None
