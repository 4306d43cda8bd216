"""The plugin on Inductor's selector object (``AlgorithmSelectorCache``): its class swapped
for :class:`.selector.PluginSelector` (a declared patch, ``patches.swap_class``), the
preprocessing function and the feedback saver
registered (these two stay once registered, doing nothing while the plugin is off).

Inductor makes that object at its first GEMM selection, and making it asks the GPU
(``CacheBase.get_system``: ``torch.cuda.current_device()``, which initializes CUDA/HIP in
the process). ``enable()`` runs at ``import torch`` with ``INDUCTOR_FLYDSL=1``, in every
process, and a GPU initialized before a fork is broken in the forked children; so the
plugin never makes the object. :func:`attach`: where it exists, it is changed at once;
where not, ``select_algorithm.get_algorithm_selector_cache`` is wrapped (a declared patch,
``internals.PATCHES``) until Inductor first asks for the object, which is then made by
Inductor's own function, changed, and the function put back.
"""

from __future__ import annotations

import threading
from typing import Any

from ..adapter import internals, patches
from ..adapter.plugin_state import report_error
from .lookup import preprocess_choices
from .recording import save_feedback
from .selector import PluginSelector

OWNER, ATTR = "select_algorithm", "get_algorithm_selector_cache"
SELECTOR = "AlgorithmSelectorCache"  # its object's class: a declared patch too
_lock = threading.RLock()
_original_class: type | None = None


def attach() -> None:
    """Put the plugin on Inductor's selector object: now where it exists, else when
    Inductor makes it."""
    cache = internals.selector_object()
    if cache is None:
        patches.apply(OWNER, ATTR, _selector_made_by_inductor)
        cache = internals.selector_object()  # made meanwhile by another thread?
        if cache is None:
            return
        patches.restore(OWNER, ATTR)
    _change(cache)


def detach() -> None:
    """Undo :func:`attach` (the two registered functions stay)."""
    patches.restore(OWNER, ATTR)
    cache = internals.selector_object()
    with _lock:
        if isinstance(cache, PluginSelector) and _original_class is not None:
            patches.restore_class(SELECTOR, cache, _original_class)


def _selector_made_by_inductor() -> Any:
    """In place of ``get_algorithm_selector_cache`` until its first call: Inductor's own
    function makes the object; the plugin is put on it (an error here is counted and
    logged, never raised into the compile)."""
    cache = patches.original(OWNER, ATTR)()
    patches.restore(OWNER, ATTR)
    try:
        _change(cache)
    except Exception as exc:
        report_error("attaching to Inductor's selector", exc)
    return cache


def _change(cache: Any) -> None:
    global _original_class
    with _lock:
        if not isinstance(cache, PluginSelector):
            _original_class = patches.swap_class(
                SELECTOR, cache, internals.selector_class_over(type(cache), PluginSelector))
        # Checked each time: Inductor's clear_preprocessing_fns()/clear_feedback_savers()
        # may have dropped them since.
        if preprocess_choices not in cache.preprocessing_fns:
            internals.add_preprocessing_fn(preprocess_choices)
        if save_feedback not in cache.feedback_saver_fns:
            internals.add_feedback_saver(save_feedback)
