"""The GEMM selections made while a graph is lowered, by the output buffer each produced,
and Inductor's GEMM-only time of each choice: what the scheduler-side code looks up once
fusion has run (``fusion_outcome.py``, ``fusion_observer.py``, ``fusion_replay.py``)."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from ...problems.problem import Problem
from ..adapter import internals
from .serving import ChoiceTimes

# Inductor's GEMM-only time of each choice (served or benchmarked), set by the feedback
# saver: a deferred selection's timings may later be replaced by fused ones.
DECIDED = ChoiceTimes()


@dataclass
class NotedSelection:
    problem: Problem
    device: Any
    chosen: Any | None  # None: deferred to epilogue-fusion benchmarking
    served: bool


_notes: weakref.WeakKeyDictionary[Any, dict[str, NotedSelection]] = weakref.WeakKeyDictionary()
_notes_lock = threading.Lock()


def _graph() -> Any | None:
    try:
        return internals.V.graph
    except Exception:  # no graph being lowered (a selector called outside a compile)
        return None


def note_selection(node: Any, chosen: Any | None, problem: Problem, device: Any,
                   served: bool) -> None:
    """Remember which output buffer of the graph being lowered a selection produced."""
    graph = _graph()
    get_name = getattr(node, "get_name", None)
    if graph is None or not callable(get_name):
        return
    try:
        name = str(get_name())
    except Exception:  # an output with no buffer name: nothing to observe
        return
    with _notes_lock:
        try:
            notes = _notes.setdefault(graph, {})
        except TypeError:
            return
        notes[name] = NotedSelection(problem, device, chosen, served)


def noted(buffer_name: str) -> NotedSelection | None:
    """The selection noted for ``buffer_name`` in the graph being lowered, if any."""
    graph = _graph()
    if graph is None:
        return None
    with _notes_lock:
        try:
            return _notes.get(graph, {}).get(buffer_name)
        except TypeError:
            return None


def graph_notes() -> dict[str, NotedSelection]:
    """Every selection noted in the graph being lowered, by output buffer name."""
    graph = _graph()
    if graph is None:
        return {}
    with _notes_lock:
        try:
            return dict(_notes.get(graph, {}))
        except TypeError:
            return {}
