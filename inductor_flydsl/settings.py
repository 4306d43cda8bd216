"""User-facing settings: modes, the default DB path, and every ``INDUCTOR_FLYDSL_*``
environment variable, read and checked here and nowhere else.

Each variable is one :class:`EnvSetting` (name, default, parser, doc line), listed in
:data:`ENV_SETTINGS`; the module that uses a setting asks it for its value. Two ways to
read one:

- :meth:`EnvSetting.read` raises :class:`SettingError` (a ``ValueError`` naming the
  variable, the value and the fix) on a bad value: ``enable()`` checks every variable this
  way (:func:`environment_errors`) before it touches Inductor, and a bad value turns the
  plugin off with one warning (``enable(strict=True)`` raises instead; ``docs/design.md``,
  "Failure policy");
- :meth:`EnvSetting.value` logs the same message and returns the default: for code that
  runs during a compile, or in a worker, which must never fail on a setting.

A setting marked ``display_only`` changes only what is printed (``INDUCTOR_FLYDSL_LOG``):
a bad value of it is one warning and its default, the plugin stays on (``strict`` still
raises). One marked ``internal`` is set by the package for its own child processes
(``INDUCTOR_FLYDSL_BUSY_NOTE``): never a typo, but not listed for users (``doctor``).

Two approximations trade the rule "the final code uses the kernels plain Inductor would
pick" for compile time, and are therefore off unless asked for: ``INDUCTOR_FLYDSL_PRIORS``
(``priors.py``) and ``INDUCTOR_FLYDSL_BUCKETS`` (``buckets.py``).

The package writes environment variables (its own, FlyDSL's, Inductor's) in one place:
:func:`overridden` sets them for a block and puts back what was there;
:func:`set_for_process` is its non-scoped form, for a write meant to last (a worker
process's own set-up, variables its child processes inherit), each call saying why.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

log = logging.getLogger("inductor_flydsl")
T = TypeVar("T")


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


class SettingError(ValueError):
    """A bad value of an ``INDUCTOR_FLYDSL_*`` variable; the message names the variable,
    its value and what a good value looks like."""

    def __init__(self, name: str, value: str, expected: str, default: Any) -> None:
        self.name, self.value, self.expected = name, value, expected
        shown = str(int(default)) if isinstance(default, bool) else str(default)
        super().__init__(f"{name}={value!r}: {expected} (or unset it"
                         + (")" if default is None else f"; default: {shown})"))
        self.names = [name]

    @classmethod
    def combine(cls, errors: list[SettingError]) -> SettingError:
        """One error for several bad variables (its message names them all)."""
        if len(errors) == 1:
            return errors[0]
        combined = cls(errors[0].name, errors[0].value, errors[0].expected, None)
        combined.args = ("; ".join(str(e) for e in errors),)
        combined.names = [e.name for e in errors]
        return combined


@dataclass(frozen=True)
class EnvSetting(Generic[T]):
    """One environment variable: ``parse`` turns a non-empty value into the setting or
    raises ``ValueError`` whose text says what a good value is. Unset or blank: ``default``."""

    name: str
    default: T
    parse: Callable[[str], T]
    doc: str
    display_only: bool = False  # only what is printed: a bad value never turns the plugin off
    internal: bool = False  # set by the package for its children, not by users

    def text(self, environ: Mapping[str, str] | None = None) -> str | None:
        value = (os.environ if environ is None else environ).get(self.name)
        return value if value is not None and value.strip() else None

    def read(self, environ: Mapping[str, str] | None = None) -> T:
        """The setting; :class:`SettingError` on a bad value."""
        value = self.text(environ)
        if value is None:
            return self.default
        try:
            return self.parse(value)
        except ValueError as exc:
            raise SettingError(self.name, value, str(exc), self.default) from None

    def value(self, environ: Mapping[str, str] | None = None) -> T:
        """The setting, or the default (logged) on a bad value: never raises."""
        try:
            return self.read(environ)
        except SettingError as exc:
            log.warning("inductor_flydsl: %s; using the default", exc)
            return self.default


# ---- parsers: each raises ValueError saying what a good value is -----------------------------
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def parse_flag(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError(f"use 1 or 0 (also {'/'.join(_TRUE[1:])} or {'/'.join(_FALSE[1:])})")


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    span = f"from {low} to {high}" if high is not None else f"of at least {low}"

    def parse(text: str) -> int:
        word = text.strip()
        number = int(word) if word.lstrip("-").isdigit() else None
        if number is None or number < low or (high is not None and number > high):
            raise ValueError(f"use a whole number {span}")
        return number
    return parse


def positive_number(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not number > 0 or number == float("inf"):
        raise ValueError("use a number above 0")
    return number


def one_of(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        word = text.strip().lower()
        if word not in allowed:
            close = difflib.get_close_matches(word, allowed, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"use one of: {', '.join(allowed)}{hint}")
        return word
    return parse


def parse_mode(text: str) -> Mode:
    try:
        return Mode.parse(text)
    except ValueError:
        raise ValueError(f"use one of: {', '.join(m.value for m in Mode)}") from None


def file_path(text: str) -> Path:
    path = Path(text).expanduser()
    if path.is_dir():
        raise ValueError("this is a directory; give the path of a DB file in it")
    return path


def directory_path(text: str) -> Path:
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError("this is a file; give a directory")
    return path


def free_text(text: str) -> str:
    return text


def module_names(text: str) -> tuple[str, ...]:
    """A comma-separated list of importable (dotted) module names."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [n for n in names if not all(p.isidentifier() for p in n.split("."))]
    if bad:
        raise ValueError("use importable package names, separated by commas "
                         f"({', '.join(bad)} is not one)")
    return names


# ---- the variables ---------------------------------------------------------------------------
DEFAULT_PRIOR_TOP_K = 2
DEFAULT_CANDIDATES, MAX_CANDIDATES = 12, 64
DEFAULT_TOP_K = 4
ON_BUSY_POLICIES = ("wait", "backoff", "record")

ENABLE = EnvSetting("INDUCTOR_FLYDSL", False, parse_flag,
                    "1: enable the plugin at `import torch` or `import inductor_flydsl`")
DB = EnvSetting[Path | None]("INDUCTOR_FLYDSL_DB", None, file_path,
                             "the tuning DB file (default: the per-user DB)")
MODE = EnvSetting("INDUCTOR_FLYDSL_MODE", Mode.READWRITE, parse_mode,
                  "readwrite (reuse and record), readonly (reuse, never write) or off")
SHIPPED = EnvSetting("INDUCTOR_FLYDSL_SHIPPED", True, parse_flag,
                     "0: do not layer the DBs shipped in the package under the user's")
REUSE = EnvSetting("INDUCTOR_FLYDSL_REUSE", True, parse_flag,
                   "0: never hand Inductor recorded timings: benchmark every GEMM again and "
                   "record it (sweep --remeasure sets it)")
PRIORS = EnvSetting("INDUCTOR_FLYDSL_PRIORS", False, parse_flag,
                    "1: with no exact record, benchmark only the short list of the nearest "
                    "older record (priors.py)")
PRIOR_TOP_K = EnvSetting("INDUCTOR_FLYDSL_PRIOR_TOP_K", DEFAULT_PRIOR_TOP_K, whole_number(1),
                         "how many of a prior's best candidates its short list keeps")
BUCKETS = EnvSetting("INDUCTOR_FLYDSL_BUCKETS", False, parse_flag,
                     "1: serve an M never measured the winner recorded at its dynamic-M "
                     "bucket (buckets.py)")
CANDIDATES = EnvSetting("INDUCTOR_FLYDSL_CANDIDATES", DEFAULT_CANDIDATES,
                        whole_number(1, MAX_CANDIDATES),
                        "FlyDSL configs offered per GEMM shape")
TOP_K = EnvSetting("INDUCTOR_FLYDSL_TOP_K", DEFAULT_TOP_K, whole_number(0, MAX_CANDIDATES),
                   "with no record of a GEMM, benchmark only the FlyDSL configs the "
                   "performance model ranks best (0: every offered config)")
BUILD_JOBS = EnvSetting[int | None]("INDUCTOR_FLYDSL_BUILD_JOBS", None, whole_number(0),
                                    "build worker processes (0: build at first launch; "
                                    "default: the CPUs, up to the candidates of a shape)")
BUILD_TIMEOUT_S = EnvSetting("INDUCTOR_FLYDSL_BUILD_TIMEOUT_S", 300.0, positive_number,
                             "seconds one build may take (at least 1 is used)")
MAX_KERNELS = EnvSetting("INDUCTOR_FLYDSL_MAX_KERNELS", 256, whole_number(1),
                         "compiled kernels a process keeps loaded")
CACHE_DIR = EnvSetting[Path | None]("INDUCTOR_FLYDSL_CACHE_DIR", None, directory_path,
                                    "the package's cache directory (default: "
                                    "~/.cache/inductor_flydsl)")
ON_BUSY = EnvSetting("INDUCTOR_FLYDSL_ON_BUSY", "wait", one_of(*ON_BUSY_POLICIES),
                     "the default of `sweep --on-busy`")
BUSY_CPU = EnvSetting("INDUCTOR_FLYDSL_BUSY_CPU", 0.25, positive_number,
                      "the share of the CPUs other processes may use before the machine "
                      "counts as busy")
REPEATS = EnvSetting("INDUCTOR_FLYDSL_REPEATS", 5, whole_number(1),
                     "timing samples per finalist (1: no re-measuring)")
LOG = EnvSetting("INDUCTOR_FLYDSL_LOG", "off", one_of("off", "summary"),
                 "summary: one line on stderr per compile: GEMM selections served from the "
                 "DB (hits), misses, benchmarked, recorded", display_only=True)
TEMPLATE_PACKAGES = EnvSetting[tuple[str, ...]](
    "INDUCTOR_FLYDSL_TEMPLATE_PACKAGES", (), module_names,
    "comma-separated packages of extra FlyDSL templates: each holds its kernel files and "
    "a TEMPLATE_SPECS list (flydsl_backend/specs/registry.py)")
BUSY_NOTE = EnvSetting("INDUCTOR_FLYDSL_BUSY_NOTE", "", free_text,
                       "set by the sweep runner: why the machine was busy before an item "
                       "(its selection is recorded low-confidence)", internal=True)

ENV_SETTINGS: tuple[EnvSetting[Any], ...] = (
    ENABLE, DB, MODE, SHIPPED, REUSE, PRIORS, PRIOR_TOP_K, BUCKETS, CANDIDATES, TOP_K, BUILD_JOBS,
    BUILD_TIMEOUT_S, MAX_KERNELS, CACHE_DIR, ON_BUSY, BUSY_CPU, REPEATS, LOG,
    TEMPLATE_PACKAGES, BUSY_NOTE)

# Variables of this project's scripts, not of the plugin: known, so never called a typo.
SCRIPT_VARIABLES = {
    "INDUCTOR_FLYDSL_KEEP_TORCH": "scripts/install.sh: keep the torch installed",
    "INDUCTOR_FLYDSL_SKIP_NEXT_TORCH": "scripts/install.sh: no second torch environment",
    "INDUCTOR_FLYDSL_NEXT_TORCH": "scripts/install.sh: the second torch release",
    "INDUCTOR_FLYDSL_SKIP_VLLM": "scripts/install.sh: no vLLM environment",
    "INDUCTOR_FLYDSL_VLLM_VERSION": "scripts/install.sh: the vLLM release it installs",
    "INDUCTOR_FLYDSL_TEST_JOBS": "scripts/run_tests.sh: pytest worker processes",
    "INDUCTOR_FLYDSL_OTHER_PYTHON": "scripts/run_tests.sh: the other torch's python",
    # the tests' fault injection (tests/faults/sitecustomize.py), set for sweep workers
    "INDUCTOR_FLYDSL_SWEEP_TEST_CRASH": "tests/faults: a sweep worker crashes on an item",
    "INDUCTOR_FLYDSL_SWEEP_TEST_HANG": "tests/faults: a sweep worker hangs on an item",
    "INDUCTOR_FLYDSL_SWEEP_TEST_BATCH_FAIL": "tests/faults: a sweep batch's compile raises",
    "INDUCTOR_FLYDSL_TEST_FORCE_ROCM": "tests/faults: FlyDSL offered as on ROCm",
    "INDUCTOR_FLYDSL_TEST_BUILD_CRASH": "tests/faults: a FlyDSL build worker crashes",
}

# the names, for code that sets a variable for a child process
ENV_ENABLE, ENV_DB, ENV_MODE = ENABLE.name, DB.name, MODE.name
ENV_SHIPPED, ENV_REUSE, ENV_PRIOR_TOP_K = SHIPPED.name, REUSE.name, PRIOR_TOP_K.name


def environment_errors(environ: Mapping[str, str] | None = None) -> list[SettingError]:
    """Every bad ``INDUCTOR_FLYDSL_*`` value in the environment."""
    errors = []
    for setting in ENV_SETTINGS:
        try:
            setting.read(environ)
        except SettingError as exc:
            errors.append(exc)
    return errors


DISPLAY_ONLY = frozenset(s.name for s in ENV_SETTINGS if s.display_only)


def user_settings() -> tuple[EnvSetting[Any], ...]:
    """The settings a user sets (``doctor`` lists these): all but the internal ones."""
    return tuple(s for s in ENV_SETTINGS if not s.internal)


class UnknownSetting(SettingError):
    """An ``INDUCTOR_FLYDSL_*`` variable that is no setting (a typo): it does nothing."""

    def __init__(self, name: str, value: str) -> None:
        prefix = ENABLE.name  # compare what follows it: every name shares it
        close = difflib.get_close_matches(name.removeprefix(prefix),
                                          [k.removeprefix(prefix) for k in KNOWN_NAMES], n=1)
        hint = f"did you mean {prefix}{close[0]}?" if close else (
            "the settings are listed by `inductor-flydsl doctor`")
        self.name, self.value = name, value
        self.expected = f"not a setting of inductor_flydsl, so it does nothing; {hint}"
        ValueError.__init__(self, f"{name}={value!r}: {self.expected}")
        self.names = [name]


KNOWN_NAMES = frozenset(s.name for s in ENV_SETTINGS) | frozenset(SCRIPT_VARIABLES)


def unknown_settings(environ: Mapping[str, str] | None = None) -> list[UnknownSetting]:
    """Every ``INDUCTOR_FLYDSL*`` variable set that is neither a setting nor a variable of
    this project's scripts: a typo (``_TOPK`` for ``_TOP_K``) that silently does
    nothing."""
    env = os.environ if environ is None else environ
    return [UnknownSetting(name, env[name]) for name in sorted(env)
            if name.startswith("INDUCTOR_FLYDSL") and name not in KNOWN_NAMES]


def default_db_path() -> Path:
    """The per-user tuning DB: ``$XDG_CACHE_HOME/inductor_flydsl/tuning.db``."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache_home) / "inductor_flydsl" / "tuning.db"


class DBSource(enum.StrEnum):
    """Where the tuning DB's path came from: an explicit path's missing folder is never
    created (a mistyped folder would silently make a new tree, docs/decisions.md); the
    default per-user path's is."""

    DEFAULT = "default"
    ENV = "env"
    ARGUMENT = "argument"

    def describe(self, path: Path) -> str:
        """How the user gave ``path``, as they would write it."""
        if self is DBSource.ENV:
            return f"{DB.name}={str(path)!r}"
        if self is DBSource.ARGUMENT:
            return f"enable(db_path={str(path)!r})"
        return f"the default per-user DB {path}"


@dataclass(frozen=True)
class Settings:
    db_path: Path
    mode: Mode
    use_shipped: bool
    use_buckets: bool = False  # opt-in: serve an unseen M its bucket's winner
    reuse: bool = True  # False: measure and record again, never serve recorded timings
    use_priors: bool = False  # opt-in: a short re-tune from the nearest older record
    prior_top_k: int = DEFAULT_PRIOR_TOP_K
    db_source: DBSource = DBSource.DEFAULT  # where db_path came from


def settings_from_env(db_path: str | os.PathLike[str] | None = None,
                      mode: str | Mode | None = None) -> Settings:
    """Explicit arguments win over the environment, which wins over the defaults. A bad
    explicit ``mode`` raises ``ValueError``; a bad ``INDUCTOR_FLYDSL_DB``, ``_MODE`` or
    ``_PRIOR_TOP_K`` raises :class:`SettingError`; a bad flag reads as its default."""
    from_env = DB.read() if db_path is None else None
    path = Path(db_path) if db_path is not None else from_env or default_db_path()
    source = (DBSource.ARGUMENT if db_path is not None else
              DBSource.ENV if from_env is not None else DBSource.DEFAULT)
    if mode is not None:
        try:
            chosen = Mode.parse(mode)
        except ValueError as exc:
            raise ValueError(f"mode={mode!r}: {exc}") from exc
    else:
        chosen = MODE.read()
    return Settings(db_path=path.expanduser(), mode=chosen, use_shipped=SHIPPED.value(),
                    use_buckets=BUCKETS.value(), reuse=REUSE.value(),
                    use_priors=PRIORS.value(), prior_top_k=PRIOR_TOP_K.read(),
                    db_source=source)


def enabled_by_env() -> bool:
    """``INDUCTOR_FLYDSL=1`` (a bad value raises :class:`SettingError`). The plugin's own
    build server imports torch and the package too; it is started with
    ``INDUCTOR_FLYDSL=0`` (``flydsl_backend/builds/build_client.py``), so it never enables the
    plugin, which would start another build server."""
    return ENABLE.read()


def set_for_process(values: Mapping[str, str | None]) -> None:
    """Set environment variables for the rest of this process and the processes it starts
    (a value None unsets its name): the non-scoped form of :func:`overridden`, for a write
    meant to last; the caller says why in a comment."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def overridden(values: Mapping[str, str | None]) -> Iterator[None]:
    """Environment variables set for the block (a value None unsets its name), each put
    back as it was after it, whether the block raises or not. Not a lock: a caller whose
    other threads read the same names holds its own (``cross_compile.compile_env``)."""
    saved = {name: os.environ.get(name) for name in values}
    set_for_process(values)
    try:
        yield
    finally:
        set_for_process(saved)
