"""User-facing settings: modes, the default DB path and the environment variables.

Environment variables (read by :func:`settings_from_env`):

- ``INDUCTOR_FLYDSL=1`` enables the plugin at ``import torch`` time (see ``autoload.py``)
  or at ``import inductor_flydsl``, with no code change.
- ``INDUCTOR_FLYDSL_DB=path`` overrides the default per-user DB path.
- ``INDUCTOR_FLYDSL_MODE=readwrite|readonly|off`` overrides the default mode.
- ``INDUCTOR_FLYDSL_SHIPPED=0`` stops layering the DBs shipped in the package.
- ``INDUCTOR_FLYDSL_REUSE=0`` never hands Inductor recorded timings: every GEMM is
  benchmarked again and recorded (``sweep --remeasure``/``--remeasure-noisy`` set it).

Two approximations trade the rule "the final code uses the kernels plain Inductor would
pick" for compile time, and are therefore off unless asked for:

- ``INDUCTOR_FLYDSL_PRIORS=1``: when no exact record holds (after an upgrade), use the
  nearest older record (other software, or the same arch on another device) as a prior
  and benchmark only its short list (``priors.py``); ``INDUCTOR_FLYDSL_PRIOR_TOP_K=N``
  (default 2) is how many of the prior's best candidates the short list keeps.
- ``INDUCTOR_FLYDSL_BUCKETS=1``: serve an M never measured the winner recorded at its
  dynamic-M bucket (``buckets.py``).
"""

from __future__ import annotations

import enum
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ENV_ENABLE = "INDUCTOR_FLYDSL"
ENV_DB = "INDUCTOR_FLYDSL_DB"
ENV_MODE = "INDUCTOR_FLYDSL_MODE"
ENV_SHIPPED = "INDUCTOR_FLYDSL_SHIPPED"
ENV_BUCKETS = "INDUCTOR_FLYDSL_BUCKETS"
ENV_REUSE = "INDUCTOR_FLYDSL_REUSE"
ENV_PRIORS = "INDUCTOR_FLYDSL_PRIORS"
ENV_PRIOR_TOP_K = "INDUCTOR_FLYDSL_PRIOR_TOP_K"
DEFAULT_PRIOR_TOP_K = 2


class Mode(enum.StrEnum):
    READWRITE = "readwrite"
    READONLY = "readonly"
    OFF = "off"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        if isinstance(value, Mode):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise ValueError(
                f"unknown inductor_flydsl mode {value!r}; use one of: {allowed}") from None


def default_db_path() -> Path:
    """The per-user tuning DB: ``$XDG_CACHE_HOME/inductor_flydsl/tuning.db``."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache_home) / "inductor_flydsl" / "tuning.db"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    db_path: Path
    mode: Mode
    use_shipped: bool
    use_buckets: bool = False  # opt-in: serve an unseen M its bucket's winner
    reuse: bool = True  # False: measure and record again, never serve recorded timings
    use_priors: bool = False  # opt-in: a short re-tune from the nearest older record
    prior_top_k: int = DEFAULT_PRIOR_TOP_K


def settings_from_env(db_path: str | os.PathLike[str] | None = None,
                      mode: str | Mode | None = None) -> Settings:
    """Explicit arguments win over the environment, which wins over the defaults."""
    env_db = os.environ.get(ENV_DB)
    path = Path(db_path) if db_path is not None else Path(env_db) if env_db else default_db_path()
    env_mode = os.environ.get(ENV_MODE)
    given, where = (mode, "mode") if mode is not None else (env_mode, ENV_MODE)
    try:
        chosen = Mode.parse(given or Mode.READWRITE)
    except ValueError as exc:
        raise ValueError(f"{where}={given!r}: {exc}") from exc
    return Settings(db_path=path.expanduser(), mode=chosen,
                    use_shipped=not _falsy(os.environ.get(ENV_SHIPPED)),
                    use_buckets=_truthy(os.environ.get(ENV_BUCKETS)),
                    reuse=not _falsy(os.environ.get(ENV_REUSE)),
                    use_priors=_truthy(os.environ.get(ENV_PRIORS)),
                    prior_top_k=_top_k(os.environ.get(ENV_PRIOR_TOP_K)))


def _top_k(value: str | None) -> int:
    if value is None or not value.strip():
        return DEFAULT_PRIOR_TOP_K
    try:
        k = int(value)
    except ValueError:
        k = 0
    if k < 1:
        raise ValueError(f"{ENV_PRIOR_TOP_K}={value!r}: use a whole number of at least 1 "
                         f"(default {DEFAULT_PRIOR_TOP_K})")
    return k


def _falsy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"0", "false", "no", "off"}


def enabled_by_env() -> bool:
    """``INDUCTOR_FLYDSL=1``, except in the fork server of the plugin's own build workers:
    it imports torch and the package to preload them, and enabling the plugin there would
    start another build pool with its own fork server, which would do the same, without
    end."""
    return _truthy(os.environ.get(ENV_ENABLE)) and not in_build_fork_server()


# a module the build pool's fork server preloads (prebuild.PRELOAD names it from here)
BUILD_SERVER_MARK = "inductor_flydsl.flydsl_backend.prebuild"


def in_build_fork_server() -> bool:
    """Whether this code runs while the build pool's fork server preloads its modules
    (multiprocessing's forkserver ``main``, with :data:`BUILD_SERVER_MARK` in its preload
    list); its forked workers never import torch or the package again."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith("forkserver.py"):
            preload = frame.f_locals.get("preload")
            return isinstance(preload, list | tuple) and BUILD_SERVER_MARK in preload
        frame = frame.f_back
    return False
