"""The one place that touches FlyDSL's compiled-function internals (flydsl 0.5).

FlyDSL's ``@flyc.jit`` launcher traces the whole kernel on every call before it looks at
any cache (about 0.1 s of host time per call); only a ``flyc.CompiledFunction`` skips the
trace. This project splits what ``flyc.compile`` does in one process across two:

* a build worker traces and compiles the launcher for CPU placeholder arguments
  (:func:`compile_artifact`): FlyDSL then compiles without touching a GPU runtime, and
  the result is the compiled MLIR module as text (the host launcher with the GPU code
  object embedded, about 20-100 KB), which is exactly what FlyDSL's own disk cache keeps
  of a kernel;
* the launching process turns that text into a compiled function
  (:func:`compiled_function`) with the call layout FlyDSL derives from the launcher's
  signature and the real arguments, and never traces: no MLIR pass runs and no FlyDSL
  setting is read from the environment there.

Nothing is pickled: the text is a string. What is used of FlyDSL beyond its public API
(``CompiledFunction``'s slots, ``CompiledArtifact``'s state, ``_build_call_spec``, and
``JitFunction._trace``, which a test counts) is
listed in :data:`INTERNALS` and checked by :func:`problems` (in CI,
``tests/flydsl/test_launch_runtime.py``), so a FlyDSL upgrade that changes them is
reported by name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

# The HIP runtime library FlyDSL 0.5's runtime (libfly_jit_runtime.so) binds: the
# launcher loads it, and eligibility refuses a process where it cannot be loaded or is not
# the one torch loaded (hip_library.py)
from ..offer.hip_library import HIP_LIBRARY  # noqa: F401  (re-exported: the name users import)

# (module, attribute, what this project needs of it)
INTERNALS: tuple[tuple[str, str, str], ...] = (
    ("flydsl.compiler.jit_function", "CompiledFunction",
     "slots _call_spec, _backend, _keepalive; called with positional arguments"),
    ("flydsl.compiler.jit_function", "_build_call_spec",
     "(signature, arguments) -> the C ABI slots of one call"),
    ("flydsl.compiler.jit_executor", "CompiledArtifact",
     "__setstate__({'ir_text', 'entry'}) rebuilds a kernel from its compiled MLIR text; "
     "_ir_text, _entry, _get_func_exe()"),
    ("flydsl.compiler.jit_function", "JitFunction",
     "_ensure_sig() and _sig: the launcher's signature; _trace: the trace every "
     "@flyc.jit call runs, which tests/flydsl/test_launch_rocm.py counts to show that a "
     "warm launch never traces"),
    ("flydsl.compiler.jit_executor", "_resolve_runtime_libs",
     "lru-cached () -> the JIT runtime libraries an execution engine links; it detects the "
     "GPU arch first, by spawning rocm_agent_enumerator (300 s timeout), though the "
     "libraries do not depend on it: replaced once by the same list for the arch known "
     "(resolve_runtime_libraries)"),
    ("flydsl.compiler.backends", "get_backend",
     "get_backend(arch=...) -> the backend for a known arch, without detection; "
     ".jit_runtime_lib_basenames()"),
    ("flydsl.compiler.jit_executor", "build_abi_storage",
     "(slot ctypes) -> (storages, packed pointer array): a bound launch's own slots; "
     "_call_spec holds (argument index, ctype, fill(value, storage)) per slot, a "
     "tensor's pointer slot a c_void_p, the stream last"),
)


def problems() -> list[str]:
    """What of :data:`INTERNALS` is missing in the installed FlyDSL (empty: all there)."""
    import importlib

    found: list[str] = []
    for module_name, name, use in INTERNALS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            found.append(f"{module_name}: {exc}")
            continue
        if not hasattr(module, name):
            found.append(f"{module_name}.{name} is gone (used for: {use})")
    if not found:
        from flydsl.compiler.jit_executor import CompiledArtifact
        from flydsl.compiler.jit_function import CompiledFunction, JitFunction

        for cls, members in ((CompiledFunction, ("_call_spec", "_backend", "_keepalive")),
                             (CompiledArtifact, ("__setstate__", "_get_func_exe")),
                             (JitFunction, ("_ensure_sig", "_trace"))):
            for member in members:
                if not hasattr(cls, member):
                    found.append(f"{cls.__module__}.{cls.__name__}.{member} is gone")
        import inspect

        from flydsl.compiler.jit_executor import build_abi_storage

        if list(inspect.signature(build_abi_storage).parameters)[:1] != ["ctypes_seq"]:
            found.append("flydsl.compiler.jit_executor.build_abi_storage: parameters changed")
    return found


def compile_artifact(launcher: Callable, args: tuple) -> tuple[str, str]:
    """Trace and compile ``launcher`` for ``args`` (CPU tensors are placeholders: no GPU
    runtime is touched) in this process, with FlyDSL's settings as they are now; returns
    ``(ir_text, entry)``: the compiled module's text and its host entry point. Runs in a
    build worker (an LLVM fatal error ends only that process)."""
    import flydsl.compiler as flyc

    compiled = flyc.compile(launcher, *args)
    if compiled is None:
        raise RuntimeError("flyc.compile returned no compiled function (COMPILE_ONLY is set)")
    artifact = compiled._keepalive
    return artifact._ir_text, artifact._entry


def _artifact(ir_text: str, entry: str) -> Any:
    from flydsl.compiler.jit_executor import CompiledArtifact

    artifact = CompiledArtifact.__new__(CompiledArtifact)
    artifact.__setstate__({"ir_text": ir_text, "entry": entry})
    return artifact


@functools.cache
def _signature(launcher: Any) -> Any:
    launcher._ensure_sig()
    return launcher._sig


def compiled_function(launcher: Any, args: tuple, ir_text: str, entry: str) -> Callable:
    """A compiled function that runs the kernel in ``ir_text`` when called with
    ``args``-like positional arguments (the launcher's parameters, the stream last). Each
    call makes a new artifact: its first call loads the GPU code object on the device
    current then (a kernel module belongs to one device). No trace, no MLIR pass."""
    from flydsl.compiler.jit_function import CompiledFunction, _build_call_spec

    sig = _signature(launcher)
    bound = sig.bind(*args)
    bound.apply_defaults()
    compiled = CompiledFunction(None, _artifact(ir_text, entry))
    compiled._call_spec = _build_call_spec(sig, tuple(bound.arguments.values()))
    compiled._backend = "rocm"
    return compiled


_libraries_resolved = False


def resolve_runtime_libraries(arch: str) -> None:
    """Settle the JIT runtime libraries an execution engine links, for ``arch`` (known
    from the device), before the first engine is made in this process. FlyDSL resolves
    them once per process through its backend, which first detects the GPU arch by
    spawning ``rocm_agent_enumerator`` (a 300 s timeout) in the process that loads the
    kernel, though the list does not depend on the arch; here it is the same list, made
    by FlyDSL's backend for the arch given, and no process is spawned."""
    global _libraries_resolved
    if _libraries_resolved:
        return
    import functools
    from pathlib import Path

    from flydsl.compiler import jit_executor
    from flydsl.compiler.backends import get_backend

    if jit_executor._resolve_runtime_libs.cache_info().currsize == 0:
        directory = Path(jit_executor.__file__).resolve().parent.parent / "_mlir" / "_mlir_libs"
        libraries = [str(directory / name)
                     for name in get_backend(arch=arch).jit_runtime_lib_basenames()]
        missing = [p for p in libraries if not Path(p).exists()]
        if missing:
            raise FileNotFoundError(f"FlyDSL's JIT runtime libraries are missing: {missing}")
        jit_executor._resolve_runtime_libs = functools.lru_cache(maxsize=1)(
            lambda: list(libraries))
    _libraries_resolved = True


def load(compiled: Any) -> None:
    """Create the compiled function's execution engine now (loading its code object on
    the current device), instead of on its first launch."""
    compiled._keepalive._get_func_exe()


class BoundSlots:
    """A compiled function's argument slots, packed once for one call signature: only
    the tensor pointers (:attr:`pointers`: ``(storage, index into the op's tensors)``)
    and the stream are written per call; everything else (sizes, strides, scalars) was
    filled at bind time and holds for every call with the same signature."""

    __slots__ = ("_func_exe", "_packed", "_storages", "_stream", "pointers")

    def __init__(self, func_exe: Any, packed: Any, storages: list, pointers: list,
                 stream: tuple, sources: tuple) -> None:
        self._func_exe = func_exe
        self._packed = packed
        self._storages = storages  # kept alive: packed points into them
        # per source (index into the op's tensors), the pointer slots it fills and the
        # alignment its pointer must keep (alignment_mask)
        by_source: dict[int, list] = {}
        for storage, source in pointers:
            by_source.setdefault(source, []).append(storage)
        self.pointers = tuple((source, alignment_mask(sources[source].data_ptr()),
                               tuple(slots)) for source, slots in by_source.items())
        self._stream = stream

    def set_pointers(self, sources: tuple) -> bool:
        """Write the sources' pointers; False (nothing to launch: the caller takes the
        full path, which checks and refuses) when one is less aligned than at bind time."""
        for source, mask, slots in self.pointers:
            address = sources[source].data_ptr()
            if address & mask:
                return False
            for storage in slots:
                storage.value = address
        return True

    def set_stream(self, stream: Any) -> None:
        storage, fill = self._stream
        if fill is None:  # a plain pointer slot: the raw handle
            storage.value = stream
        else:
            fill(stream, storage)

    def call(self) -> None:
        self._func_exe(self._packed)


# The widest alignment any kernel argument needs (a 16-byte vector load: the dense
# template's base_align_bytes, an fp32 epilogue operand's 4-element loads)
MAX_ALIGN_BYTES = 16


def alignment_mask(address: int) -> int:
    """The low bits a bound call's pointer must leave clear: the alignment the bind-time
    pointer had (which passed every check of the full path), up to
    :data:`MAX_ALIGN_BYTES`. A pointer at least as aligned passes the same checks."""
    lowest = address & -address if address else MAX_ALIGN_BYTES
    return min(lowest, MAX_ALIGN_BYTES) - 1


_PROBE = 0x5EED0


def _probe_stream() -> int:
    return _PROBE


def bind_slots(compiled: Any, args: tuple, sources: tuple) -> BoundSlots | None:
    """Slots for calling ``compiled`` as with ``(*args, stream)``, filled from ``args``,
    each tensor pointer slot mapped to the one of ``sources`` (the op's own tensors) whose
    data it points at; None when that cannot be told (an argument tensor that is none of
    the sources, such as a split-K workspace, or two sources at one address) or the call
    has no stream slot."""
    import ctypes

    import torch
    from flydsl.compiler.jit_executor import build_abi_storage

    spec = compiled._call_spec
    where = {t.data_ptr(): i for i, t in enumerate(sources)}
    if len(where) != len(sources):
        return None
    storages, packed = build_abi_storage([ctype for _, ctype, _ in spec])
    pointers: list = []
    stream: tuple | None = None
    for slot, (index, ctype, fill) in enumerate(spec):
        if fill is None:
            continue  # a NULL slot (FlyDSL's default stream), never written
        if index == len(args):
            fill(_probe_stream(), storages[slot])
            # a c_void_p slot that a raw handle fills as is: written directly per call
            direct = ctype is ctypes.c_void_p and storages[slot].value == _PROBE
            stream = (storages[slot], None if direct else fill)
            continue
        value = args[index]
        fill(value, storages[slot])
        if isinstance(value, torch.Tensor) and ctype is ctypes.c_void_p:
            source = where.get(value.data_ptr())
            if source is None:
                return None
            pointers.append((storages[slot], source))
    if stream is None:
        return None
    return BoundSlots(compiled._keepalive._get_func_exe(), packed, storages, pointers, stream,
                      sources)
