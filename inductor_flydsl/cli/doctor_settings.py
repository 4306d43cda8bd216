"""Every ``INDUCTOR_FLYDSL*`` environment variable ``doctor`` knows: its value in effect,
where that value comes from (the environment or the default) and whether it is valid.

The list is checked against the package source by ``tests/core/test_doctor.py``: a variable
read anywhere in the package must be listed here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..settings import Mode, default_db_path

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
ON_BUSY_POLICIES = ("wait", "backoff", "record")


def _boolean(text: str) -> str | None:
    if text.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return None
    return f"not a yes/no value: use one of {', '.join(TRUE_WORDS + FALSE_WORDS)}"


def _mode(text: str) -> str | None:
    try:
        Mode.parse(text)
    except ValueError:
        return f"not a mode: use one of {', '.join(m.value for m in Mode)}"
    return None


def _whole(least: int, most: int | None = None) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or value < least or (most is not None and value > most):
            bound = f"from {least} to {most}" if most is not None else f"of at least {least}"
            return f"not a whole number {bound}"
        return None
    return check


def _positive_number(text: str) -> str | None:
    try:
        ok = float(text) > 0
    except ValueError:
        ok = False
    return None if ok else "not a number above 0"


def _on_busy(text: str) -> str | None:
    if text.strip().lower() in ON_BUSY_POLICIES:
        return None
    return f"not a policy: use one of {', '.join(ON_BUSY_POLICIES)}"


def _any(text: str) -> str | None:
    return None


@dataclass(frozen=True)
class KnownSetting:
    name: str
    default: Callable[[], str]  # the value in effect when the variable is unset
    meaning: str
    check: Callable[[str], str | None] = _any  # a reason the value is invalid, or None


def _fixed(value: str) -> Callable[[], str]:
    return lambda: value


def _default_build_jobs() -> str:
    from ..flydsl_backend.prebuild import default_build_workers

    return f"{default_build_workers()} (this machine's CPU share)"


def _default_cache_dir() -> str:
    from ..flydsl_backend.toolchain import cache_root

    return str(cache_root())


KNOWN_SETTINGS: tuple[KnownSetting, ...] = (
    KnownSetting("INDUCTOR_FLYDSL", _fixed("0"), "enable the plugin at `import torch`",
                 _boolean),
    KnownSetting("INDUCTOR_FLYDSL_DB", lambda: str(default_db_path()), "the user's tuning DB"),
    KnownSetting("INDUCTOR_FLYDSL_MODE", _fixed("readwrite"),
                 "readwrite, readonly or off", _mode),
    KnownSetting("INDUCTOR_FLYDSL_SHIPPED", _fixed("1"),
                 "layer the DBs shipped in the package", _boolean),
    KnownSetting("INDUCTOR_FLYDSL_REUSE", _fixed("1"),
                 "hand Inductor recorded timings (0: benchmark and record again)", _boolean),
    KnownSetting("INDUCTOR_FLYDSL_BUCKETS", _fixed("0"),
                 "serve an unseen dynamic M its bucket's winner", _boolean),
    KnownSetting("INDUCTOR_FLYDSL_PRIORS", _fixed("0"),
                 "re-tune a short list from the nearest older record", _boolean),
    KnownSetting("INDUCTOR_FLYDSL_PRIOR_TOP_K", _fixed("2"),
                 "candidates a prior's short list keeps", _whole(1)),
    KnownSetting("INDUCTOR_FLYDSL_CANDIDATES", _fixed("12"),
                 "FlyDSL configs offered per GEMM", _whole(1, 64)),
    KnownSetting("INDUCTOR_FLYDSL_MAX_KERNELS", _fixed("256"),
                 "compiled FlyDSL kernels kept loaded", _whole(1)),
    KnownSetting("INDUCTOR_FLYDSL_BUILD_JOBS", _default_build_jobs,
                 "FlyDSL build worker processes (0: build in-process)", _whole(0)),
    KnownSetting("INDUCTOR_FLYDSL_BUILD_TIMEOUT_S", _fixed("300"),
                 "seconds one FlyDSL build may take", _positive_number),
    KnownSetting("INDUCTOR_FLYDSL_CACHE_DIR", _default_cache_dir,
                 "the package's caches (lld stand-in, builds)"),
    KnownSetting("INDUCTOR_FLYDSL_BUSY_CPU", _fixed("0.25"),
                 "CPU load above which a machine counts as busy", _positive_number),
    KnownSetting("INDUCTOR_FLYDSL_REPEATS", _fixed("5"),
                 "timing samples per finalist", _whole(1)),
    KnownSetting("INDUCTOR_FLYDSL_ON_BUSY", _fixed("wait"),
                 "sweep's default --on-busy (wait, backoff, record)", _on_busy),
    KnownSetting("INDUCTOR_FLYDSL_BUSY_NOTE", _fixed(""),
                 "set by the sweep runner for items run on a busy machine"),
)
KNOWN_NAMES = frozenset(s.name for s in KNOWN_SETTINGS)


@dataclass(frozen=True)
class SettingState:
    name: str
    value: str
    source: str  # "env" or "default"
    meaning: str
    problem: str | None  # why the value does not work (the variable is then ignored)


def settings_in_effect(environ: Mapping[str, str] | None = None) -> list[SettingState]:
    """Every known setting, then every unknown ``INDUCTOR_FLYDSL*`` variable set (a typo
    does nothing, which is a problem worth reporting)."""
    env = os.environ if environ is None else environ
    states = []
    for setting in KNOWN_SETTINGS:
        if setting.name in env:
            value = env[setting.name]
            states.append(SettingState(setting.name, value, "env", setting.meaning,
                                       setting.check(value)))
        else:
            try:
                default = setting.default()
            except Exception as exc:  # a default that cannot be worked out is reported
                default = f"? ({exc})"
            states.append(SettingState(setting.name, default, "default", setting.meaning,
                                       None))
    for name in sorted(env):
        if name.startswith("INDUCTOR_FLYDSL") and name not in KNOWN_NAMES:
            states.append(SettingState(name, env[name], "env", "unknown variable",
                                       "not a setting of inductor_flydsl: it does nothing "
                                       "(a typo?)"))
    return states
