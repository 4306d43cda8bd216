"""``INDUCTOR_FLYDSL_LOG=summary``: one line on stderr per compile, saying what the plugin
did in it, for a user who enabled it with ``INDUCTOR_FLYDSL=1`` and changed no code.

A compile ends where TorchDynamo's compile-end callback runs (``internals.compile_callbacks``
through ``compile_end``, which puts it back after ``torch._dynamo.reset()``): one frame,
with every graph Inductor compiles for it, or a backward compiled lazily. The line is the
change of the process counters (``counters.PROCESS_STATS``) since the previous compile's
end (or since the summary was installed; the plugin's counters move only inside
compiles): GEMM selections served from the DB (hits), misses, benchmarked by Inductor,
recorded, and the rarer counters when not 0. No start callback is needed, so none can be
missing when a compile after a reset starts. Compiles running at once in several threads
share the counters, so each line then covers all of them.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from ..settings import LOG
from ..telemetry.counters import PROCESS_STATS
from . import compile_end, internals

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
_since: dict[str, int] | None = None  # the counters at the last compile's end


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


def _on_end(args: Any) -> None:
    global _since
    try:
        with _lock:
            before, _since = _since, _counts()
            after = _since
        if before is None:
            return
        freezing = bool(getattr(internals.config, "freezing", False))
        line = summary_line(str(getattr(args, "compile_id", "?")), before, after, freezing)
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
    """Register the callbacks when ``INDUCTOR_FLYDSL_LOG=summary`` (``compile_end`` keeps
    them installed, also after ``torch._dynamo.reset()``)."""
    if LOG.value() != "summary":
        return
    global _since
    _ensure_handler()
    with _lock:
        _since = _counts()
    compile_end.register(_on_end)


def uninstall() -> None:
    global _since
    compile_end.unregister(_on_end)
    _since = None
