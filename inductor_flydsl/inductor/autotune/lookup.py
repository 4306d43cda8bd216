"""Inductor's preprocessing step for every GEMM selection: add the plugin backends'
candidates, time every choice the way the compiled graph will run them
(``timing_parity.py``), then look the problem up in the tuning DB and serve an exact
record's timings (or, opt-in, narrow to a prior's short list or a dynamic-M bucket's
winner), then let the plugin candidates that will really be benchmarked prepare (FlyDSL
starts its builds)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ...db.store import STATUS_OK, CandidateResult
from ...priors import find_prior
from ...problems import routing
from ...problems.buckets import bucket_problem, family_id
from ...problems.problem import InvalidProblem, Problem
from ...provenance.software import current_software
from ...telemetry.counters import Decision
from ...telemetry.user_warnings import warn_once
from ..adapter import plugin_state
from ..adapter.choice_state import state_of
from ..adapter.plugin_state import PluginState, device_of, report_error
from ..timing.timing_parity import selection_timing, time_like_the_graph
from . import serving
from .candidates import backend_of, candidate_id, config_of
from .gemm_ops import is_gemm_op
from .selection import SelectionContext, current_selection, problem_of
from .short_list import short_list

log = logging.getLogger("inductor_flydsl")


def preprocess_choices(choices: list[Any]) -> list[Any]:
    """Add plugin choices, then serve the recorded timings of an exact DB record (or,
    opt-in, narrow to a prior's short list or a bucket's winner); then let plugin choices
    prepare (FlyDSL starts its builds) for what Inductor will really benchmark."""
    state, ctx = plugin_state.current(), current_selection.get()
    if state is None or ctx is None or not choices or not is_gemm_op(ctx.name):
        return choices
    try:  # decided before the providers are asked: their offering ranks by it
        ctx.timing = selection_timing(ctx.layout.device, state.providers)
    except Exception as exc:
        report_error("choosing how choices are timed", exc)
    for provider in list(state.providers):
        try:
            choices = choices + provider(ctx.name, ctx.input_nodes, ctx.layout, choices)
        except Exception as exc:
            report_error("adding plugin choices", exc)
    if ctx.timing is not None:  # every choice timed as the compiled graph runs it
        ctx.timing = time_like_the_graph(choices, ctx.timing) or ctx.timing
    final = choices
    # nothing to choose between (no lookup, no miss), or re-measuring
    # (INDUCTOR_FLYDSL_REUSE=0: benchmark, then record)
    if len(choices) >= 2 and state.tuning_db.settings.reuse:
        try:
            final = _reuse(state, ctx, choices)
        except Exception as exc:
            report_error("tuning DB lookup", exc)
            final = preselected(choices)
    elif len(choices) >= 2:
        final = preselected(choices)
    _prepare(serving.unserved(final))
    return final


def preselected(choices: list[Any], recorded: frozenset[str] = frozenset()) -> list[Any]:
    """``choices`` without the plugin candidates the performance model leaves out (top-k
    preselection, ``flydsl_backend/offer/offering.offered_configs``) and no record serves
    (``recorded``: candidate ids of the record being served): those are never built or
    benchmarked. Inductor's own choices always stay."""
    kept = []
    for choice in choices:
        plugin = state_of(choice)
        if (plugin is not None and plugin.preselected is False
                and candidate_id(choice) not in recorded):
            continue
        kept.append(choice)
    return kept


def _prepare(choices: Sequence[Any]) -> None:
    groups: dict[int, tuple[Callable[[list[Any]], None], list[Any]]] = {}
    for choice in choices:
        plugin = state_of(choice)
        prepare = plugin.prepare if plugin is not None else None
        if prepare is not None:
            groups.setdefault(id(prepare), (prepare, []))[1].append(choice)
    for prepare, selected in groups.values():
        try:
            prepare(selected)
        except Exception as exc:
            report_error("preparing plugin choices", exc)


def _refuse(state: PluginState, ctx: SelectionContext, reason: str) -> None:
    """The problem is outside the definition of a valid problem: not looked up, never
    written; the reason goes to ``stats()['refusals']`` and to the DB's misses table."""
    state.stats.add_refusal(ctx.name, reason)
    warn_once(f"refused:{ctx.name}:{reason}",
              f"inductor_flydsl: {ctx.name} is not looked up or recorded: {reason}")
    state.tuning_db.record_refusal(device_of(ctx.layout), current_software(), ctx.name,
                                   reason)


def _reuse(state: PluginState, ctx: SelectionContext, choices: list[Any]) -> list[Any]:
    try:
        problem = problem_of(ctx, choices)
    except InvalidProblem as exc:
        _refuse(state, ctx, str(exc))
        return preselected(choices)
    ctx.problem = problem
    device, software = device_of(ctx.layout), current_software()
    db = state.tuning_db
    # A grouped GEMM measured under several token routings: the best worst case, served
    # alone (by design: Inductor benchmarks one synthetic routing only).
    if routing.active() is None and problem.op == routing.GROUPED_OP:
        routed = db.lookup_routed(device, software, problem)
        matching = [c for c in choices if routed is not None
                    and candidate_id(c) == routed.candidate_id]
        if routed is not None and matching:
            return _use(state, problem, matching[0], routed.candidate_id, routed.backend,
                        f"db:{routed.source}", "hits")
    # A dynamic problem is looked up under its own key (symbolic dims, exact hints):
    # the selection a dynamic compile made and recorded, for the same symbolic kernel.
    selection = db.exact_selection(device, software, problem)
    if selection is not None:
        choices = preselected(choices, frozenset(r.candidate_id for r in selection.results))
        timings = serving.recorded_timings(selection, choices)
        if timings and serving.servable(timings):
            serving.serve(timings)
            ctx.source = f"db:{selection.source}"
            if len(timings) == len(choices):
                state.stats.bump("dynamic_hits" if problem.dynamic else "hits")
            else:  # candidates the record lacks (a backend turned on since) are benchmarked
                state.stats.bump("partial_hits")
                ctx.carried = _carried(selection, choices)
            log.debug("inductor_flydsl: %s: %d of %d candidates served from %s",
                      problem.summary(), len(timings), len(choices), selection.source)
            return choices
        state.stats.bump("stale")
        log.info("inductor_flydsl: the record of %s has none of the current candidates; "
                 "autotuning normally", problem.summary())
        return choices
    state.stats.bump("misses")
    log.debug("inductor_flydsl: miss %s", problem.summary())
    db.record_miss(device, software, problem)  # a dynamic miss: what `sweep --from-misses` tunes
    if db.settings.use_priors:  # a prior's measured ranking beats the model's preselection
        prior = find_prior(db, device, software, problem)
        short = short_list(prior, choices, db.settings.prior_top_k) if prior else None
        if prior is not None and short is not None:
            state.stats.bump("prior_hits")
            ctx.prior = prior
            log.debug("inductor_flydsl: %s: short list of %d from the prior %s",
                      problem.summary(), len(short), prior.describe())
            return short
    choices = preselected(choices)
    if db.settings.use_buckets:
        return _bucket_winner(state, problem, device, software, choices)
    return choices


def _carried(selection: Any, choices: Sequence[Any]) -> list[CandidateResult]:
    """The recorded results of the candidates a partial hit serves, to record again beside
    the new measurements (under this software, in the user's DB): the next compile then
    finds one complete record and is served in full, whichever candidate wins. Each says
    where it came from (in ``error``, which an ok row otherwise leaves empty)."""
    ids = {candidate_id(c) for c in choices}
    note = f"carried from {selection.source} (recorded {selection.recorded_at})"
    return [dataclasses.replace(r, error=note if r.status == STATUS_OK else r.error)
            for r in selection.results if r.candidate_id in ids]


def _bucket_winner(state: PluginState, problem: Problem, device: Any, software: Any,
                   choices: list[Any]) -> list[Any]:
    """Opt-in (``INDUCTOR_FLYDSL_BUCKETS=1``): the winner recorded at M's dynamic-M
    bucket, for an M never measured."""
    bucket = bucket_problem(problem)
    if bucket is None:
        return choices
    bucket_problem_, m = bucket
    bucket_winner = state.tuning_db.lookup(device, software, bucket_problem_)
    if bucket_winner is None:
        return choices
    family = family_id(bucket_winner.backend, bucket_winner.name, bucket_winner.config)
    for choice in choices:
        if family_id(backend_of(choice), str(choice.name), config_of(choice)) != family:
            continue
        source = f"db-bucket:M={m}:{bucket_winner.source}"
        if bucket_winner.backend == "flydsl":
            # A FlyDSL kernel is never used at a size it was not validated at: it races
            # ATen (validation runs in its benchmark) instead of being handed over alone.
            aten = [c for c in choices if backend_of(c) == "aten"]
            state.stats.bump("bucket_hits")
            log.debug("inductor_flydsl: bucket M=%d FlyDSL winner %s re-validated against "
                      "ATen for %s", m, choice.name, problem.summary())
            return [choice, *aten] if aten else choices
        return _use(state, problem, choice, candidate_id(choice), bucket_winner.backend,
                    source, "bucket_hits")
    return choices


def _use(state: PluginState, problem: Problem, choice: Any, cand_id: str, backend: str,
         source: str, counter: str) -> list[Any]:
    state.stats.bump(counter)
    state.stats.add_decision(Decision(problem=problem.summary(), problem_id=problem.id,
                                      candidate_id=cand_id, backend=backend, source=source))
    log.debug("inductor_flydsl: %s %s -> %s (%s)", counter, problem.summary(), choice.name,
              source)
    return [choice]
