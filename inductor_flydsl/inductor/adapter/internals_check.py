"""The check of the adapter's declarations (``internals.py``) against the torch installed:
every declared name, its parameters and members, the config keys, the selector's
registries, the call shapes the plugin relies on (read in Inductor's source) and the
attributes it patches for a while; :func:`client_problems` does the same for a client
library's (vLLM's) where it is installed. ``tests/core/test_inductor_internals.py`` runs
:func:`problems` under every torch release CI installs; :func:`inductor_flydsl.enable` and
``inductor-flydsl doctor`` run it too.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from typing import Any

from .internals import (
    _BY_NAME,
    _CLIENTS,
    _SA,
    CLIENT_OWNERS,
    CONFIG_KEYS,
    INSTANCE_CLASS,
    INTERNALS,
    PATCHES,
    Internal,
    Patch,
    client_installed,
    resolve,
)


def _parameter_names(obj: Any) -> list[str] | None:
    try:
        signature = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)  # type: ignore[misc]
    except (TypeError, ValueError):
        return None  # a builtin without a signature: nothing to compare
    return [p.name for p in signature.parameters.values() if p.name != "self"]


def _check(entry: Internal) -> list[str]:
    where = f"{entry.module}.{entry.attr}"
    try:
        obj = resolve(entry)
    except (ImportError, AttributeError) as exc:
        return [f"{where} is gone ({type(exc).__name__}: {exc}); used for: {entry.use}"]
    found = []
    names = _parameter_names(obj) if entry.params else None
    if names is not None and names[:len(entry.params)] != list(entry.params):
        found.append(f"{where}: parameters changed: expected {list(entry.params)} first, "
                     f"found {names}")
    for member in entry.members:
        attr, _, rest = member.partition("(")
        if not hasattr(obj, attr):
            found.append(f"{where}.{attr} is gone; used for: {entry.use}")
            continue
        positional, _, keywords = rest.rstrip(")").partition(";")
        first = [p.strip() for p in positional.split(",") if p.strip()]
        anywhere = [p.strip() for p in keywords.split(",") if p.strip()]
        names = _parameter_names(getattr(obj, attr)) if first or anywhere else None
        if names is None:
            continue
        if names[:len(first)] != first:
            found.append(f"{where}.{attr}: parameters changed: expected {first} first, "
                         f"found {names}")
        gone = [p for p in anywhere if p not in names]
        if gone:
            found.append(f"{where}.{attr}: parameters {gone} are gone (found {names})")
    return found


def _check_config() -> list[str]:
    try:
        config = resolve(_BY_NAME["config"])
    except (ImportError, AttributeError) as exc:
        return [f"torch._inductor.config is gone ({exc})"]
    found = []
    for key in CONFIG_KEYS:
        value: Any = config
        try:
            for part in key.split("."):
                value = getattr(value, part)
        except AttributeError:
            found.append(f"torch._inductor.config.{key} is gone")
    return found


# select_algorithm's functions that must reach the selector object through the module's
# get_algorithm_selector_cache, so the wrapped one sees Inductor make it (selector_hooks.py)
SELECTOR_USERS = ("autotune_select_algorithm", "add_preprocessing_fn", "add_feedback_saver")


def _check_selector() -> list[str]:
    """The selector object's registries the plugin appends to (on the object where it
    exists, else in ``AlgorithmSelectorCache.__init__``'s source: the check must not make
    it), and the functions that reach it through ``get_algorithm_selector_cache``."""
    try:
        module = resolve(_BY_NAME["select_algorithm"])
        selector = resolve(_BY_NAME["AlgorithmSelectorCache"])
    except (ImportError, AttributeError) as exc:
        return [f"Inductor's selector is unavailable ({type(exc).__name__}: {exc})"]
    cache = getattr(module, "_ALGORITHM_SELECTOR_CACHE", None)
    init = _method_source(selector, "__init__") or ""
    found = [f"AlgorithmSelectorCache.{attr} is gone"
             for attr in ("preprocessing_fns", "feedback_saver_fns")
             if not (isinstance(getattr(cache, attr, None), list) if cache is not None
                     else f"self.{attr}: list" in init)]
    for name in SELECTOR_USERS:
        source = _method_source(module, name)
        if source is None or "get_algorithm_selector_cache()" not in source:
            found.append(f"{_SA}.{name} no longer gets the selector object through "
                         "get_algorithm_selector_cache(): the plugin would not be put on it "
                         "when Inductor makes it")
    return found


# How the selector's methods call each other and the plugin's hooks (read in their source,
# torch 2.13 and 2.14): what a release could change without renaming anything, silently
# stopping serving or recording, or failing a compile inside Inductor, outside the
# plugin's error handling. (method, what its source must call, what breaks otherwise)
CALL_SHAPES: tuple[tuple[str, str, str], ...] = (
    ("__call__", "self.make_precompile_fn(",
     "served candidates would be precompiled (PluginSelector.make_precompile_fn)"),
    ("__call__", "self.do_autotuning(",
     "size hints would not be seen (PluginSelector.do_autotuning)"),
    ("do_autotuning", "self.lookup(", "benchmarking would bypass the selector's lookup"),
    ("do_autotuning", "self.autotune(",
     "benchmarking would not go through PluginSelector.autotune: recorded timings would "
     "no longer replace it"),
    ("do_autotuning", "self.feedback_saver_fns",
     "the feedback saver would not run after benchmarking: nothing would be recorded"),
)
# The scheduler's deferred epilogue-fusion decision (``fusion_replay.py``), read in the
# same way: (method of Scheduler, what its source must hold, what breaks otherwise).
SCHEDULER_CALL_SHAPES: tuple[tuple[str, str, str], ...] = (
    ("speedup_by_fusion", "self.benchmark_fused_nodes(",
     "the epilogue kernel's time would not be captured: no fusion decision recorded"),
    ("speedup_by_fusion", "self.benchmark_codegened_module(",
     "the fused templates' times would not be captured: no fusion decision recorded"),
    ("speedup_by_fusion", "swap_as_triton_caller(",
     "a fused time could not be told to its template"),
    ("speedup_by_fusion", "finalize_as_triton_caller(",
     "a replayed fusion would finalize the buffer differently from Inductor"),
    ("speedup_by_fusion", "ms1 + ms2",
     "Inductor's fusion rule changed: replaying it from recorded timings would differ"),
    ("_try_fusion_pairs", "self.speedup_by_fusion(",
     "fusion decisions would bypass the wrapped speedup_by_fusion: not replayed"),
)
# The feedback saver's call: the arguments Inductor passes, in order (its
# ``FeedbackFunction`` alias); ``hooks.save_feedback`` takes these and accepts more.
FEEDBACK_ARGUMENTS = 6


# How a choice is timed by graph replay (``timing_parity.py``): (module, qualified name of
# a function or method, what its source must hold, what breaks otherwise).
TIMING_SHAPES: tuple[tuple[str, str, str, str], ...] = (
    ("torch._inductor.ir", "ChoiceCaller.__init__", "self._benchmark_with_cudagraphs",
     "a choice no longer carries the graph-timing flag: choices would be timed with host "
     "dispatch where the graph runs without it"),
    ("torch._inductor.autotune_process", "BenchmarkRequest.benchmark",
     "benchmark_gpu_with_cuda_graph",
     "extern and Triton choices would no longer be timed by graph replay"),
    ("torch._inductor.select_algorithm", "ExternKernelCaller.benchmark",
     "benchmark_with_cudagraphs = self._benchmark_with_cudagraphs",
     "extern choices (ATen, FlyDSL) would ignore the graph-timing flag"),
    ("torch._inductor.select_algorithm", "TritonTemplateCaller.benchmark",
     "benchmark_with_cudagraphs = self._benchmark_with_cudagraphs",
     "Triton choices would ignore the graph-timing flag"),
    ("torch._inductor.runtime.benchmarking", "Benchmarker.benchmark_gpu_with_cuda_graph",
     "CUDAGraph", "graph timing would no longer capture and replay"),
)


# How a FlyDSL call reaches generated code (``flydsl_backend/autotune/choices.py``: its IR node
# writes the import of ``flydsl_backend/direct.py`` among the module's imports), read in
# the same way.
CODEGEN_SHAPES: tuple[tuple[str, str, str, str], ...] = (
    ("torch._inductor.codegen.wrapper", "PythonWrapperCodegen.__init__",
     "self.add_import_once = ",
     "the wrapper no longer has add_import_once: generated code would call "
     "inductor_flydsl_direct without importing it"),
    ("torch._inductor.select_algorithm", "ExternKernelCaller.output_node",
     "ir.ExternKernelOut if self.has_out_variant",
     "Inductor builds an extern choice's node differently: DirectKernelOut "
     "(FlydslChoiceCaller.output_node) would no longer be what Inductor builds"),
)


def _check_timing_shapes() -> list[str]:
    found = []
    for module_name, qualname, holds, breaks in TIMING_SHAPES + CODEGEN_SHAPES:
        try:
            obj: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            source = inspect.getsource(obj)
        except (ImportError, AttributeError, OSError, TypeError) as exc:
            found.append(f"{module_name}.{qualname} is gone or unreadable ({exc}): {breaks}")
            continue
        if holds not in source:
            found.append(f"{module_name}.{qualname} no longer holds {holds!r}: {breaks}")
    return found


def _method_source(cls: Any, method: str) -> str | None:
    try:
        return inspect.getsource(getattr(cls, method))
    except (AttributeError, OSError, TypeError):
        return None


def _check_call_shapes() -> list[str]:
    try:
        selector = resolve(_BY_NAME["AlgorithmSelectorCache"])
        module = importlib.import_module(_SA)
    except (ImportError, AttributeError) as exc:
        return [f"{_SA}.AlgorithmSelectorCache is gone ({exc})"]
    found = []
    for method, call, breaks in CALL_SHAPES:
        source = _method_source(selector, method)
        if source is None:
            found.append(f"AlgorithmSelectorCache.{method}: source unreadable, so whether it "
                         f"still calls {call.rstrip('(')} is unknown ({breaks})")
        elif call not in source:
            found.append(f"AlgorithmSelectorCache.{method} no longer calls "
                         f"{call.rstrip('(')}: {breaks}")
    try:
        scheduler = resolve(_BY_NAME["Scheduler"])
    except (ImportError, AttributeError) as exc:
        return [*found, f"torch._inductor.scheduler.Scheduler is gone ({exc})"]
    for method, call, breaks in SCHEDULER_CALL_SHAPES:
        source = _method_source(scheduler, method)
        if source is None or call not in source:
            found.append(f"Scheduler.{method} " + ("source unreadable" if source is None
                         else f"no longer holds {call.rstrip('(')}") + f": {breaks}")
    alias = getattr(module, "FeedbackFunction", None)
    arguments = typing.get_args(alias)[0] if typing.get_args(alias) else None
    if not isinstance(arguments, list) or len(arguments) != FEEDBACK_ARGUMENTS:
        found.append(f"{_SA}.FeedbackFunction changed: the feedback saver is called with "
                     f"{arguments!r}, expected {FEEDBACK_ARGUMENTS} arguments (timings, "
                     "name, input_nodes, choices, profiled_fn, precompile_times)")
    return found


def _check_patch(patch: Patch) -> list[str]:
    entry = _BY_NAME[patch.owner]
    try:
        target = resolve(entry)
    except (ImportError, AttributeError) as exc:
        return [f"{entry.module}.{entry.attr} is gone ({exc}); patched for: {patch.use}"]
    if patch.kind == INSTANCE_CLASS:
        return [] if isinstance(target, type) else [
            f"{entry.module}.{entry.attr} is no longer a class; its instances are "
            f"layered for: {patch.use}"]
    if not callable(getattr(target, patch.attr, None)):
        return [f"{entry.module}.{entry.attr}.{patch.attr} is gone; patched for: "
                f"{patch.use}"]
    return []


def _check_patches() -> list[str]:
    """Each declared patch of torch whose attribute the installed torch no longer has
    (a client library's: :func:`client_problems`)."""
    return [line for patch in PATCHES if patch.owner not in _CLIENTS
            for line in _check_patch(patch)]


def client_problems() -> list[str]:
    """What no longer holds of the client libraries' classes the plugin patches and of
    those patches, for each library installed (an absent one is skipped: nothing of it
    is patched); imports them."""
    found: list[str] = []
    for entry in CLIENT_OWNERS:
        if client_installed(entry.name):
            found += _check(entry)
            found += [line for patch in PATCHES if patch.owner == entry.name
                      for line in _check_patch(patch)]
    return found


def problems() -> list[str]:
    """What no longer holds in the installed torch, one line each (empty: all holds):
    names, parameters, config keys, the selector's registries, the call shapes the
    plugin relies on (``CALL_SHAPES``, the feedback saver's arguments) and the attributes
    it replaces for a while (:data:`PATCHES`); first, a torch release outside the
    supported ones (``torch_range.py``)."""
    import torch

    from .torch_range import version_problem

    unsupported = version_problem(str(torch.__version__))
    found: list[str] = [unsupported] if unsupported else []
    for entry in INTERNALS:
        found += _check(entry)
    return (found + _check_config() + _check_selector() + _check_call_shapes()
            + _check_timing_shapes() + _check_patches())
