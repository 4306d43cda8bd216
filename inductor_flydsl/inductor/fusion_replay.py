"""Deferred epilogue-fusion decisions, recorded once and replayed from their timings.

On a GPU with ``config.benchmark_epilogue_fusion`` (Inductor's default), a GEMM selection
with Triton templates is deferred (``MultiTemplateBuffer``) and decided by the scheduler:
``Scheduler.speedup_by_fusion(node1, node2)`` compiles the best Triton template with the
epilogue ``node2`` fused and benchmarks it, benchmarks the epilogue kernel alone, and fuses
when ``fused < GEMM-only winner + epilogue``. Serving the GEMM-only timings does not reach
that step, so a warm compile still compiled and benchmarked there (issue 33, point 2).

This module wraps that one scheduler method (no extension point offers the decision; the
class attribute is swapped while the plugin is on, like the selector's class):

- **Record.** With no record of the attempt, Inductor's own method runs unchanged; the
  timings it measures are captured (the epilogue kernel alone from
  ``benchmark_fused_nodes``, each fused template from ``benchmark_codegened_module`` under
  ``swap_as_triton_caller``) and recorded with its outcome, in ``epilogue_decisions``
  under the attempt's own id (``kind: fusion_benchmark``): the GEMM's problem and the
  exact identity of the epilogue being fused (``epilogues.epilogue_steps``).
- **Replay.** With a record of the same attempt on the same device and software (values
  validated first), Inductor's rule is applied to the recorded timings: the fastest
  recorded fused template against the GEMM-only winner's time (Inductor's own, served)
  plus the recorded epilogue time. Fusing finalizes the buffer to that template (and sets
  its timings to the fused ones, as Inductor does); nothing is compiled or benchmarked
  for the decision. A recorded template that is no longer a choice, a value that fails
  validation, or any error: Inductor's own method decides (and its result is recorded).

Only the benchmarking path is replayed: prologue fusion, atomic-add epilogues,
``multi_kernel_hints`` and ``benchmark_epilogue_fusion = False`` (pipelined autotuning,
decided from register counts) stay Inductor's own, as does the layout-conflict check,
which compiles nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..db.store import EpilogueDecision
from ..keys import stable_id
from ..software import current_software
from . import epilogues, internals, plugin_state
from .candidates import backend_of, candidate_id

KIND = "fusion_benchmark"


@dataclass(frozen=True)
class FusionAttempt:
    """One call of ``speedup_by_fusion``: a deferred GEMM and the epilogue offered to it."""

    multi: Any  # the MultiTemplateBuffer
    note: epilogues.NotedSelection
    ops: list[str]
    steps: list[dict[str, Any]]

    @property
    def epilogue_id(self) -> str:
        return attempt_id(self.steps)


def attempt_id(steps: list[dict[str, Any]]) -> str:
    """The id a fusion attempt is recorded under (apart from the observer's rows)."""
    return stable_id({KIND: steps})


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
    note = epilogues.noted(str(multi.get_name()))
    if note is None:
        return None
    snode = next((n for n in node1.get_nodes() if getattr(n, "node", None) is multi), None)
    if snode is None:
        return None
    group = [*node1.get_nodes(), *node2.get_nodes()]
    nodes, _fused, gemm = epilogues.epilogue_nodes(snode, group, [])
    if not nodes:
        return None
    steps = epilogues.epilogue_steps(nodes, gemm)
    return FusionAttempt(multi, note, [epilogues.op_name(n) for n in nodes], steps)


# ---- replay ---------------------------------------------------------------------------------
def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def recorded_timings(row: dict[str, Any]) -> tuple[dict[str, float], float] | None:
    """The fused timings by candidate id and the epilogue's time from a recorded row, or
    None when the row is not a valid fusion record (never trusted unchecked)."""
    epilogue = row.get("epilogue")
    if not isinstance(epilogue, dict) or epilogue.get("kind") != KIND:
        return None
    fused = epilogue.get("fused_ms")
    epilogue_ms = _finite(epilogue.get("epilogue_ms"))
    if not isinstance(fused, dict) or epilogue_ms is None:
        return None
    timings: dict[str, float] = {}
    for key, value in fused.items():
        ms = _finite(value)
        if not isinstance(key, str) or ms is None:
            return None
        timings[key] = ms
    return timings, epilogue_ms


def replay(attempt: FusionAttempt, row: dict[str, Any]) -> bool | None:
    """Inductor's decision from the recorded timings (True: fuse, the buffer finalized to
    the fastest fused template); None when the record cannot stand in for the benchmark."""
    recorded = recorded_timings(row)
    if recorded is None:
        return None
    fused_by_id, epilogue_ms = recorded
    multi = attempt.multi
    by_id = {candidate_id(c): c for c in multi.choices}
    if any(cid not in by_id for cid in fused_by_id):
        return None  # a recorded template is no longer offered: benchmark again
    fused = {by_id[cid]: ms for cid, ms in fused_by_id.items()}
    timings = multi.choice_timings()  # the GEMM-only timings (served: nothing benchmarked)
    if not timings:
        return None
    gemm_ms = min(timings.values())
    if not fused:
        return False  # Inductor compiled no fused template: it did not fuse
    best = min(fused, key=fused.__getitem__)
    if not fused[best] < gemm_ms + epilogue_ms:
        return False
    multi.finalize_as_triton_caller(best)
    choice_timings = getattr(multi, "_choice_timings", None)
    if isinstance(choice_timings, dict):  # as Inductor leaves them after fusing
        choice_timings[None] = fused
    return True


# ---- record ---------------------------------------------------------------------------------
@dataclass
class _Capture:
    """What Inductor measured during one attempt."""

    multi: Any
    epilogue_ms: float | None = None
    fused: dict[Any, float] = field(default_factory=dict)
    caller: Any = None  # the template swapped in while the fused kernel is benchmarked


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
    gemm = epilogues.DECIDED.pick(attempt.multi.choices)  # GEMM-only times (feedback saver)
    winner = min(gemm, key=gemm.__getitem__) if gemm else None
    gemm_ms = gemm.get(winner) if winner is not None else None
    best = min(capture.fused, key=capture.fused.__getitem__) if capture.fused else None
    final = best if fused and best is not None else winner
    epilogue_ms = capture.epilogue_ms
    epilogue = {"kind": KIND, "ops": attempt.ops,
                "fused": attempt.ops if fused else [], "separate": [] if fused else attempt.ops,
                "steps": attempt.steps,
                "fused_ms": {candidate_id(c): ms for c, ms in capture.fused.items()},
                "epilogue_ms": epilogue_ms, "gemm_ms": gemm_ms}
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
_originals: dict[str, Any] = {}


def _original(name: str) -> Callable[..., Any]:
    return _originals[name]


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
                state = plugin_state.current()
                if state is not None:
                    state.stats.bump("fusions_replayed")
                return internals.FusionResult.fuse(decided)
        elif attempt is not None:
            attempt = None  # Inductor's early exit: nothing to record
    except Exception as exc:
        plugin_state.report_error("replaying an epilogue-fusion decision", exc)
        attempt = None
    if attempt is None:
        return original(self, node1, node2)
    capture = _Capture(attempt.multi)
    with _capturing(capture):
        result = original(self, node1, node2)
    decide = getattr(result, "callable_fn", None)
    if not callable(decide):  # decided at once: nothing benchmarked for fusion
        return result

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
    result = _original("benchmark_fused_nodes")(self, nodes, *args, **kwargs)
    capture = _capture.get()
    if capture is not None and capture.caller is None:  # the epilogue kernel alone
        capture.epilogue_ms = _milliseconds(result)
    return result


def benchmark_codegened_module(self: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
    result = _original("benchmark_codegened_module")(self, module, *args, **kwargs)
    capture = _capture.get()
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


def install() -> None:
    """Swap the wrapped methods in (once per process; they pass through while the plugin
    is off)."""
    for (owner, name), wrapper in _WRAPPED.items():
        cls = getattr(internals, owner)
        current = cls.__dict__.get(name)
        if current is wrapper:
            continue
        _originals[name] = current
        wrapper.__wrapped__ = current  # type: ignore[attr-defined]  # internals reads its source
        setattr(cls, name, wrapper)


def installed() -> bool:
    """Whether the wrapped methods are in place."""
    return all(getattr(internals, owner).__dict__.get(name) is wrapper
               for (owner, name), wrapper in _WRAPPED.items())


def uninstall() -> None:
    """Put Inductor's own methods back."""
    for (owner, name), wrapper in _WRAPPED.items():
        cls = getattr(internals, owner)
        if cls.__dict__.get(name) is wrapper and name in _originals:
            setattr(cls, name, _originals[name])
