"""The observer of what the scheduler fused: Inductor's scheduler-pass hook
(``config._post_fusion_custom_pass``, chained after a pass the user set; it returns the
nodes unchanged) finds every noted GEMM (``selection_notes.py``) among the fused nodes
and hands its ``EpilogueDecision`` (``fusion_outcome.decide``) to the plugin, which
records it in the tuning DB. A served compile (``serving.py``) makes the same decision
from the recorded timings; the observer then reports ``same`` or ``changed`` against the
record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...db.store import EpilogueDecision
from ..adapter import internals, user_passes
from ..autotune.selection_notes import NotedSelection, graph_notes
from .fusion_outcome import decide

log = logging.getLogger("inductor_flydsl")

Sink = Callable[[NotedSelection, EpilogueDecision], None]
ErrorReporter = Callable[[str, BaseException], None]
_sink: Sink | None = None
_report: ErrorReporter | None = None


def set_sink(sink: Sink | None, report: ErrorReporter | None = None) -> None:
    """Where decisions go (the plugin records them), and who counts a failure."""
    global _sink, _report
    _sink, _report = sink, report


def observe(nodes: list[Any]) -> list[Any]:
    """Find every noted GEMM among the scheduler's fused nodes and hand its decision to
    the sink. Errors are the sink owner's to count; the nodes are returned unchanged."""
    sink = _sink
    if sink is None:
        return nodes
    notes = graph_notes()
    if not notes:
        return nodes
    for snode in nodes:
        group = list(snode.get_nodes()) if hasattr(snode, "get_nodes") else [snode]
        for member in group:
            note = next((notes[n] for n in _buffer_names(member) if n in notes), None)
            if note is None:
                continue
            try:
                sink(note, decide(note, member, group))
            except Exception as exc:
                if _report is not None:
                    _report("observing the epilogue decision", exc)
    return nodes


def _buffer_names(snode: Any) -> list[str]:
    """The IR buffers a scheduler node writes (a selection's output is one of them)."""
    try:
        return [str(n) for n in snode.get_buffer_names()]
    except Exception:
        return []


class _Observer:
    """Runs the ``_post_fusion_custom_pass`` that was there before (a user's), then
    :func:`observe`; the observation itself changes no code."""

    def __init__(self, inner: Callable[[list[Any]], list[Any]] | None = None) -> None:
        self.inner = inner

    def __call__(self, nodes: list[Any]) -> list[Any]:
        if self.inner is not None:
            nodes = self.inner(nodes)
        try:
            return observe(nodes)
        except Exception as exc:  # never fail a compile over an observation
            log.debug("inductor_flydsl: epilogue observation failed", exc_info=exc)
            return nodes

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.inner == self.inner  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.inner))


class PostFusionObserver(_Observer, internals.CustomSchedulerPass):
    """The observer over no pass or a user's ``CustomSchedulerPass``: a
    ``CustomSchedulerPass`` itself (anything else makes Inductor bypass its FX-graph
    cache), picklable by value, its ``uuid()`` naming the user's pass by the pass's own
    ``uuid()``."""

    def uuid(self) -> Any:
        return ("inductor_flydsl.PostFusionObserver",
                user_passes.scheduler_pass_uuid(self.inner))


class UncachedPostFusionObserver(_Observer):
    """The observer over a user's plain callable: like that callable, no
    ``CustomSchedulerPass``, so Inductor bypasses its FX-graph cache exactly as it would
    without the plugin."""


def observer_for(inner: Any) -> _Observer:
    """The observer wrapping ``inner`` (the current ``_post_fusion_custom_pass``)."""
    if inner is None or isinstance(inner, internals.CustomSchedulerPass):
        return PostFusionObserver(inner)
    return UncachedPostFusionObserver(inner)


def install_observer() -> None:
    config = internals.config
    current = config._post_fusion_custom_pass
    if not isinstance(current, _Observer):
        config._post_fusion_custom_pass = observer_for(current)


def uninstall_observer() -> None:
    config = internals.config
    current = config._post_fusion_custom_pass
    if isinstance(current, _Observer):
        config._post_fusion_custom_pass = current.inner
