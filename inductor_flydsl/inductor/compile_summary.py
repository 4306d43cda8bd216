"""``INDUCTOR_FLYDSL_LOG=summary``: one line on stderr per compile, saying what the plugin
did in it, for a user who enabled it with ``INDUCTOR_FLYDSL=1`` and changed no code.

A compile is what TorchDynamo's compile callbacks bracket (``internals.compile_callbacks``:
one frame, with every graph Inductor compiles for it, or a backward compiled lazily).
The line is the change of the process counters (``counters.PROCESS_STATS``) from the
compile's start to its end: GEMM selections served from the DB (hits), misses,
benchmarked by Inductor, recorded, and the rarer counters when not 0. Compiles running
at once in several threads share the counters, so each line then covers all of them.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from ..counters import PROCESS_STATS
from ..settings import LOG
from . import internals

log = logging.getLogger("inductor_flydsl.summary")
# named in every line; the rest only when not 0
MAIN = (("hits", "hits"), ("misses", "misses"), ("benchmarked", "benchmarked"),
        ("recorded", "recorded"))
EXTRA = (("dynamic_hits", "dynamic hits"), ("bucket_hits", "bucket hits"),
         ("prior_hits", "prior hits"), ("partial_hits", "partial hits"), ("stale", "stale"),
         ("fusions_replayed", "fusions replayed"),
         ("fusions_benchmarked", "fusions benchmarked"), ("refused", "refused"),
         ("errors", "plugin errors"))
COUNTED = tuple(name for name, _ in MAIN + EXTRA)

_lock = threading.Lock()
_start: dict[str, int] | None = None
_installed = False


def _counts() -> dict[str, int]:
    snapshot = PROCESS_STATS.snapshot()
    return {name: int(snapshot[name]) for name in COUNTED}


def summary_line(compile_id: str, before: dict[str, int], after: dict[str, int],
                 freezing: bool) -> str:
    """The line for one compile; ``freezing``: Inductor's ``config.freezing`` (a CPU
    compile without it autotunes no GEMM)."""
    delta = {name: after[name] - before[name] for name in COUNTED}
    parts = [f"{delta[name]} {label}" for name, label in MAIN]
    parts += [f"{delta[name]} {label}" for name, label in EXTRA if delta[name]]
    line = f"inductor_flydsl: compile {compile_id}: " + ", ".join(parts)
    if not any(delta.values()):
        line += (" (no GEMM was autotuned: is mode='max-autotune' set?"
                 + ("" if freezing else " On CPU Inductor autotunes only with "
                    "torch._inductor.config.freezing = True") + ")")
    return line


def _on_start(args: Any) -> None:
    global _start
    try:
        with _lock:
            _start = _counts()
    except Exception:  # a summary never breaks a compile
        log.debug("inductor_flydsl: compile summary failed", exc_info=True)


def _on_end(args: Any) -> None:
    global _start
    try:
        with _lock:
            before, _start = _start, None
        if before is None:
            return
        freezing = bool(getattr(internals.config, "freezing", False))
        line = summary_line(str(getattr(args, "compile_id", "?")), before, _counts(), freezing)
        log.info(line)
    except Exception:  # a summary never breaks a compile
        log.debug("inductor_flydsl: compile summary failed", exc_info=True)


def _ensure_handler() -> None:
    """The line goes to stderr whatever the user's logging set-up (and not twice)."""
    if not any(getattr(h, "_inductor_flydsl_summary", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._inductor_flydsl_summary = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def install() -> None:
    """Register the callbacks when ``INDUCTOR_FLYDSL_LOG=summary`` (once per process)."""
    global _installed
    if LOG.value() != "summary" or _installed:
        return
    _ensure_handler()
    handler = internals.compile_callbacks
    handler.register_start_callback(_on_start)
    handler.register_end_callback(_on_end)
    _installed = True


def uninstall() -> None:
    global _installed, _start
    if not _installed:
        return
    handler = internals.compile_callbacks
    handler.remove_start_callback(_on_start)
    handler.remove_end_callback(_on_end)
    _installed, _start = False, None
