"""The hooks the plugin puts into TorchInductor's autotuning.

The rule they keep: with the plugin on, the final code uses the kernels plain Inductor
would pick; recorded timings only replace benchmarking (``serving.py``).

``AlgorithmSelectorCache`` (behind every ``autotune_select_algorithm``) is the one place
that sees the op name, the input nodes, the output layout and the final choice list
together, and the one that benchmarks. The plugin extends that class and swaps the class
of Inductor's existing selector object (its state, feedback savers and preprocessing
functions stay as they are). The subclass remembers the call's context, hands Inductor
recorded timings in place of benchmarking (``autotune``) and builds nothing for a served
candidate (``make_precompile_fn``); everything else is Inductor's public registration
functions:

- a preprocessing function (runs after Inductor's own filters): adds plugin choices
  (FlyDSL, when its backend token is on and the problem is eligible), then looks the
  problem up in the tuning DB; when an exact record holds (every result still holds for
  this software, ``validity.py``), every candidate it has a result for is served its
  recorded time. The choice list is not narrowed: Inductor decides among all of them as
  it would after benchmarking. Opt-in approximations narrow it instead (a prior's short
  list after an upgrade, ``INDUCTOR_FLYDSL_PRIORS=1``; a dynamic-M bucket's winner,
  ``INDUCTOR_FLYDSL_BUCKETS=1``);
- a feedback saver: after Inductor benchmarked, records every candidate it measured, with
  the time Inductor selected with and the time the benchmark returned; the winner is the
  choice Inductor then made (``PluginSelector.__call__`` sees it), or, when Inductor
  deferred the choice to epilogue-fusion benchmarking, the GEMM-only winner, with what the
  scheduler finally ran recorded by ``epilogues.py``.

Every hook swallows its own errors (counted in ``stats()['errors']``, logged once): the
plugin never makes a compile fail that plain Inductor would have completed.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import routing
from ..buckets import bucket_problem, family_id
from ..counters import PROCESS_STATS, Decision
from ..db.layered import LayeredTuningDB, warn_once
from ..db.store import STATUS_FAILED, STATUS_OK, CandidateResult, EpilogueDecision
from ..device import describe_device
from ..priors import Prior, find_prior
from ..problem import InvalidProblem, Problem, checked
from ..software import current_software
from . import epilogue_fusion, epilogues, internals, serving
from .candidates import backend_of, candidate_id, config_of
from .choice_provider import ChoiceProvider
from .choice_state import state_of
from .gemm_ops import is_gemm_op
from .ir_problem import problem_from_ir
from .remeasure import with_confidence
from .short_list import short_list

log = logging.getLogger("inductor_flydsl")


@dataclass
class PendingRecord:
    """A selection's results, recorded once Inductor's choice is known."""

    device: Any
    problem: Problem
    results: list[CandidateResult]
    confidence: Any
    prior: Prior | None


@dataclass
class SelectionContext:
    name: str
    input_nodes: Sequence[Any]
    layout: Any
    input_gen_fns: Any = None  # Inductor's own benchmark-input generators, if any
    prior: Prior | None = None  # set when a prior's short list was handed to Inductor
    problem: Problem | None = None  # the DB key, once the preprocessing step made it
    source: str | None = None  # where served timings came from ("db:<path>"), if any
    pending: PendingRecord | None = None  # set by the feedback saver
    # a partial hit: the served candidates' recorded results, recorded again with the
    # new measurements so the next compile is served in full (``_carried``)
    carried: list[CandidateResult] = dataclasses.field(default_factory=list)
    # candidates whose precompile failed (Inductor marked them failed and dropped them)
    precompile_failed: list[Any] = dataclasses.field(default_factory=list)


_current: contextvars.ContextVar[SelectionContext | None] = contextvars.ContextVar(
    "inductor_flydsl_selection", default=None)
# The size hint Inductor autotunes at, when it is not the graph's own (multi-kernel hints:
# ``config.multi_kernel_hints``): the problem key holds the graph's hint, so timings at
# another one are neither served nor recorded.
_hint_override: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "inductor_flydsl_hint_override", default=None)


class PluginState:
    """What an enabled plugin holds: its DBs, counters and choice providers."""

    def __init__(self, tuning_db: LayeredTuningDB) -> None:
        self.tuning_db = tuning_db
        self.stats = PROCESS_STATS
        self.providers: list[ChoiceProvider] = []


_state: PluginState | None = None


def _report_error(where: str, exc: BaseException) -> None:
    if _state is not None:
        _state.stats.bump("errors")
    warn_once(f"hook:{where}:{type(exc).__name__}",
              f"inductor_flydsl: {where} failed ({type(exc).__name__}: {exc}); "
              "continuing with Inductor's own choices")
    log.debug("inductor_flydsl %s failed", where, exc_info=exc)


class PluginSelector(internals.AlgorithmSelectorCache):
    """Inductor's selector, remembering the op name and inputs of the current call,
    serving recorded timings in place of benchmarking, and recording Inductor's choice."""

    def __call__(self, name: str, choices: list[Any], input_nodes: Any, layout: Any,
                 *args: Any, **kwargs: Any) -> Any:
        gen_fns = args[0] if args else kwargs.get("input_gen_fns")
        args, kwargs, gen_fns = _with_routing(name, input_nodes, args, kwargs, gen_fns)
        ctx = SelectionContext(name, input_nodes, layout, gen_fns)
        token = _current.set(ctx)
        try:
            result = super().__call__(name, choices, input_nodes, layout, *args, **kwargs)
        finally:
            _current.reset(token)
        _finish_selection(ctx, result)
        return result

    def autotune(self, name: Any, input_nodes: Any, layout: Any, input_gen_fns: Any,
                 choices: Any, *args: Any, **kwargs: Any) -> dict[Any, float]:
        """Inductor's benchmark of ``choices``, except that a served candidate gets its
        recorded time instead (``serving.py``); what is benchmarked is remembered."""
        if _hint_override.get() is not None or kwargs.get("hint_override") is not None:
            return super().autotune(name, input_nodes, layout, input_gen_fns, choices,
                                    *args, **kwargs)
        served = serving.SERVED.pick(choices)
        todo = [c for c in choices if c not in served]
        measured: dict[Any, float] = {}
        if todo:
            measured = super().autotune(name, input_nodes, layout, input_gen_fns, todo,
                                        *args, **kwargs)
            for choice, ms in measured.items():
                serving.MEASURED.set(choice, float(ms))
        timings = {**served, **measured}
        return {c: timings[c] for c in choices if c in timings}

    def do_autotuning(self, *args: Any, **kwargs: Any) -> Any:
        """Inductor's autotune of one selection at one size hint (its feedback savers run
        inside): remembers a hint other than the graph's own."""
        token = _hint_override.set(kwargs.get("hint_override"))
        try:
            return super().do_autotuning(*args, **kwargs)
        finally:
            _hint_override.reset(token)

    def make_precompile_fn(self, choices: Any, *args: Any, **kwargs: Any) -> Any:
        """Precompiles only what will be benchmarked: a served candidate is never built
        for benchmarking (the one Inductor picks is built by its final codegen). The
        candidates whose precompile failed (Inductor marks them ``failed`` and drops
        them) are remembered, so they are recorded as failed and not built again."""
        todo = serving.unserved(choices)
        precompile = super().make_precompile_fn(todo, *args, **kwargs)
        ctx = _current.get()
        if ctx is None:
            return precompile

        def precompile_and_note(*a: Any, **k: Any) -> Any:
            try:
                return precompile(*a, **k)
            finally:
                ctx.precompile_failed = [c for c in todo if getattr(c, "failed", False)]

        return precompile_and_note


def _with_routing(name: str, input_nodes: Any, args: tuple, kwargs: dict,
                  gen_fns: Any) -> tuple[tuple, dict, Any]:
    """A sweep measuring a grouped GEMM under a token routing (``routing.set_active``):
    Inductor's benchmark offsets are replaced by that routing's."""
    chosen = routing.active()
    index = routing.offs_index(name, input_nodes) if chosen else None
    if chosen is None or index is None:
        return args, kwargs, gen_fns
    tokens = int(input_nodes[0].get_size()[0])
    groups = int(input_nodes[index].get_size()[0])
    gen_fns = {**(gen_fns or {}),
               index: routing.benchmark_offsets_fn(chosen, tokens, groups)}
    if args:
        args = (gen_fns, *args[1:])
    else:
        kwargs = {**kwargs, "input_gen_fns": gen_fns}
    return args, kwargs, gen_fns


def key_problem(name: str, input_nodes: Any, layout: Any, choices: Sequence[Any]) -> Problem:
    """The DB key of a selection: the IR's problem, plus ``routing=<name>`` while a sweep
    measures a grouped GEMM under a token routing."""
    problem = problem_from_ir(name, input_nodes, layout, choices)
    if name == epilogue_fusion.SELECTION_NAME:  # the epilogue is part of the problem
        problem = checked(dataclasses.replace(
            problem, attrs=tuple(sorted((*problem.attrs, *epilogue_fusion.problem_attrs())))))
    chosen = routing.active()
    if chosen and routing.offs_index(name, input_nodes) is not None:
        problem = routing.routed(problem, chosen)
    return problem


def _device_of(layout: Any) -> Any:
    return describe_device(layout.device)


def _problem(ctx: SelectionContext, choices: Sequence[Any]) -> Problem:
    return key_problem(ctx.name, ctx.input_nodes, ctx.layout, choices)


def preprocess_choices(choices: list[Any]) -> list[Any]:
    """Add plugin choices, then serve the recorded timings of an exact DB record (or,
    opt-in, narrow to a prior's short list or a bucket's winner); then let plugin choices
    prepare (FlyDSL starts its builds) for what Inductor will really benchmark."""
    state, ctx = _state, _current.get()
    if state is None or ctx is None or not choices or not is_gemm_op(ctx.name):
        return choices
    for provider in list(state.providers):
        try:
            choices = choices + provider(ctx.name, ctx.input_nodes, ctx.layout, choices)
        except Exception as exc:
            _report_error("adding plugin choices", exc)
    final = choices
    # nothing to choose between (no lookup, no miss), or re-measuring
    # (INDUCTOR_FLYDSL_REUSE=0: benchmark, then record)
    if len(choices) >= 2 and state.tuning_db.settings.reuse:
        try:
            final = _reuse(state, ctx, choices)
        except Exception as exc:
            _report_error("tuning DB lookup", exc)
    _prepare(serving.unserved(final))
    return final


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
            _report_error("preparing plugin choices", exc)


def _refuse(state: PluginState, ctx: SelectionContext, reason: str) -> None:
    """The problem is outside the definition of a valid problem: not looked up, never
    written; the reason goes to ``stats()['refusals']`` and to the DB's misses table."""
    state.stats.add_refusal(ctx.name, reason)
    warn_once(f"refused:{ctx.name}:{reason}",
              f"inductor_flydsl: {ctx.name} is not looked up or recorded: {reason}")
    state.tuning_db.record_refusal(_device_of(ctx.layout), current_software(), ctx.name,
                                   reason)


def _reuse(state: PluginState, ctx: SelectionContext, choices: list[Any]) -> list[Any]:
    try:
        problem = _problem(ctx, choices)
    except InvalidProblem as exc:
        _refuse(state, ctx, str(exc))
        return choices
    ctx.problem = problem
    device, software = _device_of(ctx.layout), current_software()
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
    if db.settings.use_priors:
        prior = find_prior(db, device, software, problem)
        short = short_list(prior, choices, db.settings.prior_top_k) if prior else None
        if prior is not None and short is not None:
            state.stats.bump("prior_hits")
            ctx.prior = prior
            log.debug("inductor_flydsl: %s: short list of %d from the prior %s",
                      problem.summary(), len(short), prior.describe())
            return short
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


def _result_of(choice: Any, timing: float) -> CandidateResult:
    plugin = state_of(choice)
    if plugin is not None and plugin.failure is not None:
        status, error = plugin.failure
        return CandidateResult(candidate_id(choice), backend_of(choice), str(choice.name),
                               config_of(choice), None, status=status, error=error)
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
    state = _state
    if state is None or not timings or not is_gemm_op(name):
        return
    if _hint_override.get() is not None:
        return  # timings at another size hint than the problem key's
    try:
        for choice, ms in timings.items():
            epilogues.DECIDED.set(choice, float(ms))
        measured = [c for c in timings if c not in serving.SERVED]
        ctx = _current.get()
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
        results += [CandidateResult(candidate_id(c), backend_of(c), str(c.name),
                                    config_of(c), None, status=STATUS_FAILED,
                                    error="precompile failed (Inductor's log says why)")
                    for c in failed if c not in timings]
        if ctx is not None:  # a partial hit's served results, recorded with the new ones
            new = {r.candidate_id for r in results}
            results += [r for r in ctx.carried if r.candidate_id not in new]
        pending = PendingRecord(_device_of(layout), problem, results, confidence, prior)
        if ctx is not None:
            ctx.pending = pending  # recorded when Inductor has made its choice
        else:  # Inductor asked for the timings later: the choice is deferred to fusion
            best = min(timings, key=timings.__getitem__)
            _record(state, pending, best, deferred=True)
    except Exception as exc:
        _report_error("recording autotune results", exc)


def _finish_selection(ctx: SelectionContext, result: Any) -> None:
    """After Inductor chose: record the pending results with its choice, and note the
    selection for the epilogue observer."""
    state = _state
    if state is None or not is_gemm_op(ctx.name):
        return
    try:
        chosen = result[1] if isinstance(result, tuple) and len(result) == 2 else None
        if ctx.pending is not None:
            _record(state, ctx.pending, chosen, deferred=chosen is None)
        elif ctx.source is not None and ctx.problem is not None:
            _add_decision(state, ctx.problem, chosen, ctx.source)
        if ctx.problem is not None and isinstance(result, tuple) and result:
            epilogues.note_selection(result[0], chosen, ctx.problem,
                                     _device_of(ctx.layout), served=ctx.source is not None)
    except Exception as exc:
        _report_error("recording Inductor's choice", exc)


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


def _record_epilogue(note: epilogues.NotedSelection,
                     decision: EpilogueDecision) -> None:
    """The epilogue observer's sink: count and record what the scheduler ran."""
    state = _state
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


def _fusion_gate(gemm: Any) -> bool:
    """Whether a GEMM node may become a fused-epilogue selection: the plugin is on, some
    provider fuses epilogues for its device (FlyDSL: the FLYDSL token, a verified runtime)
    and Inductor is autotuning GEMMs."""
    config = internals.config
    state = _state
    if state is None or not (config.max_autotune or config.max_autotune_gemm):
        return False
    val = gemm.meta.get("val")
    device = getattr(val, "device", None)
    return device is not None and any(
        provider.fuses_epilogues(device) for provider in state.providers)


# ---- installation ------------------------------------------------------------------------
_original_selector_class: type | None = None


def install(state: PluginState) -> None:
    """Activate ``state``; register the hooks once per process."""
    global _state, _original_selector_class
    cache = internals.get_algorithm_selector_cache()
    if not isinstance(cache, PluginSelector):
        _original_selector_class = internals.swap_selector_class(cache, PluginSelector)
    # Checked each time: Inductor's clear_preprocessing_fns()/clear_feedback_savers()
    # may have dropped them since.
    if preprocess_choices not in cache.preprocessing_fns:
        internals.add_preprocessing_fn(preprocess_choices)
    if save_feedback not in cache.feedback_saver_fns:
        internals.add_feedback_saver(save_feedback)
    epilogues.set_sink(_record_epilogue, _report_error)
    epilogues.install_observer()
    epilogue_fusion.install_pass(_fusion_gate, _report_error,
                                 lambda n: state.stats.bump("epilogue_fusions", n))
    _state = state


def uninstall() -> PluginState | None:
    """Deactivate: the hooks stay registered but do nothing; Inductor's class is restored."""
    global _state
    previous, _state = _state, None
    epilogues.set_sink(None)
    epilogues.uninstall_observer()
    epilogue_fusion.uninstall_pass()
    cache = internals.get_algorithm_selector_cache()
    if isinstance(cache, PluginSelector) and _original_selector_class is not None:
        internals.restore_selector_class(cache, _original_selector_class)
    return previous
