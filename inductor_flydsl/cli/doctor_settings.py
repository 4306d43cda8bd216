"""Every ``INDUCTOR_FLYDSL*`` environment variable ``doctor`` knows: its value in effect,
where that value comes from (the environment or the default) and whether it is valid.

The variables, their defaults, parsers and meanings are ``settings.ENV_SETTINGS`` (the one
place the package declares and reads them); this module only reports on them, less the
internal ones the package sets for its own child processes (``EnvSetting.internal``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..settings import (
    BUILD_JOBS,
    CACHE_DIR,
    DB,
    SCRIPT_VARIABLES,
    EnvSetting,
    default_db_path,
    unknown_settings,
    user_settings,
)


def _default_build_jobs() -> str:
    from ..flydsl_backend.builds.prebuild import default_build_workers

    return f"{default_build_workers()} (this machine's CPU share)"


def _default_cache_dir() -> str:
    from ..flydsl_backend.builds.toolchain import cache_root

    return str(cache_root())


# Defaults the registry leaves to the code that uses them (None there), worked out here.
COMPUTED_DEFAULTS: dict[str, Callable[[], str]] = {
    DB.name: lambda: str(default_db_path()),
    BUILD_JOBS.name: _default_build_jobs,
    CACHE_DIR.name: _default_cache_dir,
}


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(getattr(value, "value", value))  # an enum (the mode): its word


@dataclass(frozen=True)
class SettingState:
    name: str
    value: str
    source: str  # "env" or "default"
    meaning: str
    problem: str | None  # why the value does not work (the variable is then ignored)


def _state(setting: EnvSetting[Any], env: Mapping[str, str]) -> SettingState:
    text = setting.text(env)
    if text is not None:
        try:
            setting.parse(text)
            problem = None
        except ValueError as exc:
            problem = str(exc)
        return SettingState(setting.name, text, "env", setting.doc, problem)
    computed = COMPUTED_DEFAULTS.get(setting.name)
    try:
        default = computed() if computed is not None else _shown(setting.default)
    except Exception as exc:  # a default that cannot be worked out is reported
        default = f"? ({exc})"
    return SettingState(setting.name, default, "default", setting.doc, None)


def settings_in_effect(environ: Mapping[str, str] | None = None) -> list[SettingState]:
    """Every setting a user sets (not the internal ones), the variables of this project's
    scripts that are set, then every unknown ``INDUCTOR_FLYDSL*`` variable set (a typo
    does nothing, which is a problem worth reporting)."""
    env = os.environ if environ is None else environ
    states = [_state(setting, env) for setting in user_settings()]
    states += [SettingState(name, env[name], "env", meaning, None)
               for name, meaning in SCRIPT_VARIABLES.items() if name in env]
    states += [SettingState(u.name, u.value, "env", "unknown variable", u.expected)
               for u in unknown_settings(env)]
    return states
