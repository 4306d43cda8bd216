"""The plugin's extension of Inductor's selector (``AlgorithmSelectorCache``): it
remembers each call's context, hands Inductor recorded timings in place of benchmarking
(``autotune``), builds nothing for a served candidate (``make_precompile_fn``) and notes
the size hint of each autotune (``do_autotuning``)."""

from __future__ import annotations

from typing import Any

from ...problems import routing
from ..adapter import internals
from ..timing import timing_parity
from . import serving
from .recording import finish_selection
from .selection import SelectionContext, current_selection, hint_override


class PluginSelector(internals.AlgorithmSelectorCache):
    """Inductor's selector, remembering the op name and inputs of the current call,
    serving recorded timings in place of benchmarking, and recording Inductor's choice."""

    def __call__(self, name: str, choices: list[Any], input_nodes: Any, layout: Any,
                 *args: Any, **kwargs: Any) -> Any:
        gen_fns = args[0] if args else kwargs.get("input_gen_fns")
        args, kwargs, gen_fns = _with_routing(name, input_nodes, args, kwargs, gen_fns)
        ctx = SelectionContext(name, input_nodes, layout, gen_fns)
        token = current_selection.set(ctx)
        try:
            result = super().__call__(name, choices, input_nodes, layout, *args, **kwargs)
        finally:
            current_selection.reset(token)
        finish_selection(ctx, result)
        return result

    def autotune(self, name: Any, input_nodes: Any, layout: Any, input_gen_fns: Any,
                 choices: Any, *args: Any, **kwargs: Any) -> dict[Any, float]:
        """Inductor's benchmark of ``choices``, except that a served candidate gets its
        recorded time instead (``serving.py``); what is benchmarked is remembered."""
        if hint_override.get() is not None or kwargs.get("hint_override") is not None:
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

    def lookup(self, choices: Any, op: str, inputs: str, benchmark: Any,
               *args: Any, **kwargs: Any) -> Any:
        """Inductor's local autotune cache, keyed by the timing mode too
        (``timing_parity.cache_inputs_key``): graph timings never answer an eager
        compile's lookup, nor eager ones a graph-timed compile's."""
        return super().lookup(choices, op, timing_parity.cache_inputs_key(inputs, choices),
                              benchmark, *args, **kwargs)

    def do_autotuning(self, *args: Any, **kwargs: Any) -> Any:
        """Inductor's autotune of one selection at one size hint (its feedback savers run
        inside): remembers a hint other than the graph's own."""
        token = hint_override.set(kwargs.get("hint_override"))
        try:
            return super().do_autotuning(*args, **kwargs)
        finally:
            hint_override.reset(token)

    def make_precompile_fn(self, choices: Any, *args: Any, **kwargs: Any) -> Any:
        """Precompiles only what will be benchmarked: a served candidate is never built
        for benchmarking (the one Inductor picks is built by its final codegen). The
        candidates whose precompile failed (Inductor marks them ``failed`` and drops
        them) are remembered, so they are recorded as failed and not built again."""
        todo = serving.unserved(choices)
        precompile = super().make_precompile_fn(todo, *args, **kwargs)
        ctx = current_selection.get()
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
