"""Every choice of a selection in which a plugin backend (FlyDSL) is offered is timed the
way the compiled graph will run it (issue 42).

Inductor's default GPU benchmark (``InductorBenchmarker.benchmark_gpu``) times each call
between two events after a cache-clearing fill; the host work before the kernel is
enqueued (torch's dispatch, the op's checks, argument packing) lands inside the events
while the GPU idles. That is how an eagerly launched graph pays for a kernel. But under
``mode="max-autotune"`` the compiled graph runs inside CUDA/HIP graphs (cudagraph trees,
``config.triton.cudagraphs``), where a launch costs no host time at all: timing with host
dispatch there decides against a backend whose dispatch is in Python, whatever its kernel.

So, for a selection holding a plugin candidate:

- the compile will capture graphs (``config.triton.cudagraphs``): every choice, ATen,
  Triton and FlyDSL alike, gets Inductor's own graph timing (``_benchmark_with_cudagraphs``:
  captured once, the replay timed, ``benchmarker.benchmark_gpu_with_cuda_graph``; the
  same flag ``autotune_select_algorithm(benchmark_with_cudagraphs=True)`` sets);
- it will not: Inductor's default timing for every choice, host dispatch included, as the
  graph will run them (nothing is changed).

A selection with no plugin candidate is left exactly as Inductor times it (the rule:
with the plugin on, plain Inductor's selections pick what they would pick).

The mode is part of the DB key: a graph-timed selection's problem carries
``timing=graph`` (:func:`timing_attrs`, read from the choices themselves, so the key says
how they were really timed), and the FlyDSL candidates' ``hash_key`` carries it too, so
neither the DB nor Inductor's own autotune cache serves a graph timing to an eager
compile or the other way round. Eager and CPU timings keep the keys they always had.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Sequence
from typing import Any

from ...provenance.timing_modes import CPU, EAGER, GRAPH, TimingMode
from ..adapter import internals, user_passes
from ..adapter.choice_state import state_of

log = logging.getLogger("inductor_flydsl")
GRAPH_FLAG = "_benchmark_with_cudagraphs"  # ChoiceCaller's attribute (torch/_inductor/ir.py)
TIMING_ATTR = "timing"


def compile_uses_graphs() -> bool:
    """Whether the graph being compiled will run under CUDA/HIP graphs: Inductor's
    ``triton.cudagraphs`` (on in ``mode="max-autotune"``, off in
    ``"max-autotune-no-cudagraphs"``), as the compile's config patches set it; or a
    caller that captures graphs of its own with that flag off (vLLM), as the plugin's
    post-grad pass in the compile's config says (``vllm_passes.join``)."""
    config = internals.config
    if config.triton.cudagraphs:
        return True
    try:
        passes = user_passes.graph_passes(config.post_grad_custom_post_pass)
    except Exception:  # a value Inductor itself would refuse: not the plugin's to judge
        return False
    return any(getattr(p, "client_captures_graphs", False) is True for p in passes)


def offers_plugin_choice(choices: Sequence[Any]) -> bool:
    return any(state_of(c) is not None for c in choices)


def timed_with_graphs(choice: Any) -> bool:
    return bool(getattr(choice, GRAPH_FLAG, False))


def selection_timing(device: Any, providers: Sequence[Any]) -> TimingMode:
    """How a selection on ``device`` times its choices should it hold a plugin candidate,
    decided once, before the providers are asked (the offering ranks its configs by it):
    ``graph`` when the compile captures graphs and a provider can capture kernels on the
    device (a GPU, as the provider's runtime says), else ``cpu`` on a CPU and ``eager``
    on a GPU."""
    if compile_uses_graphs() and any(getattr(p, "captures_graphs", lambda d: False)(device)
                                     for p in providers):
        return GRAPH
    return CPU if getattr(device, "type", None) == "cpu" else EAGER


_SUPER_CALL = "super().benchmark("


@functools.cache
def honours_graph_flag(cls: type) -> bool:
    """Whether choices of ``cls`` are timed by graph replay when their graph flag is set:
    the first ``benchmark`` up its MRO that reads the flag (ChoiceCaller's own,
    ExternKernelCaller's, TritonTemplateCaller's, SubgraphChoiceCaller's), passing through
    overrides that end in ``super().benchmark(`` (the plugin's FlyDSL caller). A type
    whose ``benchmark`` ignores the flag (ROCmTemplateCaller: CK and CK-tile,
    CppTemplateCaller) is timed eagerly whatever the flag says."""
    for klass in cls.__mro__:
        method = klass.__dict__.get("benchmark")
        if method is None:
            continue
        try:
            source = inspect.getsource(method)
        except (OSError, TypeError):
            return False
        if GRAPH_FLAG in source:
            return True
        if _SUPER_CALL not in source:
            return False
    return False


def time_like_the_graph(choices: Sequence[Any], mode: TimingMode) -> TimingMode | None:
    """Time the choices of one selection as ``mode`` (:func:`selection_timing`) says: under
    ``graph`` every choice gets Inductor's graph timing, provided every choice's type
    honours the flag; if one does not (a CK choice), none is graph-timed (the selection
    is timed eagerly, like with like, and labelled so). Returns the mode applied, or None
    when the selection holds no plugin candidate (Inductor's own timing, untouched)."""
    if not offers_plugin_choice(choices):
        return None
    if mode != GRAPH:
        return mode
    ignoring = sorted({type(c).__name__ for c in choices if not honours_graph_flag(type(c))})
    if ignoring:
        log.debug("inductor_flydsl: timed eagerly, as %s choices cannot be timed by graph "
                  "replay", ", ".join(ignoring))
        return EAGER
    for choice in choices:
        setattr(choice, GRAPH_FLAG, True)
    return GRAPH


def timing_mode_of(choices: Sequence[Any]) -> TimingMode | None:
    """How the choices are timed, as the DB key records it: ``graph`` when every one is
    timed by graph replay (flagged, and of a type that reads the flag), else None
    (Inductor's default timing, no attribute: the keys of every earlier record stay as
    they were)."""
    return GRAPH if choices and all(
        timed_with_graphs(c) and honours_graph_flag(type(c)) for c in choices) else None


def cache_inputs_key(inputs: str, choices: Sequence[Any]) -> str:
    """Inductor's local autotune cache key for ``choices`` (``PersistentCache.lookup``'s
    ``inputs``) with the timing mode in it: a graph-timed selection's timings live under
    their own key, so an eager compile is never handed them, nor the other way round
    (ATen's and Triton's ``hash_key`` do not say how they were timed). Eager and CPU
    timings keep Inductor's key."""
    mode = timing_mode_of(choices)
    return f"{inputs}|timing={mode}" if mode else inputs


def timing_attrs(choices: Sequence[Any]) -> tuple[tuple[str, str], ...]:
    mode = timing_mode_of(choices)
    return ((TIMING_ATTR, mode),) if mode else ()
