"""Work the plugin does when a TorchDynamo compile ends (after Inductor compiled or loaded
every graph of the frame, before the graph's first call): callbacks registered here by
any layer (the FlyDSL backend: build the variants of graphs loaded from the FX-graph
cache as one batch) are installed as Dynamo compile-end callbacks
(``internals.compile_callbacks``).

``torch._dynamo.reset()`` clears Dynamo's callbacks, so :func:`ensure_installed` puts them
back; the plugin's ``InductorChoices.uuid()``, which Inductor calls in every compile (for
its FX-graph-cache key), calls it, so they are in place before that compile ends. Each
callback runs inside a guard: it never makes a compile fail."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from . import internals

log = logging.getLogger("inductor_flydsl")
_callbacks: list[Callable[[Any], None]] = []
_guarded: dict[Callable[[Any], None], Callable[[Any], None]] = {}
_lock = threading.Lock()


def register(callback: Callable[[Any], None]) -> None:
    """Run ``callback(args)`` (Dynamo's ``CallbackArgs``) when each compile ends."""
    with _lock:
        if callback in _callbacks:
            return
        _callbacks.append(callback)

        def guarded(args: Any, callback: Callable[[Any], None] = callback) -> None:
            try:
                callback(args)
            except Exception as exc:  # never fail the compile
                log.debug("inductor_flydsl: compile-end work failed: %s", exc)

        _guarded[callback] = guarded
    ensure_installed()


def ensure_installed() -> None:
    """Every registered callback among Dynamo's compile-end callbacks (once each)."""
    try:
        handler = internals.compile_callbacks
        installed = handler.end_callbacks
        for callback in list(_callbacks):
            guarded = _guarded[callback]
            if guarded not in installed:
                handler.register_end_callback(guarded)
    except Exception as exc:  # an Inductor without them: the work is then not done
        log.debug("inductor_flydsl: compile-end callbacks not installed: %s", exc)


def uninstall() -> None:
    """Take the callbacks out of Dynamo's (they stay registered here for the next
    :func:`ensure_installed`)."""
    try:
        handler = internals.compile_callbacks
        for guarded in list(_guarded.values()):
            if guarded in handler.end_callbacks:
                handler.remove_end_callback(guarded)
    except Exception as exc:
        log.debug("inductor_flydsl: compile-end callbacks not removed: %s", exc)
