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

A compile that autotuned nothing says why it may be: a GEMM backend list
(``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS``) that leaves a GEMM only ATen, whatever the
mode (:func:`single_choice_causes`; ``doctor`` says it too), else the mode, and on CPU
freezing.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from ...settings import LOG, SettingError
from ...telemetry.counters import PROCESS_STATS
from ..adapter import internals
from . import compile_end
from .gemm_backends import FLYDSL, backend_tokens

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


BACKENDS_VARIABLE = "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS"
CPU_TEMPLATES = "CPP"  # Inductor's C++ GEMM templates: on CPU, ATen's only competitor
NOT_GPU = ("ATEN", CPU_TEMPLATES)


def single_choice_causes(gpu: bool, rocm: bool, backends: object | None = None) -> list[str]:
    """Why a GEMM gets a single choice, which Inductor never autotunes, whatever the
    mode: the backends asked for (``backends``; None: Inductor's config now) leave it only
    ATen: on CPU without CPP; on a GPU (``gpu``: one is visible) with no GPU backend
    (FLYDSL counts on ROCm only). One line per device, naming the setting and the fix."""
    text = str(internals.config.max_autotune_gemm_backends if backends is None else backends)
    tokens = set(backend_tokens(text))
    asked = f"the GEMM backends asked for ({BACKENDS_VARIABLE}={text})"
    causes = []
    if CPU_TEMPLATES not in tokens:
        causes.append(f"on CPU, {asked} have no {CPU_TEMPLATES}, so ATen is a GEMM's only "
                      f"choice and a single choice is never autotuned: add {CPU_TEMPLATES}")
    gpu_backends = tokens - set(NOT_GPU) - (set() if rocm else {FLYDSL})
    if gpu and not gpu_backends:
        causes.append(f"on the GPU, {asked} leave ATen a GEMM's only choice, and a single "
                      "choice is never autotuned: add TRITON")
    return causes


def summary_line(compile_id: str, before: dict[str, int], after: dict[str, int],
                 freezing: bool, causes: list[str] | None = None, gpu: bool = False) -> str:
    """The line for one compile; ``freezing``: Inductor's ``config.freezing`` (a CPU
    compile without it autotunes no GEMM); ``causes``: :func:`single_choice_causes`;
    ``gpu``: a GPU is visible (the compile may be for it or for the CPU)."""
    delta = {name: after[name] - before[name] for name in COUNTED}
    parts = [f"{delta[name]} {label}" for name, label in MAIN]
    parts += [f"{delta[name]} {label}" for name, label in EXTRA if delta[name]]
    line = f"inductor_flydsl: compile {compile_id}: " + ", ".join(parts)
    if not any(delta.values()):
        causes = causes or []
        # the backends are the cause for every device the compile may be for: the mode is
        # not the question then
        why = "; ".join(causes) if causes and len(causes) == 1 + gpu else "; ".join(
            ["is mode='max-autotune' set?", *causes])
        line += (f" (no GEMM was autotuned: {why}"
                 + ("" if freezing else ("" if why.endswith("?") else ".")
                    + " On CPU Inductor autotunes only with "
                    "torch._inductor.config.freezing = True") + ")")
    return line


def _machine() -> tuple[bool, bool]:
    """(a GPU is visible, torch is a ROCm build)."""
    import torch

    return bool(torch.cuda.is_available()), torch.version.hip is not None


def _on_end(args: Any) -> None:
    global _since
    try:
        with _lock:
            before, _since = _since, _counts()
            after = _since
        if before is None:
            return
        freezing = bool(getattr(internals.config, "freezing", False))
        gpu, rocm = _machine()
        causes = single_choice_causes(gpu, rocm) if after == before else []
        line = summary_line(str(getattr(args, "compile_id", "?")), before, after, freezing,
                            causes, gpu)
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
    try:
        wanted = LOG.read()
    except SettingError:  # enable() warned about the bad value, once: its default, off
        return
    if wanted != "summary":
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
