"""Work the plugin does when a TorchDynamo compile ends (after Inductor compiled or loaded
every graph of the frame, before the graph's first call): callbacks registered here by
any layer (the FlyDSL backend: build the variants of graphs loaded from the FX-graph
cache as one batch; ``compile_summary``: one line per compile) are installed as Dynamo
compile-end callbacks (``internals.compile_callbacks``).

``torch._dynamo.reset()`` clears Dynamo's callbacks, so :func:`ensure_installed` puts them
back, called from two places that between them every compile passes before it ends: the
plugin's ``InductorChoices.uuid()``, which Inductor calls for its FX-graph-cache key (a
graph loaded from that cache is never lowered), and the plugin's post-grad pass, which runs
in every compile that lowers a graph (the cache off, or a miss). Each callback runs inside
a guard: it never makes a compile fail."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..adapter import internals

log = logging.getLogger("inductor_flydsl")
# callback -> its guarded form, the one installed in Dynamo
_registered: dict[Callable[[Any], None], Callable[[Any], None]] = {}
_lock = threading.Lock()


def register(callback: Callable[[Any], None]) -> None:
    """Run ``callback(args)`` (Dynamo's ``CallbackArgs``) when each compile ends."""
    with _lock:
        if callback not in _registered:

            def guarded(args: Any, callback: Callable[[Any], None] = callback) -> None:
                try:
                    callback(args)
                except Exception as exc:  # never fail the compile
                    log.debug("inductor_flydsl: compile-end work failed: %s", exc)

            _registered[callback] = guarded
    ensure_installed()


def unregister(callback: Callable[[Any], None]) -> None:
    """No longer run ``callback``."""
    with _lock:
        guarded = _registered.pop(callback, None)
    if guarded is not None:
        _remove(guarded)


def _remove(guarded: Callable[[Any], None]) -> None:
    try:
        handler = internals.compile_callbacks
        if guarded in handler.end_callbacks:
            handler.remove_end_callback(guarded)
    except Exception as exc:
        log.debug("inductor_flydsl: compile-end callbacks not removed: %s", exc)


def ensure_installed() -> None:
    """Every registered callback among Dynamo's compile-end callbacks (once each)."""
    try:
        handler = internals.compile_callbacks
        for guarded in list(_registered.values()):
            if guarded not in handler.end_callbacks:
                handler.register_end_callback(guarded)
    except Exception as exc:  # an Inductor without them: the work is then not done
        log.debug("inductor_flydsl: compile-end callbacks not installed: %s", exc)


def uninstall() -> None:
    """Take the callbacks out of Dynamo's while the plugin is off (they stay registered
    here for the next :func:`ensure_installed`)."""
    for guarded in list(_registered.values()):
        _remove(guarded)
