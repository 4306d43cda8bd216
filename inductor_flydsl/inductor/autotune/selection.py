"""One selection (one ``autotune_select_algorithm`` call) as the hooks see it: its
context while Inductor runs it, and its DB key."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...db.store import CandidateResult
from ...priors import Prior
from ...problems import routing
from ...problems.epilogue_spec import EpilogueSpec
from ...problems.problem import Problem, checked
from ...provenance.timing_modes import TimingMode
from ..timing.timing_parity import timing_attrs
from .ir_problem import problem_from_ir


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


# The selection of a GEMM with its epilogue fused (``fusion/epilogue_lowering.py`` makes
# it), and the epilogue of the one being made: for the choice provider and the problem key
EPILOGUE_SELECTION = "gemm_epilogue"


@dataclass(frozen=True)
class ActiveEpilogue:
    spec: EpilogueSpec
    region: str


_active_epilogue: contextvars.ContextVar[ActiveEpilogue | None] = contextvars.ContextVar(
    "inductor_flydsl_epilogue", default=None)


def active_epilogue() -> ActiveEpilogue | None:
    """The epilogue of the ``gemm_epilogue`` selection being made (for the choice
    provider and the problem key)."""
    return _active_epilogue.get()


@contextlib.contextmanager
def selecting_epilogue(spec: EpilogueSpec, region: str) -> Iterator[None]:
    """While a ``gemm_epilogue`` selection of ``spec`` over ``region`` is made."""
    token = _active_epilogue.set(ActiveEpilogue(spec, region))
    try:
        yield
    finally:
        _active_epilogue.reset(token)


def epilogue_problem_attrs() -> tuple[tuple[str, Any], ...]:
    """The ``attrs`` of a ``gemm_epilogue`` problem key: the epilogue's id and ops and
    the region's id (the exact original ops it competes with)."""
    current = active_epilogue()
    if current is None:
        return ()
    return (("epilogue", current.spec.id), ("epilogue_ops", tuple(current.spec.ops())),
            ("region", current.region))


def key_problem(name: str, input_nodes: Any, layout: Any, choices: Sequence[Any]) -> Problem:
    """The DB key of a selection: the IR's problem, plus ``timing=graph`` when its choices
    are timed by graph replay (``timing_parity.py``), plus ``routing=<name>`` while a
    sweep measures a grouped GEMM under a token routing."""
    problem = problem_from_ir(name, input_nodes, layout, choices)
    timing = timing_attrs(choices)
    if timing:
        problem = checked(dataclasses.replace(
            problem, attrs=tuple(sorted((*problem.attrs, *timing)))))
    if name == EPILOGUE_SELECTION:  # the epilogue is part of the problem
        problem = checked(dataclasses.replace(
            problem, attrs=tuple(sorted((*problem.attrs, *epilogue_problem_attrs())))))
    chosen = routing.active()
    if chosen and routing.offs_index(name, input_nodes) is not None:
        problem = routing.routed(problem, chosen)
    return problem


def problem_of(ctx: SelectionContext, choices: Sequence[Any]) -> Problem:
    return key_problem(ctx.name, ctx.input_nodes, ctx.layout, choices)
