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
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:  # the package declares no torch requirement (docs/decisions.md): say what to install
    import torch  # noqa: F401
except ModuleNotFoundError as _exc:
    if _exc.name != "torch":
        raise
    from .inductor.adapter.torch_range import MISSING_TORCH

    raise ModuleNotFoundError(MISSING_TORCH, name="torch") from None

from . import dependencies
from . import settings as settings_module

try:
    from .flydsl_backend.run import ops as _ops  # noqa: F401  (registers torch.ops.inductor_flydsl)
except ImportError as _exc:  # a required package missing (pip install --no-deps): name it
    _missing = dependencies.requirement_of(_exc)
    if _missing is None:
        raise
    raise ModuleNotFoundError(dependencies.missing_text(_missing, str(_exc)),
                              name=_missing.module) from None
from .settings import (
    DISPLAY_ONLY,
    ENV_DB,
    ENV_MODE,
    Mode,
    SettingError,
    Settings,
    default_db_path,
    enabled_by_env,
    environment_errors,
    settings_from_env,
    unknown_settings,
)
from .telemetry.stats_view import StatsSnapshot
from .version import __version__

__all__ = ["Mode", "PluginUnavailable", "SettingError", "__version__", "active_settings",
           "disable", "enable", "enable_from_env", "enabled", "stats"]
REINSTALL_HINT = "reinstall it: pip install --force-reinstall --no-deps inductor-flydsl"


class PluginUnavailable(RuntimeError):
    """``enable(strict=True)``: the plugin cannot work in this process (a broken install,
    or a torch whose Inductor internals changed); the message names what and the fix."""

_lock = threading.RLock()
_settings: Settings | None = None
_previous_choices_class: Any = None


def enable(db_path: str | os.PathLike[str] | None = None,
           mode: str | Mode | None = None, *, strict: bool = False) -> Settings:
    """Turn the plugin on for this process (idempotent; a new call replaces the settings).

    ``db_path`` defaults to ``$INDUCTOR_FLYDSL_DB`` or ``~/.cache/inductor_flydsl/tuning.db``;
    ``mode`` to ``$INDUCTOR_FLYDSL_MODE`` or ``readwrite``. Returns the settings in force.

    Failure policy (``docs/design.md``): a bad ``INDUCTOR_FLYDSL_*`` value, an incomplete
    install of this package, a torch release outside the supported ones
    (``inductor/adapter/torch_range.py``) or a torch that lacks an Inductor internal the
    plugin relies on (``inductor/adapter/internals.py``) leaves the plugin off and Inductor
    untouched, with one warning naming the variable or module and the fix (a required
    package missing, as
    after ``pip install --no-deps``: the package and ``pip install ...``; a bad value of a
    display-only setting, ``INDUCTOR_FLYDSL_LOG``, is one warning and its default, the
    plugin on); the settings returned then say
    ``mode=off``. ``strict=True`` raises instead: :class:`SettingError` or
    :class:`PluginUnavailable`; it also raises :class:`SettingError` on an unknown
    ``INDUCTOR_FLYDSL_*`` name (a typo, which otherwise does nothing) and
    :class:`PluginUnavailable` when the DB cannot be used as asked (unusable, or not
    writable in ``readwrite`` mode), which otherwise is one warning at the first compile.
    A bad ``mode`` argument always raises ``ValueError``.
    """
    global _settings, _previous_choices_class
    if mode is not None:  # a bad argument is the caller's error: ValueError, strict or not
        try:
            Mode.parse(mode)
        except ValueError as exc:
            raise ValueError(f"mode={mode!r}: {exc}") from None
    with _lock:
        disable()
        problem = _setting_problem(db_path, mode, strict)
        if problem is not None:
            return _stay_off(problem, db_path, strict)
        unknown = unknown_settings()
        if strict and unknown:  # a typo does nothing; only strict callers are stopped
            raise SettingError.combine(list(unknown))
        settings = settings_from_env(db_path, mode)
        if settings.mode is Mode.OFF:
            return settings
        unsupported = _torch_problem()
        if unsupported is not None:
            return _stay_off(PluginUnavailable(unsupported), db_path, strict)
        absent = dependencies.missing(compile_only=True)
        if absent:  # e.g. installed with --no-deps
            return _stay_off(PluginUnavailable("; ".join(
                dependencies.missing_text(r, error) for r, error in absent)), db_path, strict)
        missing = _internals_problems()
        if missing:
            return _stay_off(PluginUnavailable(
                "this torch changed Inductor internals the plugin relies on: "
                + "; ".join(missing)), db_path, strict)
        broken = _install_problem()
        if broken is not None:
            return _stay_off(broken, db_path, strict)
        from .db.layered import LayeredTuningDB
        from .inductor import hooks
        from .inductor.adapter import internals
        from .inductor.autotune.choices import plugin_choices_factory
        from .plugin_choices import register_choice_providers

        tuning_db = LayeredTuningDB(settings)
        db_problems = tuning_db.check_user_db() if strict else []
        if db_problems:
            tuning_db.close()
            fix = (f"give db_path or {ENV_DB} a usable, writable file, or mode readonly "
                   "to serve a read-only one" if settings.mode is Mode.READWRITE else
                   f"give db_path or {ENV_DB} an existing tuning DB")
            raise PluginUnavailable("; ".join(db_problems) + f" ({fix})")
        state = hooks.PluginState(tuning_db)
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


def _setting_problem(db_path: object, mode: object, strict: bool) -> SettingError | None:
    """Every bad ``INDUCTOR_FLYDSL_*`` value, as one error (None: all good); the DB and
    mode variables count only where no argument overrides them. Not strict, bad values
    of display-only settings alone (``INDUCTOR_FLYDSL_LOG``) are one warning each and
    their defaults: the plugin stays on."""
    overridden = {name for name, given in ((ENV_DB, db_path), (ENV_MODE, mode))
                  if given is not None}
    errors = [e for e in environment_errors() if e.name not in overridden]
    if strict or any(e.name not in DISPLAY_ONLY for e in errors):
        return SettingError.combine(errors) if errors else None
    for error in errors:
        warnings.warn(f"inductor_flydsl: {error}; the default is used and the plugin "
                      "stays on", stacklevel=4)
    return None


# Modules of this package an enabled plugin imports while Inductor compiles: a compile
# must not be where an incomplete install shows (the hooks would swallow the error).
COMPILE_MODULES = ("inductor_flydsl.inductor.hooks",
                   "inductor_flydsl.inductor.autotune.choices",
                   "inductor_flydsl.db.layered", "inductor_flydsl.plugin_choices",
                   "inductor_flydsl.flydsl_backend.autotune.provider",
                   "inductor_flydsl.flydsl_backend.autotune.choices")


def _install_problem() -> PluginUnavailable | None:
    """A module of this package that an enabled plugin needs and that does not import
    because part of the package is missing (another package missing is not ours to judge:
    FlyDSL candidates then say why they are not offered)."""
    import importlib

    for name in COMPILE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing = getattr(exc, "name", None) or ""
            if missing == "inductor_flydsl" or missing.startswith("inductor_flydsl"):
                return PluginUnavailable(
                    f"this install of inductor-flydsl is incomplete: importing {name} "
                    f"failed ({exc}); {REINSTALL_HINT}")
    return None


def _stay_off(problem: Exception, db_path: str | os.PathLike[str] | None,
              strict: bool) -> Settings:
    """The failure policy: raise when ``strict``, else one warning and the plugin off."""
    if strict:
        raise problem
    warnings.warn(f"inductor_flydsl stays off: {problem}", stacklevel=3)
    try:  # the path asked for; the problem itself may be a bad INDUCTOR_FLYDSL_DB, already said
        asked = settings_module.DB.read()
    except SettingError:
        asked = None
    path = Path(db_path).expanduser() if db_path is not None else (asked or default_db_path())
    return Settings(db_path=path, mode=Mode.OFF, use_shipped=False)


def _torch_problem() -> str | None:
    """The installed torch outside the supported releases (``inductor/adapter/torch_range.py``)."""
    import torch

    from .inductor.adapter.torch_range import version_problem

    return version_problem(str(torch.__version__))


_checked: list[str] | None = None


def _internals_problems() -> list[str]:
    """``internals_check.problems()``, checked once per process."""
    global _checked
    if _checked is None:
        from .inductor.adapter import internals_check

        _checked = internals_check.problems()
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
        from .inductor import hooks
        from .inductor.adapter import internals

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
    from .telemetry.counters import PROCESS_STATS

    return PROCESS_STATS.snapshot()


def enable_from_env() -> Settings | None:
    """What ``import inductor_flydsl`` (and so ``import torch``, through the entry point)
    does: :func:`enable` when ``INDUCTOR_FLYDSL=1``. It never raises: any failure leaves
    the plugin off with one warning (``docs/design.md``, "Failure policy")."""
    try:
        if not enabled_by_env():
            return None
        return enable()
    except Exception as exc:  # never make `import torch` (the entry point) or this import fail
        warnings.warn(f"inductor_flydsl stays off: {dependencies.explain(exc) or exc}",
                      stacklevel=2)
        return None


enable_from_env()
