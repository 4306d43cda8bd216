"""Recording what Inductor measured and chose: every benchmarked candidate's result
(with the finalists' re-measured spread), the winner Inductor then picked, and, from the
epilogue observer, what the scheduler finally ran around each GEMM."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...db.store import STATUS_FAILED, STATUS_OK, CandidateResult, EpilogueDecision
from ...problems.problem import InvalidProblem, Problem
from ...provenance.software import current_software
from ...telemetry.counters import Decision
from ..adapter import plugin_state
from ..adapter.choice_state import state_of
from ..adapter.plugin_state import PluginState, device_of, log, report_error
from ..timing.remeasure import with_confidence
from . import selection_notes, serving
from .candidates import backend_of, candidate_id, config_of
from .gemm_ops import is_gemm_op
from .selection import (
    PendingRecord,
    SelectionContext,
    current_selection,
    hint_override,
    key_problem,
)


def _failed_result(choice: Any, status: str, error: str) -> CandidateResult:
    return CandidateResult(candidate_id(choice), backend_of(choice), str(choice.name),
                           config_of(choice), None, status=status, error=error)


def _result_of(choice: Any, timing: float) -> CandidateResult:
    plugin = state_of(choice)
    if plugin is not None and plugin.failure is not None:
        return _failed_result(choice, *plugin.failure)
    ok = isinstance(timing, int | float) and math.isfinite(timing)
    return CandidateResult(candidate_id(choice), backend_of(choice), str(choice.name),
                           config_of(choice), float(timing) if ok else None,
                           status=STATUS_OK if ok else STATUS_FAILED,
                           error="" if ok else "benchmark failed (inf time)",
                           measured_ms=serving.MEASURED.get(choice) if ok else None)


def save_feedback(timings: dict[Any, float], name: str, input_nodes: Any,
                  choices: Sequence[Any], *_more: Any, **_named: Any) -> None:
    """Inductor's feedback saver: the timings it selects with (served or benchmarked).
    Every candidate it benchmarked is recorded once its choice is known. Inductor passes
    two more arguments (a profiling thunk and the precompile times, unused here); any it
    adds later are accepted too, so a new torch cannot make the call itself fail."""
    state = plugin_state.current()
    if state is None or not timings or not is_gemm_op(name):
        return
    if hint_override.get() is not None:
        return  # timings at another size hint than the problem key's
    try:
        for choice, ms in timings.items():
            selection_notes.DECIDED.set(choice, float(ms))
        measured = [c for c in timings if c not in serving.SERVED]
        ctx = current_selection.get()
        if ctx is not None and ctx.name != name:
            ctx = None  # not this selection's context
        failed = list(ctx.precompile_failed) if ctx is not None else []
        if not measured and not failed:
            return  # every time was served from the DB: nothing new to record
        layout = next(iter(timings)).layout
        try:
            problem = ctx.problem if ctx is not None and ctx.problem is not None else \
                key_problem(name, input_nodes, layout, choices)
        except InvalidProblem:
            return  # refused (and counted) when the selection started
        results = [_result_of(choice, timings[choice]) for choice in measured]
        state.stats.bump("benchmarked")
        prior = ctx.prior if ctx is not None else None
        confidence = None
        if measured and state.tuning_db.can_write():  # finalists re-measured: spread, load
            gen_fns = ctx.input_gen_fns if ctx is not None else None
            mine = {c: timings[c] for c in measured}
            results, confidence = with_confidence(
                results, measured, mine, serving.MEASURED.pick(measured), input_nodes,
                layout, gen_fns)
        results += [_failed_result(c, STATUS_FAILED,
                                   "precompile failed (Inductor's log says why)")
                    for c in failed if c not in timings]
        if ctx is not None:  # a partial hit's served results, recorded with the new ones
            new = {r.candidate_id for r in results}
            results += [r for r in ctx.carried if r.candidate_id not in new]
        pending = PendingRecord(device_of(layout), problem, results, confidence, prior)
        if ctx is not None:
            ctx.pending = pending  # recorded when Inductor has made its choice
        else:  # Inductor asked for the timings later: the choice is deferred to fusion
            best = min(timings, key=timings.__getitem__)
            _record(state, pending, best, deferred=True)
    except Exception as exc:
        report_error("recording autotune results", exc)


def finish_selection(ctx: SelectionContext, result: Any) -> None:
    """After Inductor chose: record the pending results with its choice, and note the
    selection for the epilogue observer."""
    state = plugin_state.current()
    if state is None or not is_gemm_op(ctx.name):
        return
    try:
        chosen = result[1] if isinstance(result, tuple) and len(result) == 2 else None
        if ctx.pending is not None:
            _record(state, ctx.pending, chosen, deferred=chosen is None)
        elif ctx.source is not None and ctx.problem is not None:
            _add_decision(state, ctx.problem, chosen, ctx.source)
        if ctx.problem is not None and isinstance(result, tuple) and result:
            selection_notes.note_selection(result[0], chosen, ctx.problem,
                                     device_of(ctx.layout), served=ctx.source is not None)
    except Exception as exc:
        report_error("recording Inductor's choice", exc)


def _add_decision(state: PluginState, problem: Problem, chosen: Any, source: str) -> None:
    state.stats.add_decision(Decision(
        problem=problem.summary(), problem_id=problem.id,
        candidate_id=candidate_id(chosen) if chosen is not None else "deferred",
        backend=backend_of(chosen) if chosen is not None else "deferred", source=source))


def _record(state: PluginState, pending: PendingRecord, chosen: Any, deferred: bool) -> None:
    selected = candidate_id(chosen) if chosen is not None else None
    prior = pending.prior
    if state.tuning_db.record_selection(pending.device, current_software(), pending.problem,
                                        pending.results, pending.confidence,
                                        prior.to_json() if prior is not None else None,
                                        selected=selected, deferred=deferred):
        state.stats.bump("recorded")
    source = f"prior:{prior.source}" if prior is not None else "autotune"
    _add_decision(state, pending.problem, chosen, source)


def record_epilogue(note: selection_notes.NotedSelection, decision: EpilogueDecision) -> None:
    """The epilogue observer's sink: count and record what the scheduler ran."""
    state = plugin_state.current()
    if state is None:
        return
    outcome = state.tuning_db.record_epilogue_decision(note.device, current_software(),
                                                      note.problem, decision)
    state.stats.add_epilogue({
        "problem": note.problem.summary(), "problem_id": note.problem.id,
        "epilogue": decision.epilogue["ops"], "fused": decision.fused,
        "candidate_id": decision.candidate_id, "backend": decision.backend,
        "served": note.served, "record": outcome})
    if note.served and outcome == "changed":
        state.stats.bump("epilogue_changed")
        log.warning("inductor_flydsl: %s: the served compile ran %s for the epilogue %s, "
                    "not the recorded decision", note.problem.summary(),
                    decision.name or decision.candidate_id, decision.epilogue["ops"])
