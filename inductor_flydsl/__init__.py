"""inductor-flydsl: FlyDSL GEMM choices and a SQLite tuning DB for TorchInductor max-autotune.

Usage::

    import inductor_flydsl
    inductor_flydsl.enable()                  # or INDUCTOR_FLYDSL=1 in the environment
    model = torch.compile(model, mode="max-autotune")
    print(inductor_flydsl.stats())            # a table; stats()['hits'], .as_dict()

Modes: ``readwrite`` (default: reuse winners, record every autotune), ``readonly`` (reuse
winners, never write), ``off``.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from .flydsl_backend import ops as _ops  # noqa: F401  (registers torch.ops.inductor_flydsl)
from .settings import Mode, Settings, enabled_by_env, settings_from_env
from .stats_view import StatsSnapshot
from .version import __version__

__all__ = ["Mode", "__version__", "active_settings", "disable", "enable", "enabled", "stats"]

_lock = threading.RLock()
_settings: Settings | None = None
_previous_choices_class: Any = None


def enable(db_path: str | os.PathLike[str] | None = None,
           mode: str | Mode | None = None) -> Settings:
    """Turn the plugin on for this process (idempotent; a new call replaces the settings).

    ``db_path`` defaults to ``$INDUCTOR_FLYDSL_DB`` or ``~/.cache/inductor_flydsl/tuning.db``;
    ``mode`` to ``$INDUCTOR_FLYDSL_MODE`` or ``readwrite``. Returns the settings in force.

    When the installed torch lacks an Inductor internal the plugin relies on
    (``inductor/internals.py``), the plugin stays off (a warning says what changed) and
    Inductor is left untouched; the settings returned then say ``mode=off``.
    """
    global _settings, _previous_choices_class
    settings = settings_from_env(db_path, mode)
    with _lock:
        disable()
        if settings.mode is Mode.OFF:
            return settings
        from .inductor import internals

        missing = _internals_problems()
        if missing:
            warnings.warn("inductor_flydsl stays off: this torch changed Inductor internals "
                          "the plugin relies on: " + "; ".join(missing), stacklevel=2)
            return dataclasses.replace(settings, mode=Mode.OFF)
        from .db.layered import LayeredTuningDB
        from .inductor import hooks
        from .inductor.choices import plugin_choices_factory
        from .plugin_choices import register_choice_providers

        state = hooks.PluginState(LayeredTuningDB(settings))
        register_choice_providers(state)
        _previous_choices_class = internals.config.inductor_choices_class
        factory = plugin_choices_factory(_previous_choices_class)
        # Both are needed: the config enters the FX-graph-cache key (via uuid()) and serves
        # new threads; the handler serves this thread, whose V.choices may already exist.
        internals.config.inductor_choices_class = factory
        internals.V.set_choices_handler(factory())
        hooks.install(state)
        _settings = settings
        return settings


_checked: list[str] | None = None


def _internals_problems() -> list[str]:
    """``internals.problems()``, checked once per process."""
    global _checked
    if _checked is None:
        from .inductor import internals

        _checked = internals.problems()
    return _checked


@atexit.register
def _close_at_exit() -> None:
    # Closing the last connection checkpoints the WAL into the DB file, so the file alone
    # (copied, shipped, merged) holds everything this process recorded.
    disable()


def disable() -> None:
    """Turn the plugin off; Inductor's own behaviour is restored."""
    global _settings, _previous_choices_class
    with _lock:
        if _settings is None:
            return
        from .inductor import hooks, internals

        state = hooks.uninstall()
        if state is not None:
            state.tuning_db.close()
        internals.config.inductor_choices_class = _previous_choices_class
        factory = _previous_choices_class or internals.InductorChoices
        internals.V.set_choices_handler(factory())
        _settings, _previous_choices_class = None, None


def active_settings() -> Settings | None:
    """The settings in force, or None when the plugin is off."""
    return _settings


@contextlib.contextmanager
def enabled(db_path: str | os.PathLike[str] | None = None,
            mode: str | Mode | None = None) -> Iterator[Settings]:
    """``with inductor_flydsl.enabled(...):`` on inside the block, as before after it."""
    with _lock:
        before = _settings
        settings = enable(db_path, mode)
    try:
        yield settings
    finally:
        with _lock:
            disable()
            if before is not None:
                enable(before.db_path, before.mode)


def stats() -> StatsSnapshot:
    """Counters for this process, as a dict whose ``str()`` (and ``repr()``) is a readable
    table; ``.as_dict()`` gives a plain dict: hits, dynamic_hits (a dynamic-shape problem served by
    its own record), bucket_hits, prior_hits (no exact winner: the short list of the
    nearest older record was benchmarked), misses, stale, recorded, benchmarked, errors,
    refused (problems outside the definition of a valid problem, with ``refusals``: op and
    reason each), and the list of decisions (problem, chosen candidate, where the choice
    came from), and the epilogues (what the scheduler ran after each GEMM: its epilogue ops,
    whether they were fused into the GEMM kernel)."""
    from .counters import PROCESS_STATS

    return PROCESS_STATS.snapshot()


if enabled_by_env():
    try:
        enable()
    except Exception as exc:  # never make `import torch` (the entry point) or this import fail
        warnings.warn(f"inductor_flydsl: INDUCTOR_FLYDSL=1 but the plugin stays off: {exc}",
                      stacklevel=2)
