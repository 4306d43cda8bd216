"""How every FlyDSL kernel of this project is launched (the templates' ``launch`` calls
:meth:`KernelRunner.run`): through a FlyDSL compiled function, never by calling the
``@flyc.jit`` launcher (which re-traces the kernel on every call).

* **Builds happen in build workers** (:mod:`.prebuild`'s pool): a worker compiles the
  variant for the arch of the tensors' device (``FLYDSL_GPU_ARCH`` set in that worker
  only) and returns the compiled module's text (:mod:`.flydsl_runtime`). This process
  never traces, runs no MLIR pass, and changes no environment variable, so a launch on
  another thread never sees a half-set FlyDSL setting, and a compiler abort ends a
  worker, not the compile. A variant's text is reused by every shape (M, N and K are
  kernel arguments).
* **A compiled function per (variant, device, argument signature)**, in a bounded LRU
  (``INDUCTOR_FLYDSL_MAX_KERNELS``, default 256): its code object is loaded on the device the
  tensors live on (its first call runs with that device current), so a kernel never
  launches with another device's module. Evicted ones are dropped with their MLIR
  context and execution engine.
* **Graph-safe.** A kernel launched while its stream is capturing (a CUDA/HIP graph
  being recorded: ``hipStreamIsCapturing``) is pinned: never evicted, so its module is
  never unloaded while a graph that may replay it lives: for the process's life when
  cudagraph trees capture it, until the benchmark returns when Inductor's benchmark
  captures it (:func:`transient_pins`: that graph is dropped there). Nothing inside a
  capture loads a module (a kernel not loaded yet raises :class:`FlydslLaunchError`, and
  the op computes that call with ATen), allocates outside torch's allocator or
  synchronizes.
* **Pack once, launch many** (:class:`BoundLaunch`): the op binds its launch per (op,
  config, shapes, strides, dtypes, device) after a first launch through the full path;
  every later call with that signature writes only the operands' pointers and the stream
  into argument slots packed once, and calls the compiled host function directly (the
  sizes, strides and scalars, and every check that depends only on them, were settled at
  bind time).
* **Launch errors raise.** FlyDSL's runtime only prints a failed HIP call; after each
  launch the runner asks HIP for the thread's last error (``hipGetLastError``) and raises
  :class:`FlydslLaunchError`. A failed first launch (e.g. the module did not load) is
  not cached, so the next launch loads again.

The device side is a seam, :class:`DeviceRuntime`: :class:`RocmRuntime` (torch's ROCm
device, stream and arch) in production; tests install one over a stand-in HIP library
(``tests/fake_hip``) with :func:`use_runtime`, where CPU torch has no device or stream.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import ctypes
import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from ... import settings
from ..builds.flydsl_runtime import HIP_LIBRARY

log = logging.getLogger("inductor_flydsl")


class FlydslLaunchError(RuntimeError):
    """A FlyDSL kernel did not build, load or launch; nothing was written to ``out``."""


class DeviceRuntime(Protocol):
    """What a launch needs of the device it runs on."""

    def reasons(self, device: Any) -> list[str]:
        """Why kernels cannot be launched on ``device`` (empty: they can)."""

    def arch(self, tensor: Any) -> str:
        """The gfx arch of the device ``tensor`` lives on."""

    def device_index(self, tensor: Any) -> int: ...

    def current_device(self) -> int: ...

    def current_stream(self, tensor: Any) -> Any:
        """The stream a launch on ``tensor``'s device goes to by default (an int handle or
        an object with ``cuda_stream``)."""

    def stream_scope(self, stream: Any, device: Any = None) -> contextlib.AbstractContextManager:
        """Torch work (a split-K workspace and its reduction) on ``stream`` of ``device``."""

    def device_scope(self, index: int) -> contextlib.AbstractContextManager:
        """Device ``index`` current (a kernel module loads on the current device)."""

    def before_launch(self, args: tuple) -> None: ...

    # whether before_launch needs a launch's tensors (a test's emulator does; ROCm not)
    inspects_launches: bool

    def captures_graphs(self, device: Any) -> bool:
        """Whether kernels on ``device`` can be captured into CUDA/HIP graphs."""

    def is_capturing(self, stream: Any) -> bool:
        """Whether ``stream`` is being captured into a CUDA/HIP graph now."""

    def zeros_outside_graphs(self, numel: int, dtype: Any, device: Any, stream: Any) -> Any:
        """A zeroed tensor kept across calls and graphs (split-K arrival counters): never
        from a graph's private memory pool, zeroed without a host sync, ready before
        ``stream``'s next work. Not called while ``stream`` captures."""

    def last_error(self) -> tuple[int, str]:
        """HIP's last error of this thread, cleared: ``(code, name)``; code 0 = none."""


class HipErrors:
    """``hipGetLastError``/``hipGetErrorName`` and ``hipStreamIsCapturing`` of the HIP
    library in this process (loaded by name: the one torch or FlyDSL's runtime already
    loaded)."""

    def __init__(self, library: str = HIP_LIBRARY) -> None:
        self._library = library
        self._lib: Any = None

    def _get(self) -> Any:
        if self._lib is None:
            lib = ctypes.CDLL(self._library)
            lib.hipGetLastError.restype = ctypes.c_int
            lib.hipGetErrorName.restype = ctypes.c_char_p
            lib.hipGetErrorName.argtypes = [ctypes.c_int]
            lib.hipStreamIsCapturing.restype = ctypes.c_int
            lib.hipStreamIsCapturing.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            self._lib = lib
        return self._lib

    def is_capturing(self, stream: Any) -> bool:
        """``hipStreamIsCapturing`` of a raw stream handle (an int or ``cuda_stream``)."""
        handle = getattr(stream, "cuda_stream", stream)
        status = ctypes.c_int(0)
        if self._get().hipStreamIsCapturing(handle, ctypes.byref(status)):
            return False
        return status.value != 0

    def last_error(self) -> tuple[int, str]:
        lib = self._get()
        code = lib.hipGetLastError()
        if code == 0:
            return 0, ""
        return code, (lib.hipGetErrorName(code) or b"?").decode()


class RocmRuntime:
    """torch's ROCm devices and streams."""

    inspects_launches = False

    def __init__(self) -> None:
        self._errors = HipErrors()
        self._verified: set[Any] = set()
        self._side_streams: dict[int, Any] = {}  # device index -> the plugin's own stream
        self._archs: dict[Any, str] = {}

    def reasons(self, device: Any) -> list[str]:
        if device in self._verified:
            return []
        from ..offer.eligibility import runtime_reasons

        found = runtime_reasons(device)
        if not found:
            self._verified.add(device)
        return found

    def arch(self, tensor: Any) -> str:
        device = tensor.device
        arch = self._archs.get(device)
        if arch is None:
            from ...provenance.device import rocm_arch

            arch = self._archs[device] = str(rocm_arch(device))
        return arch

    def device_index(self, tensor: Any) -> int:
        return tensor.device.index or 0

    def current_device(self) -> int:
        import torch

        return torch._C._cuda_getDevice()  # torch.cuda.current_device() without its checks

    def current_stream(self, tensor: Any) -> Any:
        import torch

        # the raw handle, as Inductor's generated code reads it (get_raw_stream): no
        # Stream object made per launch
        return torch._C._cuda_getCurrentRawStream(tensor.device.index or 0)

    def stream_scope(self, stream: Any, device: Any = None) -> contextlib.AbstractContextManager:
        import torch

        if isinstance(stream, int):  # a raw handle belongs to a device: name it
            stream = torch.cuda.ExternalStream(stream, device=device)
        return torch.cuda.stream(stream)

    def captures_graphs(self, device: Any) -> bool:
        return getattr(device, "type", None) == "cuda"  # a ROCm GPU (torch calls it cuda)

    def is_capturing(self, stream: Any) -> bool:
        import torch

        if stream == torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice()):
            return torch._C._cuda_isCurrentStreamCapturing()  # no HIP call
        return self._errors.is_capturing(stream)

    def device_scope(self, index: int) -> contextlib.AbstractContextManager:
        import torch

        return torch.cuda.device(index)

    def before_launch(self, args: tuple) -> None:
        return None

    def zeros_outside_graphs(self, numel: int, dtype: Any, device: Any, stream: Any) -> Any:
        """Made and zeroed on a stream of the plugin's own: cudagraph trees route the
        allocations of the stream they warm up or capture on to the graph's private pool
        (``beginAllocateCurrentStreamToPool``), not those of another stream; then
        ``stream`` waits for the zeroing (a stream-ordered event, no host sync)."""
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        side = self._side_streams.get(index)
        if side is None:
            side = self._side_streams[index] = torch.cuda.Stream(device=index)
        target = stream if not isinstance(stream, int) else \
            torch.cuda.ExternalStream(stream, device=torch.device("cuda", index))
        with torch.cuda.stream(side):
            buffer = torch.zeros(numel, dtype=dtype, device=torch.device("cuda", index))
        target.wait_stream(side)
        return buffer

    def last_error(self) -> tuple[int, str]:
        return self._errors.last_error()


def _unit_dim(t: Any) -> int:
    stride = t.stride()
    return stride.index(1) if 1 in stride else -1


def argument_signature(args: tuple) -> tuple:
    """What FlyDSL specializes a compiled function on, per argument: a tensor's dtype,
    rank and unit-stride dimension (its dynamic layout), a scalar's type."""
    import torch

    return tuple((a.dtype, a.dim(), _unit_dim(a)) if isinstance(a, torch.Tensor) else type(a)
                 for a in args)


class KernelRunner:
    """Compiled FlyDSL kernels of this process and their launches."""

    def __init__(self, runtime: DeviceRuntime, max_kernels: int | None = None) -> None:
        self.runtime = runtime
        self.max_kernels = max_kernels or _max_kernels()
        self._compiled: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
        self._pinned: dict[tuple, Any] = {}  # launched under a capture: never evicted
        self._kept_for_life: set[tuple] = set()  # pinned by a capture outside a benchmark
        self._bound: collections.OrderedDict[tuple, BoundLaunch | None] = \
            collections.OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[tuple, threading.Lock] = {}
        self.loads = 0  # compiled functions made (a cache miss each)
        self.evictions = 0

    # ---- what the templates ask ----------------------------------------------------------
    def arch(self, tensor: Any) -> str:
        return self.runtime.arch(tensor)

    def stream(self, tensor: Any, stream: Any = None) -> Any:
        return self.runtime.current_stream(tensor) if stream is None else stream

    def stream_scope(self, stream: Any, device: Any = None) -> contextlib.AbstractContextManager:
        return self.runtime.stream_scope(stream, device)

    def is_capturing(self, stream: Any) -> bool:
        return self.runtime.is_capturing(stream)

    def zeros_outside_graphs(self, numel: int, dtype: Any, device: Any, stream: Any) -> Any:
        return self.runtime.zeros_outside_graphs(numel, dtype, device, stream)

    def run(self, variant: Any, args: tuple, stream: Any, tensor: Any) -> None:
        """Launch ``variant`` (the template's ``Variant``) with the launcher's positional
        ``args`` on ``stream``, on the device of ``tensor``. Inside :func:`binding`, the
        launch is then bound for the op's later calls (:class:`BoundLaunch`)."""
        device = self.runtime.device_index(tensor)
        key = (variant, device, argument_signature(args))
        compiled = self._compiled.get(key) or self._pinned.get(key)
        if compiled is None:
            self._load_and_launch(key, variant, args, stream)
        else:
            with contextlib.suppress(KeyError):  # evicted by another thread meanwhile
                self._compiled.move_to_end(key)
            if self.runtime.current_device() == device:
                self._launch(key, compiled, variant, args, stream, first=False)
            else:  # a kernel module belongs to its device: launch with that device current
                with self.runtime.device_scope(device):
                    self._launch(key, compiled, variant, args, stream, first=False)
        request = _binding.get()
        if request is not None:
            self._bind(request, key, variant, args)

    def _launch(self, key: tuple, compiled: Any, variant: Any, args: tuple, stream: Any, *,
                first: bool) -> None:
        self.runtime.before_launch(args)
        if not first:  # (a first launch keeps its load's errors: cleared before the load)
            self.runtime.last_error()  # clear what an earlier HIP call, not ours, left
        if self.runtime.is_capturing(stream):
            self._pin(key, compiled)
        compiled(*args, stream)
        code, name = self.runtime.last_error()
        if code:
            what = "failed to load or launch" if first else "failed to launch"
            raise FlydslLaunchError(f"FlyDSL kernel {_describe(variant)} {what}: "
                                    f"{name} ({code})")

    # ---- first launch of a key ---------------------------------------------------------
    def _load_and_launch(self, key: tuple, variant: Any, args: tuple, stream: Any) -> None:
        if self.runtime.is_capturing(stream):  # no module load inside a graph capture
            raise FlydslLaunchError(
                f"FlyDSL kernel {_describe(variant)} is not loaded and its stream is "
                "capturing a graph: loading a module there is not allowed")
        with self._lock:
            gate = self._loading.setdefault(key, threading.Lock())
        try:
            with gate:
                compiled = self._compiled.get(key) or self._pinned.get(key)
                if compiled is None:
                    self._make(key, variant, args, stream)
                    return
            with self.runtime.device_scope(key[1]):
                self._launch(key, compiled, variant, args, stream, first=False)
        finally:
            with self._lock:
                self._loading.pop(key, None)

    def _make(self, key: tuple, variant: Any, args: tuple, stream: Any) -> None:
        """Build (in a worker) or reuse the variant's compiled module, make its compiled
        function, load it on the key's device and launch it; cached only when that
        worked."""
        from ...template_loader import load_template
        from ..builds import flydsl_runtime
        from ..builds.prebuild import FlydslBuildError, build_for_launch

        try:
            ir_text, entry = build_for_launch(variant)
        except FlydslBuildError as exc:
            raise FlydslLaunchError(f"FlyDSL kernel {_describe(variant)} was not built: "
                                    f"{exc}") from exc
        template = load_template(variant.template)
        fused = {"epilogue": variant.epilogue} if variant.epilogue else {}
        launcher = template.build_gemm(variant.config, dtype=variant.dtype,
                                       layout=variant.layout, op=variant.op, arch=variant.arch,
                                       **fused)
        compiled = flydsl_runtime.compiled_function(launcher, (*args, stream), ir_text, entry)
        self.runtime.last_error()  # start clean: only this load's and launch's errors count
        flydsl_runtime.resolve_runtime_libraries(variant.arch)  # no arch detection here
        with self.runtime.device_scope(key[1]):
            flydsl_runtime.load(compiled)
            self._launch(key, compiled, variant, args, stream, first=True)
        with self._lock:
            if key not in self._pinned:
                self._compiled[key] = compiled
            self.loads += 1
            self._evict()

    # ---- pinning and eviction ----------------------------------------------------------
    def _pin(self, key: tuple, compiled: Any) -> None:
        """Keep ``compiled`` (and its module) while a graph captured now may replay it:
        for the life of the process (cudagraph trees keep their graphs), or, inside
        :func:`transient_pins` (Inductor benchmarking a candidate: its graph is dropped
        when the benchmark returns), until that scope ends."""
        scope = _transient.get()
        with self._lock:
            if scope is None:
                self._kept_for_life.add(key)
            elif key not in self._kept_for_life:
                scope.add((self, key))
            if key not in self._pinned:
                self._pinned[key] = compiled
                self._compiled.pop(key, None)

    def _unpin(self, keys: Iterable[tuple]) -> None:
        """Back under the LRU bound: pins whose graphs are gone (none kept for life)."""
        with self._lock:
            for key in keys:
                if key in self._kept_for_life or key not in self._pinned:
                    continue
                self._compiled[key] = self._pinned.pop(key)
            self._evict()

    def _evict(self) -> None:  # under self._lock
        while len(self._compiled) > self.max_kernels:
            key, _ = self._compiled.popitem(last=False)
            self.evictions += 1
            for bound_key in [k for k, b in self._bound.items() if b.key == key]:
                del self._bound[bound_key]  # they hold the compiled function too

    def pinned(self) -> int:
        return len(self._pinned)

    # ---- bound launches (pack once, launch many) --------------------------------------
    def bound(self, op_key: tuple) -> BoundLaunch | None:
        """The launch bound for ``op_key`` (:func:`binding`), if any."""
        return self._bound.get(op_key)

    def _bind(self, request: tuple[tuple, tuple], key: tuple, variant: Any,
              args: tuple) -> None:
        op_key, sources = request
        if op_key in self._bound:
            return
        compiled = self._compiled.get(key) or self._pinned.get(key)
        if compiled is None:
            return
        from ..builds import flydsl_runtime

        slots = flydsl_runtime.bind_slots(compiled, args, sources)
        # None: an argument that is none of the sources (a split-K workspace), or two
        # sources at one address; the key then keeps the full path
        bound = None if slots is None else BoundLaunch(self, key, compiled, variant, slots)
        with self._lock:
            self._bound[op_key] = bound
            while len(self._bound) > 4 * self.max_kernels:
                self._bound.popitem(last=False)

    # ---- upkeep ----------------------------------------------------------------------------
    def cached(self) -> int:
        return len(self._compiled) + len(self._pinned)


class BoundLaunch:
    """One launch signature of one compiled kernel, its argument slots packed once
    (``flydsl_runtime.bind_slots``): a call writes the operands' pointers and the stream,
    then calls the compiled host function. Used by one thread at a time (another thread
    meanwhile takes the full path)."""

    __slots__ = ("_busy", "_runner", "compiled", "device", "key", "slots", "variant")

    def __init__(self, runner: KernelRunner, key: tuple, compiled: Any, variant: Any,
                 slots: Any) -> None:
        self._runner = runner
        self.key = key
        self.device = key[1]
        self.compiled = compiled  # keeps the module loaded while bound
        self.variant = variant
        self.slots = slots
        self._busy = threading.Lock()

    def __call__(self, sources: tuple, out: Any) -> bool:
        """Launch on ``out``'s current stream with the pointers of ``sources`` (the op's
        tensors, in the order bound); False when ``out`` is on another device than the
        one bound, a pointer is less aligned than at bind time (the full path checks it)
        or another thread is using it (the caller takes the full path)."""
        runtime = self._runner.runtime
        if runtime.device_index(out) != self.device or not self._busy.acquire(blocking=False):
            return False
        try:
            runner = self._runner
            slots = self.slots
            if not slots.set_pointers(sources):
                return False
            stream = runtime.current_stream(out)
            slots.set_stream(stream)
            if runtime.inspects_launches:
                runtime.before_launch(sources)
            runtime.last_error()
            if runtime.is_capturing(stream):
                runner._pin(self.key, self.compiled)
            if runtime.current_device() == self.device:
                slots.call()
            else:
                with runtime.device_scope(self.device):
                    slots.call()
            code, name = runtime.last_error()
            if code:
                raise FlydslLaunchError(f"FlyDSL kernel {_describe(self.variant)} failed to "
                                        f"launch: {name} ({code})")
            return True
        finally:
            self._busy.release()


# (runner, key) pinned inside the current transient_pins() scope
_transient: contextvars.ContextVar[set[tuple[KernelRunner, tuple]] | None] = \
    contextvars.ContextVar("inductor_flydsl_transient_pins", default=None)


@contextlib.contextmanager
def transient_pins() -> Iterator[None]:
    """Inside the block (Inductor benchmarking a candidate, ``ops.strict_launches``), a
    kernel launched under a capture is pinned only until the block ends: the benchmark's
    graph is captured, replayed and dropped inside it. At the end those kernels go back
    under the LRU bound (``INDUCTOR_FLYDSL_MAX_KERNELS``), unless a capture outside such a
    block (cudagraph trees) pinned them meanwhile."""
    scope: set[tuple[KernelRunner, tuple]] = set()
    token = _transient.set(scope)
    try:
        yield
    finally:
        _transient.reset(token)
        by_runner: dict[KernelRunner, list[tuple]] = {}
        for owner, key in scope:
            by_runner.setdefault(owner, []).append(key)
        for owner, keys in by_runner.items():
            owner._unpin(keys)


# (op key, the op's tensors) while an op's full-path launch may be bound (binding())
_binding: contextvars.ContextVar[tuple[tuple, tuple] | None] = contextvars.ContextVar(
    "inductor_flydsl_binding", default=None)


@contextlib.contextmanager
def binding(op_key: tuple, sources: tuple) -> Iterator[None]:
    """Inside the block, the runner binds the launch it makes for ``op_key``: every
    argument tensor of that launch must be one of ``sources`` (or a view starting at one);
    later calls of the op with the same key then take :meth:`KernelRunner.bound`."""
    token = _binding.set((op_key, sources))
    try:
        yield
    finally:
        _binding.reset(token)


def _describe(variant: Any) -> str:
    config = ",".join(f"{k}={v}" for k, v in variant.config.to_json().items())
    extra = " with a fused epilogue" if variant.epilogue else ""
    return (f"{variant.template} {variant.op} {variant.dtype} {variant.layout} "
            f"{variant.arch} [{config}]{extra}")


def _max_kernels() -> int:
    return settings.MAX_KERNELS.value()


_runner: KernelRunner | None = None
_runner_lock = threading.Lock()


def runner() -> KernelRunner:
    """This process's runner (on :class:`RocmRuntime` unless a test installed another)."""
    global _runner
    current = _runner
    if current is None:
        with _runner_lock:
            if _runner is None:
                _runner = KernelRunner(RocmRuntime())
            current = _runner
    return current


@contextlib.contextmanager
def use_runtime(runtime: DeviceRuntime, max_kernels: int | None = None
                ) -> Iterator[KernelRunner]:
    """Launch through ``runtime`` (a fresh runner) inside the block: tests, on a stand-in
    HIP library."""
    global _runner
    with _runner_lock:
        saved, _runner = _runner, KernelRunner(runtime, max_kernels)
        installed = _runner
    try:
        yield installed
    finally:
        with _runner_lock:
            _runner = saved
