"""What the scheduler finally ran for each recorded GEMM, and the epilogue around it.

Inductor decides a GEMM together with its epilogue: the selection gives the GEMM-only
winner, then the scheduler fuses pointwise consumers into a template (the CPU C++ GEMM
template, a Triton template) or leaves them to a separate kernel behind an extern call;
on a GPU with ``benchmark_epilogue_fusion`` the selection itself is deferred
(``MultiTemplateBuffer``) and the scheduler benchmarks the best template with the
epilogue fused against the GEMM-only winner plus a separate epilogue kernel.

This module observes the outcome after fusion, through Inductor's scheduler-pass hook
(``config._post_fusion_custom_pass``, chained after a pass the user set; it returns the
nodes unchanged), and hands one ``EpilogueDecision`` per selected GEMM to the plugin,
which records it in the tuning DB: the epilogue (the ops of the nodes fused into the GEMM
kernel and of the consumers left outside it), the kernel the final code runs, whether the
epilogue is fused, the GEMM-only winner and, for a deferred choice, the fused kernel's
benchmarked time against the GEMM-only winner's. A served compile (``serving.py``) makes
the same decision from the recorded timings; the observer then reports ``same`` or
``changed`` against the record.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from ..db.store import EpilogueDecision
from ..keys import stable_id
from ..problem import Problem
from . import internals
from .candidates import backend_of, candidate_id
from .serving import ChoiceTimes

log = logging.getLogger("inductor_flydsl")

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


def _origins(snode: Any) -> set[Any]:
    """The FX nodes a scheduler node was built from (a GEMM's include its inputs' ops)."""
    return set(getattr(getattr(snode, "node", None), "origins", None) or ())


def _op_names(snode: Any, exclude: AbstractSet[Any] = frozenset()) -> list[str]:
    """The ATen ops a scheduler node computes, from its FX origins (``relu``, ``add``),
    leaving out the FX nodes in ``exclude`` (by identity: a GEMM's input may come from
    another ``relu`` than its epilogue)."""
    names = set()
    for origin in _origins(snode) - exclude:
        target = getattr(origin, "target", None)
        if getattr(origin, "op", None) != "call_function" or target is None:
            continue
        text = getattr(target, "__name__", None) or str(target)
        parts = str(text).split(".")
        if len(parts) > 1 and parts[-1] in ("default", "Tensor", "Scalar", "self", "out"):
            parts = parts[:-1]
        names.add(parts[-1])
    return sorted(names)


def _consumers(snode: Any, group: Sequence[Any]) -> list[Any]:
    inside = {id(n) for n in group}
    found = []
    for buf in getattr(snode, "get_outputs", lambda: [])():
        for user in getattr(buf, "users", ()):
            node = getattr(user, "node", None)
            if node is None or id(node) in inside or not hasattr(node, "get_nodes"):
                continue
            found.append(node)
    return found


def _is_multi_template(snode: Any) -> bool:
    return isinstance(getattr(snode, "node", None), internals.MultiTemplateBuffer)


def decide(note: NotedSelection, snode: Any, group: Sequence[Any]) -> EpilogueDecision:
    """The decision for one noted GEMM node inside its (possibly fused) scheduler node."""
    fused_nodes = [n for n in group if n is not snode]
    own = _origins(snode)  # an epilogue node's origins include the GEMM's own FX nodes
    fused_ops = sorted({op for n in fused_nodes for op in _op_names(n, own)})
    separate_ops = sorted({op for n in _consumers(snode, group) for op in _op_names(n, own)})
    epilogue = {"ops": sorted({*fused_ops, *separate_ops}), "fused": fused_ops,
                "separate": separate_ops}
    epilogue_id = stable_id({"ops": epilogue["ops"]})
    fused = bool(fused_nodes)
    if note.chosen is not None or not _is_multi_template(snode):
        fused = bool(fused_ops)  # the epilogue's ops run in the GEMM kernel (not a bias)
        chosen = note.chosen
        gemm_ms = DECIDED.get(chosen) if chosen is not None else None
        kind = "template" if getattr(snode, "is_template", lambda: False)() else "extern"
        decided_by = (f"Inductor's GEMM-only selection ({kind}); the scheduler "
                      + ("fused the epilogue into it" if fused else
                         "left the epilogue to separate kernels" if separate_ops else
                         "found no epilogue"))
        return EpilogueDecision(
            problem_id=note.problem.id, epilogue_id=epilogue_id, epilogue=epilogue,
            candidate_id=candidate_id(chosen) if chosen is not None else "",
            backend=backend_of(chosen) if chosen is not None else "",
            name=str(getattr(chosen, "name", "")), fused=fused,
            gemm_winner_id=candidate_id(chosen) if chosen is not None else "",
            gemm_ms=gemm_ms, unfused_ms=gemm_ms, decided_by=decided_by)
    # Deferred: the scheduler benchmarked the best template fused with its epilogue
    # (its timings then replace the GEMM-only ones) or keeps the GEMM-only winner.
    multi = snode.node
    # Inductor's timings for the deferred choice; asking for them (when no fusion
    # benchmark did yet) autotunes now, as finalizing the buffer would right after, and
    # the feedback saver records them (DECIDED: the GEMM-only ones)
    timings = multi.choice_timings()
    gemm = DECIDED.pick(multi.choices)
    winner = min(gemm, key=gemm.__getitem__) if gemm else None
    final = winner
    fused_ms = None
    if fused:
        benchmarked = {c: t for c, t in timings.items() if gemm.get(c) != t}
        pool = benchmarked or timings
        final = min(pool, key=pool.__getitem__) if pool else winner
        fused_ms = pool.get(final) if benchmarked else None
    winner_ms = gemm.get(winner) if winner is not None else None
    decided_by = ("benchmark_epilogue_fusion: " + (
        "the fused template beat the GEMM-only winner plus a separate epilogue kernel"
        if fused else "the GEMM-only winner with a separate epilogue kernel"
        if separate_ops else "no epilogue; the GEMM-only winner"))
    return EpilogueDecision(
        problem_id=note.problem.id, epilogue_id=epilogue_id, epilogue=epilogue,
        candidate_id=candidate_id(final) if final is not None else "",
        backend=backend_of(final) if final is not None else "",
        name=str(getattr(final, "name", "")), fused=fused,
        gemm_winner_id=candidate_id(winner) if winner is not None else "",
        gemm_ms=gemm.get(final) if final is not None else None, fused_ms=fused_ms,
        unfused_ms=winner_ms, decided_by=decided_by)


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
    sink, graph = _sink, _graph()
    if sink is None or graph is None:
        return nodes
    with _notes_lock:
        notes = dict(_notes.get(graph, {}))
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


class PostFusionObserver(internals.CustomSchedulerPass):
    """The value of ``config._post_fusion_custom_pass`` while the plugin is on: runs the
    pass that was there before (a user's), then :func:`observe`. A ``CustomSchedulerPass``
    (anything else makes Inductor bypass its FX-graph cache), picklable by value, so the
    cache key (which holds Inductor's config) names the inner pass too; the observer
    itself changes no code."""

    def __init__(self, inner: Callable[[list[Any]], list[Any]] | None = None) -> None:
        self.inner = inner

    def uuid(self) -> Any:
        inner_uuid = getattr(self.inner, "uuid", None)
        return ("inductor_flydsl.PostFusionObserver",
                inner_uuid() if callable(inner_uuid) else repr(self.inner))

    def __call__(self, nodes: list[Any]) -> list[Any]:
        if self.inner is not None:
            nodes = self.inner(nodes)
        try:
            return observe(nodes)
        except Exception as exc:  # never fail a compile over an observation
            log.debug("inductor_flydsl: epilogue observation failed", exc_info=exc)
            return nodes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PostFusionObserver) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash((PostFusionObserver, self.inner))


def install_observer() -> None:
    config = internals.config
    current = config._post_fusion_custom_pass
    if not isinstance(current, PostFusionObserver):
        config._post_fusion_custom_pass = PostFusionObserver(current)


def uninstall_observer() -> None:
    config = internals.config
    current = config._post_fusion_custom_pass
    if isinstance(current, PostFusionObserver):
        config._post_fusion_custom_pass = current.inner
