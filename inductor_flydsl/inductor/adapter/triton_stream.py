"""A Triton choice's kernel goes to the stream current when it runs: torch 2.14.1's fix,
backported while the plugin is on under a torch that lacks it (issue 50).

Graph timing (``timing_parity.py``) times every choice of a selection holding a FlyDSL
candidate by capturing one call into a CUDA/HIP graph and timing its replay
(``Benchmarker.benchmark_gpu_with_cuda_graph`` opens a capture on a side stream). In torch
2.13, ``TritonBenchmarkRequest.make_run_fn`` reads the raw stream when it builds the call
(``functools.partial(run, ..., stream=stream)``), before the capture opens: the kernel is
launched on the stream that was current then, not into the graph, and the replay that is
timed is empty (or the launch errors and the choice is ``inf``). Triton would win every
such selection with a near-zero time, and the DB would record it as graph-timed. torch
2.14.1 resolves the stream at call time ("Resolve the stream at call time",
``autotune_process.py``).

:func:`install` wraps ``make_run_fn`` (declared in ``internals.PATCHES``; put back by
``disable()``) where the installed torch binds the stream early (:func:`binds_stream_early`
reads its source): the call it returns reads the raw stream of its device each time it
runs. Elsewhere nothing is replaced. Remove this module when torch 2.13 support ends.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from . import internals, patches

OWNER, ATTR = "TritonBenchmarkRequest", "make_run_fn"
# what torch 2.13's make_run_fn holds and 2.14.1's does not: the stream bound into the
# partial it returns (2.14.1 defines a run_fn that reads the stream when called)
_EARLY_BINDING = "stream=stream"
_CALL_TIME = "def run_fn("


def binds_stream_early(make_run_fn: Any | None = None) -> bool:
    """Whether ``make_run_fn`` (default: the installed torch's, unpatched) binds the raw
    stream when it builds the call rather than when the call runs."""
    if make_run_fn is None:
        make_run_fn = _unpatched()
    try:
        source = inspect.getsource(make_run_fn)
    except (OSError, TypeError):
        return False
    return _EARLY_BINDING in source and _CALL_TIME not in source


def _unpatched() -> Any:
    owner = getattr(internals, OWNER)
    current = owner.__dict__.get(ATTR)
    return getattr(current, "__wrapped__", current)


def _raw_stream_reader(request: Any, out: Any) -> Callable[[], Any] | None:
    """How the call reads its stream when it runs: the device interface's raw stream of
    the request's output device (as torch 2.14.1 does); None for a CPU output (stream 0,
    nothing to resolve)."""
    device = getattr(out, "device", None)
    if device is None or device.type == "cpu":
        return None
    interface = internals.get_interface_for_device(device.type)
    index = request.output_tensor_meta.device.index
    return lambda: interface.get_raw_stream(index)


def resolve_stream_at_call_time(call: Any, read_stream: Callable[[], Any]) -> Any:
    """``call`` (a partial with ``stream=`` bound) as a function that passes the stream
    current when it runs; anything else is returned unchanged."""
    if not isinstance(call, functools.partial) or "stream" not in call.keywords:
        return call
    func, args, keywords = call.func, call.args, dict(call.keywords)

    def run_fn() -> Any:
        keywords["stream"] = read_stream()
        return func(*args, **keywords)

    run_fn.resolves_stream_at_call_time = True  # type: ignore[attr-defined]
    return run_fn


def _make_run_fn(self: Any, *input_tensors: Any, out: Any) -> Any:
    call = patches.original(OWNER, ATTR)(self, *input_tensors, out=out)
    read_stream = _raw_stream_reader(self, out)
    return call if read_stream is None else resolve_stream_at_call_time(call, read_stream)


def install() -> bool:
    """Wrap ``make_run_fn`` where the installed torch binds the stream early; whether the
    backport is in place."""
    if patches.is_applied(OWNER, ATTR):
        return True
    if not binds_stream_early():
        return False
    return patches.apply(OWNER, ATTR, _make_run_fn) is not None


def uninstall() -> None:
    patches.restore(OWNER, ATTR)
