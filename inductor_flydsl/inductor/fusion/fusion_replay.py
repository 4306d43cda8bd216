"""Deferred epilogue-fusion decisions, recorded once and replayed from their timings.

On a GPU with ``config.benchmark_epilogue_fusion`` (Inductor's default), a GEMM selection
with Triton templates is deferred (``MultiTemplateBuffer``) and decided by the scheduler:
``Scheduler.speedup_by_fusion(node1, node2)`` compiles the best Triton template with the
epilogue ``node2`` fused and benchmarks it, benchmarks the epilogue kernel alone, and fuses
when ``fused < GEMM-only winner + epilogue``. Serving the GEMM-only timings does not reach
that step, so a warm compile still compiled and benchmarked there (issue 33, point 2).

This module wraps that one scheduler method and three it calls (no extension point offers
the decision; the class attributes are swapped through ``patches.py`` while the plugin is
on, like the selector's class):

- **Record.** With no record of the attempt, Inductor's own method runs unchanged; what
  it did and measured is captured (the templates it compiled fused, each one's time from
  ``benchmark_codegened_module`` under ``swap_as_triton_caller``, the epilogue kernel's
  from ``benchmark_fused_nodes``, whether it decided at once or in its pending-fusion
  round) and recorded with its outcome, in ``epilogue_decisions`` under the attempt's
  own id (``kind: fusion_benchmark``): the GEMM's problem and the attempt's identity (the
  exact epilogue, ``fusion_outcome.epilogue_steps``; the nodes on each side; the offered
  nodes' results read outside the kernel).
- **Like with like.** Where the GEMM-only times are graph-replay times (a selection
  with a FlyDSL candidate under ``mode="max-autotune"``), the epilogue kernel and the
  fused templates are timed by graph replay too (``fusion_timing.py``); else as
  Inductor times them.
- **Replay.** With a record of the same attempt on the same device and software (values
  checked first), Inductor's rule is applied to the recorded times: the templates it
  would compile now (``templates_to_benchmark``) must be the recorded ones; the fastest
  recorded fused template fuses if it beats the GEMM-only winner's time (Inductor's own,
  served) plus the recorded epilogue time. The decision is handed back as Inductor did
  (at once, or as a callable for its pending-fusion round); fusing finalizes the buffer
  to that template and sets its timings to the fused ones, as Inductor does; nothing is
  compiled or benchmarked for it. Other templates now, a value that fails the check, or
  any error: Inductor's own method decides (and its result replaces the record).

Only the benchmarking path is replayed: prologue fusion, atomic-add epilogues,
``multi_kernel_hints``, ``benchmark_epilogue_fusion = False`` (pipelined autotuning,
decided from register counts), a sibling fused alongside the epilogue and GEMMs with
NVGEMM choices stay Inductor's own, as does the layout-conflict check, which compiles
nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...db.store import EpilogueDecision
from ...problems.keys import stable_id
from ...provenance.software import current_software
from ...provenance.timing_modes import GRAPH
from ..adapter import internals, patches, plugin_state
from ..autotune import selection_notes
from ..autotune.candidates import backend_of, candidate_id
from ..timing import fusion_timing, timing_parity
from . import fusion_outcome

KIND = "fusion_benchmark"


@dataclass(frozen=True)
class FusionAttempt:
    """One call of ``speedup_by_fusion``: a deferred GEMM and the epilogue offered to it."""

    multi: Any  # the MultiTemplateBuffer
    note: selection_notes.NotedSelection
    ops: list[str]
    # the exact epilogue (``fusion_outcome.epilogue_steps``) and what else changes the fused
    # kernel (the fused nodes on each side, the offered nodes' results stored outside)
    identity: dict[str, Any]

    @property
    def epilogue_id(self) -> str:
        return attempt_id(self.identity)


def attempt_id(identity: dict[str, Any]) -> str:
    """The id a fusion attempt is recorded under (apart from the observer's rows)."""
    return stable_id({KIND: identity})


def find_attempt(node1: Any, node2: Any) -> FusionAttempt | None:
    """The attempt when ``node1`` holds a deferred GEMM selection the plugin noted and
    ``node2`` brings epilogue ops to it; None for anything else (left to Inductor)."""
    config = internals.config
    if not config.benchmark_epilogue_fusion or config.multi_kernel_hints:
        return None
    if not node1.is_template() or node2.is_template():
        return None
    multi = node1.get_template_node()
    if not isinstance(multi, internals.MultiTemplateBuffer):
        return None
    note = selection_notes.noted(str(multi.get_name()))
    if note is None:
        return None
    snode = next((n for n in node1.get_nodes() if getattr(n, "node", None) is multi), None)
    if snode is None:
        return None
    if any(_fused_by_other_means(c) for c in multi.choices):
        return None
    offered = list(node2.get_nodes())
    group = [*node1.get_nodes(), *offered]
    nodes, _fused, gemm = fusion_outcome.epilogue_nodes(snode, group, [])
    if not nodes or any(not fusion_outcome.origins(n) & set(nodes) for n in offered):
        return None  # nothing of the GEMM's epilogue, or a sibling fused alongside
    identity = {"steps": fusion_outcome.epilogue_steps(nodes, gemm),
                # what else changes the fused kernel: how many nodes each side holds, and
                # which of the offered nodes' results are read outside the fused kernel
                "nodes": [len(group) - len(offered), len(offered)],
                "stored": [_stored_outside(n, group) for n in offered]}
    return FusionAttempt(multi, note, [fusion_outcome.op_name(n) for n in nodes], identity)


def _fused_by_other_means(choice: Any) -> bool:
    """A choice Inductor fuses without a Triton template (torch 2.14's NVGEMM, swapped in
    by ``swap_as_nvgemm_caller``): its fused time would not be captured."""
    return "NVUniversalGemm" in type(choice).__name__


def _stored_outside(snode: Any, group: list[Any]) -> int:
    """How many of a node's results are read outside ``group`` (or are graph outputs)."""
    inside = {id(n) for n in group}
    count = 0
    for buf in snode.get_outputs():
        if any(id(getattr(user, "node", None)) not in inside for user in buf.users):
            count += 1
    return count


# ---- replay ---------------------------------------------------------------------------------
def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True)
class RecordedBenchmark:
    """A recorded fusion benchmark, checked: the templates Inductor compiled fused (in
    its order), the times of those that compiled, the epilogue kernel's time, and whether
    Inductor deferred the decision to its pending-fusion round."""

    attempted: tuple[str, ...]
    fused_ms: dict[str, float]
    epilogue_ms: float
    pending: bool


def recorded_benchmark(row: dict[str, Any]) -> RecordedBenchmark | None:
    """The checked contents of a recorded row, or None when it is not a valid fusion
    record (a DB's values are never trusted unchecked)."""
    epilogue = row.get("epilogue")
    if not isinstance(epilogue, dict) or epilogue.get("kind") != KIND:
        return None
    fused = epilogue.get("fused_ms")
    attempted = epilogue.get("attempted")
    pending = epilogue.get("pending")
    epilogue_ms = _finite(epilogue.get("epilogue_ms"))
    if not isinstance(fused, dict) or not isinstance(attempted, list) or \
            not isinstance(pending, bool) or epilogue_ms is None:
        return None
    if not all(isinstance(cid, str) for cid in attempted) or len(set(attempted)) != len(attempted):
        return None
    timings: dict[str, float] = {}
    for key, value in fused.items():
        ms = _finite(value)
        if not isinstance(key, str) or key not in attempted or ms is None:
            return None
        timings[key] = ms
    return RecordedBenchmark(tuple(attempted), timings, epilogue_ms, pending)


def templates_to_benchmark(timings: dict[Any, float], epilogue_ms: float) -> list[Any]:
    """The Triton templates Inductor compiles fused with the epilogue, given the GEMM-only
    timings and the epilogue kernel's time: by GEMM-only time, stopping at the first
    whose time is not below the GEMM-only winner's plus the epilogue's, at most
    ``max_epilogue_benchmarked_choices`` (``speedup_by_fusion``, benchmark path)."""
    if not timings:
        return []
    limit = min(timings.values()) + epilogue_ms
    picked: list[Any] = []
    for choice, ms in sorted(timings.items(), key=lambda item: item[1]):
        if not isinstance(choice, internals.TritonTemplateCaller):
            continue
        if ms >= limit:
            break
        picked.append(choice)
        if len(picked) >= internals.config.max_epilogue_benchmarked_choices:
            break
    return picked


@dataclass(frozen=True)
class Replay:
    """Inductor's decision from a record: fuse with ``template`` (None: not fused)."""

    template: Any | None
    fused_timings: dict[Any, float]
    pending: bool  # Inductor decided in its pending-fusion round (a callable)

    def apply(self, multi: Any) -> bool:
        """What Inductor's decision does to the buffer; True: fuse."""
        if self.template is None:
            return False
        multi.finalize_as_triton_caller(self.template)
        choice_timings = getattr(multi, "_choice_timings", None)
        if isinstance(choice_timings, dict):  # as Inductor leaves them after fusing
            choice_timings[None] = dict(self.fused_timings)
        return True


def replay(attempt: FusionAttempt, row: dict[str, Any]) -> Replay | None:
    """Inductor's decision from the recorded times, or None when the record cannot stand
    in for the benchmark: invalid, or Inductor would now compile other templates than the
    recorded ones (a template gone, other GEMM-only timings)."""
    recorded = recorded_benchmark(row)
    if recorded is None:
        return None
    multi = attempt.multi
    timings = multi.choice_timings()  # the GEMM-only timings (served: nothing benchmarked)
    if not timings:
        return None
    now = templates_to_benchmark(timings, recorded.epilogue_ms)
    if sorted(candidate_id(c) for c in now) != sorted(recorded.attempted):
        return None
    if not now:  # Inductor compiles nothing and does not fuse
        return Replay(None, {}, pending=False)
    by_id = {candidate_id(c): c for c in now}
    fused = {by_id[cid]: ms for cid, ms in recorded.fused_ms.items()}
    best = min(fused, key=fused.__getitem__) if fused else None
    gemm_ms = min(timings.values())
    fuse = best is not None and fused[best] < gemm_ms + recorded.epilogue_ms
    return Replay(best if fuse else None, fused, pending=recorded.pending)


# ---- record ---------------------------------------------------------------------------------
@dataclass
class _Capture:
    """What Inductor measured during one attempt."""

    multi: Any
    epilogue_ms: float | None = None
    fused: dict[Any, float] = field(default_factory=dict)
    caller: Any = None  # the template swapped in while the fused kernel is benchmarked
    attempted: list[Any] = field(default_factory=list)  # templates swapped in, in order
    pending: bool = False  # Inductor returned a callable (decided in its pending round)
    # the GEMM-only times are graph-replay times: the epilogue and fused kernels are timed
    # by graph replay too (fusion_timing.py), like with like
    graph: bool = False


_capture: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar(
    "inductor_flydsl_fusion_capture", default=None)


@contextlib.contextmanager
def _capturing(capture: _Capture) -> Iterator[None]:
    token = _capture.set(capture)
    try:
        yield
    finally:
        _capture.reset(token)


def decision_of(attempt: FusionAttempt, capture: _Capture, fused: bool) -> EpilogueDecision:
    """The row for an attempt Inductor benchmarked."""
    gemm = selection_notes.DECIDED.pick(attempt.multi.choices)  # GEMM-only times (feedback saver)
    winner = min(gemm, key=gemm.__getitem__) if gemm else None
    gemm_ms = gemm.get(winner) if winner is not None else None
    best = min(capture.fused, key=capture.fused.__getitem__) if capture.fused else None
    final = best if fused and best is not None else winner
    epilogue_ms = capture.epilogue_ms
    epilogue = {"kind": KIND, "ops": attempt.ops,
                "fused": attempt.ops if fused else [], "separate": [] if fused else attempt.ops,
                "steps": attempt.identity["steps"], "identity": attempt.identity,
                "attempted": [candidate_id(c) for c in capture.attempted],
                "fused_ms": {candidate_id(c): ms for c, ms in capture.fused.items()},
                "epilogue_ms": epilogue_ms, "gemm_ms": gemm_ms, "pending": capture.pending}
    unfused = gemm_ms + epilogue_ms if gemm_ms is not None and epilogue_ms is not None \
        else None
    fused_ms = capture.fused.get(best) if best is not None else None
    return EpilogueDecision(
        problem_id=attempt.note.problem.id, epilogue_id=attempt.epilogue_id,
        epilogue=epilogue,
        candidate_id=candidate_id(final) if final is not None else "",
        backend=backend_of(final) if final is not None else "",
        name=str(getattr(final, "name", "")), fused=fused,
        gemm_winner_id=candidate_id(winner) if winner is not None else "",
        gemm_ms=gemm_ms, fused_ms=fused_ms, unfused_ms=unfused,
        decided_by="speedup_by_fusion benchmarked: the fused template "
                   + ("beat" if fused else "did not beat")
                   + " the GEMM-only winner plus the epilogue kernel")


def _record(attempt: FusionAttempt, capture: _Capture, fused: bool) -> None:
    state = plugin_state.current()
    if state is None or capture.epilogue_ms is None:
        return  # nothing measured (an early exit inside Inductor's method)
    try:
        decision = decision_of(attempt, capture, fused)
        state.tuning_db.record_epilogue_decision(attempt.note.device, current_software(),
                                                 attempt.note.problem, decision)
        state.stats.bump("fusions_benchmarked")
    except Exception as exc:
        plugin_state.report_error("recording an epilogue-fusion benchmark", exc)


# ---- the wrapped scheduler methods -------------------------------------------------------------
def _original(name: str) -> Callable[..., Any]:
    return patches.original(_OWNER[name], name)


def _lookup(attempt: FusionAttempt) -> dict[str, Any] | None:
    state = plugin_state.current()
    if state is None:
        return None
    return state.tuning_db.epilogue_decision(attempt.note.device, current_software(),
                                             attempt.note.problem, attempt.epilogue_id)


def _replayable(scheduler: Any, node1: Any, node2: Any, attempt: FusionAttempt) -> bool:
    """Inductor's own early exits that compile nothing stay its own."""
    fused_nodes = [*node1.get_nodes(), *node2.get_nodes()]
    atomic = getattr(scheduler, "_any_atomic_add", None)
    conflict = getattr(scheduler, "_has_layout_conflict_for_template", None)
    if not callable(atomic) or not callable(conflict):
        return False
    return not atomic(fused_nodes) and not conflict(attempt.multi)


def _result_of(attempt: FusionAttempt, decided: Replay) -> Any:
    """The ``FusionResult`` Inductor would have returned: a callable for its
    pending-fusion round when it deferred the decision there, else the decision."""
    state = plugin_state.current()
    if state is not None:
        state.stats.bump("fusions_replayed")
    if not decided.pending:
        return internals.FusionResult.fuse(decided.apply(attempt.multi))
    return internals.FusionResult.from_callable(lambda: decided.apply(attempt.multi), None)


def speedup_by_fusion(self: Any, node1: Any, node2: Any) -> Any:
    original = _original("speedup_by_fusion")
    if plugin_state.current() is None:
        return original(self, node1, node2)
    try:
        attempt = find_attempt(node1, node2)
        if attempt is not None and _replayable(self, node1, node2, attempt):
            row = _lookup(attempt)
            decided = replay(attempt, row) if row is not None else None
            if decided is not None:
                return _result_of(attempt, decided)
        elif attempt is not None:
            attempt = None  # Inductor's early exit: nothing to record
    except Exception as exc:
        plugin_state.report_error("replaying an epilogue-fusion decision", exc)
        attempt = None
    if attempt is None:
        return original(self, node1, node2)
    capture = _Capture(attempt.multi,
                       graph=timing_parity.timing_mode_of(attempt.multi.choices) == GRAPH)
    with _capturing(capture):
        result = original(self, node1, node2)
    decide = getattr(result, "callable_fn", None)
    if not callable(decide):  # decided at once (no template compiled, or an early exit)
        _record(attempt, capture, bool(getattr(result, "should_fuse", False)))
        return result
    capture.pending = True

    def benchmark_and_record() -> bool:
        with _capturing(capture):
            fused = decide()
        _record(attempt, capture, bool(fused))
        return fused

    try:
        return internals.FusionResult.from_callable(benchmark_and_record,
                                                    getattr(result, "future", None))
    except Exception as exc:
        plugin_state.report_error("recording an epilogue-fusion benchmark", exc)
        return result


def _milliseconds(result: Any) -> float | None:
    """The time in a benchmark's ``(ms, path)`` result (None if it is not one)."""
    return _finite(result[0]) if isinstance(result, tuple) and result else None


def benchmark_fused_nodes(self: Any, nodes: Any, *args: Any, **kwargs: Any) -> Any:
    capture = _capture.get()
    result = None
    if capture is not None and capture.graph:  # like the graph-timed GEMM
        result = fusion_timing.time_nodes_by_graph(self, nodes)
    if result is None:
        result = _original("benchmark_fused_nodes")(self, nodes, *args, **kwargs)
    if capture is not None and capture.caller is None:  # the epilogue kernel alone
        capture.epilogue_ms = _milliseconds(result)
    return result


def benchmark_codegened_module(self: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
    capture = _capture.get()
    if capture is not None and capture.graph:  # like the graph-timed GEMM
        device = args[0] if args else kwargs.get("device")
        result = fusion_timing.time_module_by_graph(module, device)
    else:
        result = _original("benchmark_codegened_module")(self, module, *args, **kwargs)
    if capture is not None and capture.caller is not None:  # a fused template
        ms = _milliseconds(result)
        if ms is not None:
            capture.fused[capture.caller] = ms
    return result


@contextlib.contextmanager
def swap_as_triton_caller(self: Any, caller: Any) -> Iterator[None]:
    capture = _capture.get()
    mine = capture is not None and capture.multi is self
    with _original("swap_as_triton_caller")(self, caller):
        previous = capture.caller if mine else None
        if mine:
            capture.caller = caller
            if caller not in capture.attempted:
                capture.attempted.append(caller)
        try:
            yield
        finally:
            if mine:
                capture.caller = previous


_WRAPPED = {
    ("Scheduler", "speedup_by_fusion"): speedup_by_fusion,
    ("Scheduler", "benchmark_fused_nodes"): benchmark_fused_nodes,
    ("Scheduler", "benchmark_codegened_module"): benchmark_codegened_module,
    ("MultiTemplateBuffer", "swap_as_triton_caller"): swap_as_triton_caller,
}


_OWNER = {name: owner for owner, name in _WRAPPED}


def install() -> None:
    """Swap the wrapped methods in (``patches.py``; each ``enable``, undone by
    :func:`uninstall` at ``disable``). While they are in but the plugin is off, they pass
    through to Inductor's own."""
    for (owner, name), wrapper in _WRAPPED.items():
        patches.apply(owner, name, wrapper)


def installed() -> bool:
    """Whether the wrapped methods are in place."""
    return all(patches.is_applied(owner, name) for owner, name in _WRAPPED)


def uninstall() -> None:
    """Put Inductor's own methods back."""
    for owner, name in _WRAPPED:
        patches.restore(owner, name)
