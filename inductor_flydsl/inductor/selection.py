"""One selection (one ``autotune_select_algorithm`` call) as the hooks see it: its
context while Inductor runs it, and its DB key."""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..db.store import CandidateResult
from ..priors import Prior
from ..problems import routing
from ..problems.problem import Problem, checked
from ..timing.timing_modes import TimingMode
from . import epilogue_fusion
from .ir_problem import problem_from_ir
from .timing_parity import timing_attrs


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
    # how the choices are timed should a plugin candidate be among them, decided before
    # the providers are asked (timing_parity.selection_timing): the offering ranks by it
    timing: TimingMode | None = None


current_selection: contextvars.ContextVar[SelectionContext | None] = contextvars.ContextVar(
    "inductor_flydsl_selection", default=None)
# The size hint Inductor autotunes at, when it is not the graph's own (multi-kernel hints:
# ``config.multi_kernel_hints``): the problem key holds the graph's hint, so timings at
# another one are neither served nor recorded.
hint_override: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "inductor_flydsl_hint_override", default=None)


def key_problem(name: str, input_nodes: Any, layout: Any, choices: Sequence[Any]) -> Problem:
    """The DB key of a selection: the IR's problem, plus ``timing=graph`` when its choices
    are timed by graph replay (``timing_parity.py``), plus ``routing=<name>`` while a
    sweep measures a grouped GEMM under a token routing."""
    problem = problem_from_ir(name, input_nodes, layout, choices)
    timing = timing_attrs(choices)
    if timing:
        problem = checked(dataclasses.replace(
            problem, attrs=tuple(sorted((*problem.attrs, *timing)))))
    if name == epilogue_fusion.SELECTION_NAME:  # the epilogue is part of the problem
        problem = checked(dataclasses.replace(
            problem, attrs=tuple(sorted((*problem.attrs, *epilogue_fusion.problem_attrs())))))
    chosen = routing.active()
    if chosen and routing.offs_index(name, input_nodes) is not None:
        problem = routing.routed(problem, chosen)
    return problem


def problem_of(ctx: SelectionContext, choices: Sequence[Any]) -> Problem:
    return key_problem(ctx.name, ctx.input_nodes, ctx.layout, choices)
