"""The stand-in HIP runtime (``fake_hip.c``) for tests and benchmarks on hosts without an
AMD GPU: built with the system C compiler, loaded into this process under the soname
FlyDSL's runtime links against (``libamdhip64.so.7``), so FlyDSL's real runtime
(``libfly_jit_runtime.so``) binds to it when it loads a compiled kernel.

* :class:`FakeHip`: the library, its test controls (launch records, error injection,
  device count) and a load hook that registers each loaded kernel's argument table from
  its code object's metadata (as HIP lays out kernel arguments).
* :class:`Emulation`: the launch callback that runs each launched kernel in this
  project's ISA emulator, on the host memory its pointers name (the tensors of the
  launch, registered by :meth:`FakeHipRuntime.before_launch`).
* :class:`FakeHipRuntime`: the plugin's device seam (``kernel_runner.DeviceRuntime``)
  over it: CPU torch has no GPU device, stream or arch, so they come from here.

Launching a compiled FlyDSL kernel with no ``libamdhip64.so.7`` in the process aborts it:
load this library first (:func:`fake_hip`).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE, VERSION_SCRIPT = HERE / "fake_hip.c", HERE / "fake_hip.map"
SONAME = "libamdhip64.so.7"
RECORD, CALLBACK = 0, 1
MAX_KERNARG = 4096


class LaunchRecord(ctypes.Structure):
    _fields_ = [("module_id", ctypes.c_int), ("module_device", ctypes.c_int),
                ("device", ctypes.c_int), ("image", ctypes.c_void_p),
                ("image_size", ctypes.c_uint64), ("kernel", ctypes.c_char * 256),
                ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("shared_bytes", ctypes.c_uint32), ("stream", ctypes.c_void_p),
                ("kernarg_size", ctypes.c_uint32), ("kernarg", ctypes.c_uint8 * MAX_KERNARG)]


LAUNCH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(LaunchRecord))
LOAD_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64)


def build_library(out_dir: Path | None = None) -> Path:
    """Compile ``fake_hip.c`` into ``<out_dir>/<source hash>/libamdhip64.so.7`` (reused
    when it is there)."""
    digest = hashlib.sha256(SOURCE.read_bytes() + VERSION_SCRIPT.read_bytes()).hexdigest()[:16]
    root = Path(out_dir or os.environ.get("INDUCTOR_FLYDSL_CACHE_DIR")
                or Path.home() / ".cache" / "inductor_flydsl") / "fake_hip" / digest
    target = root / SONAME
    if not target.exists():
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f"{SONAME}.{os.getpid()}.tmp"
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-Wall",
                        "-Werror", f"-Wl,-soname,{SONAME}",
                        f"-Wl,--version-script={VERSION_SCRIPT}", "-o", str(tmp), str(SOURCE),
                        "-lpthread"], check=True, capture_output=True, text=True)
        tmp.replace(target)
    return target


class FakeHip:
    """The loaded library (one per process: the dynamic loader keeps the first library of
    a soname, and FlyDSL's runtime binds to it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        lib.fakehip_record.restype = ctypes.POINTER(LaunchRecord)
        lib.fakehip_record.argtypes = [ctypes.c_uint64]
        lib.fakehip_launch_count.restype = ctypes.c_uint64
        lib.fakehip_api_calls.restype = ctypes.c_uint64
        lib.fakehip_allocated.restype = ctypes.c_uint64
        lib.fakehip_set_malloc_limit.argtypes = [ctypes.c_uint64]
        lib.fakehip_image_hash.restype = ctypes.c_uint64
        lib.fakehip_image_hash.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        lib.fakehip_set_kernel_args.argtypes = [
            ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint32),
            ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32]
        lib.fakehip_set_mode.argtypes = [ctypes.c_int, LAUNCH_CALLBACK]
        lib.fakehip_set_load_callback.argtypes = [LOAD_CALLBACK]
        lib.hipGetErrorName.restype = ctypes.c_char_p
        for counter in ("fakehip_loads", "fakehip_unloads", "fakehip_during_capture"):
            getattr(lib, counter).restype = ctypes.c_uint64
        self._known: set[int] = set()
        self.load_errors: list[str] = []
        self._on_load = LOAD_CALLBACK(self._register_kernels)  # kept alive here
        lib.fakehip_set_load_callback(self._on_load)
        self._callback: Any = None

    # ---- argument tables, from each loaded code object's metadata -------------------
    def _register_kernels(self, image: int, size: int) -> int:
        try:
            from inductor_flydsl.emulator.code_object import kernel_args

            digest = self.lib.fakehip_image_hash(image, size)
            if digest in self._known:
                return 0
            for name, (args, segment) in kernel_args(ctypes.string_at(image, size)).items():
                offsets = (ctypes.c_uint32 * len(args))(*[o for o, _ in args])
                sizes = (ctypes.c_uint32 * len(args))(*[s for _, s in args])
                rc = self.lib.fakehip_set_kernel_args(digest, name.encode(), len(args),
                                                      offsets, sizes, segment)
                if rc:
                    raise RuntimeError(f"fakehip_set_kernel_args({name}) = {rc}")
            self._known.add(digest)
            return 0
        except Exception as exc:  # the load fails, as HIP's does on a bad code object
            self.load_errors.append(f"{type(exc).__name__}: {exc}")
            return 1

    # ---- controls -------------------------------------------------------------------
    def reset(self) -> None:
        self.lib.fakehip_reset()
        self._callback = None

    def record(self) -> None:
        self.lib.fakehip_set_mode(RECORD, LAUNCH_CALLBACK())
        self._callback = None

    def call(self, fn: Any) -> None:
        """Hand every launch to ``fn(record) -> bool`` (False fails the launch)."""
        def callback(record: Any) -> int:
            try:
                return 0 if fn(record.contents) else 1
            except Exception:  # a failure of the handler is a failed launch
                return 1
        self._callback = LAUNCH_CALLBACK(callback)
        self.lib.fakehip_set_mode(CALLBACK, self._callback)

    @contextlib.contextmanager
    def capturing(self):
        """Every stream reports an active capture (``hipStreamIsCapturing``) inside the
        block, as while a CUDA/HIP graph is recorded."""
        self.lib.fakehip_set_capturing(1)
        try:
            yield
        finally:
            self.lib.fakehip_set_capturing(0)

    def module_loads(self) -> int:
        return int(self.lib.fakehip_loads())

    def module_unloads(self) -> int:
        return int(self.lib.fakehip_unloads())

    def calls_during_capture(self) -> int:
        """Module loads or unloads, hipMalloc, hipMemcpy and synchronizations made while a
        capture was on (none may be)."""
        return int(self.lib.fakehip_during_capture())

    def fail_next(self, *, loads: int = 0, launches: int = 0, mallocs: int = 0) -> None:
        self.lib.fakehip_fail_next(loads, launches, mallocs)

    def set_device_count(self, n: int) -> None:
        self.lib.fakehip_set_device_count(n)

    def set_device(self, index: int) -> int:
        return self.lib.hipSetDevice(index)

    def current_device(self) -> int:
        device = ctypes.c_int(-1)
        self.lib.hipGetDevice(ctypes.byref(device))
        return device.value

    def create_stream(self) -> int:
        stream = ctypes.c_void_p()
        if self.lib.hipStreamCreate(ctypes.byref(stream)):
            raise RuntimeError("hipStreamCreate failed")
        return int(stream.value)

    def launch_count(self) -> int:
        return int(self.lib.fakehip_launch_count())

    def launches(self) -> list[dict[str, Any]]:
        out = []
        for i in range(min(self.launch_count(), 4096)):
            r = self.lib.fakehip_record(i).contents
            out.append({"module_id": r.module_id, "module_device": r.module_device,
                        "device": r.device, "kernel": r.kernel.decode(),
                        "grid": tuple(r.grid), "block": tuple(r.block),
                        "shared_bytes": r.shared_bytes, "stream": r.stream or 0,
                        "kernarg": bytes(r.kernarg[:r.kernarg_size]),
                        "image": ctypes.string_at(r.image, r.image_size)})
        return out


_loaded: FakeHip | None = None
_loaded_lock = threading.Lock()


def fake_hip(out_dir: Path | None = None) -> FakeHip:
    """The stand-in library, built and loaded into this process once."""
    global _loaded
    with _loaded_lock:
        if _loaded is None:
            _loaded = FakeHip(build_library(out_dir))
        return _loaded


# ---- running launches in the ISA emulator ---------------------------------------------
class HostMemory:
    """Global memory for the emulator at real host addresses: only the registered regions
    (a launch's tensors and its kernarg segment) may be read or written; anything else is
    a fault, never a host access."""

    def __init__(self) -> None:
        self.regions: list[tuple[int, int, np.ndarray, str]] = []

    def add_region(self, address: int, size: int, name: str) -> None:
        view = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))
        self.regions.append((address, size, view, name))

    def add(self, name: str, data: np.ndarray, *, writable: bool) -> int:
        """Bind a byte array (the kernarg segment) at its own host address."""
        self._keep = data
        self.add_region(data.ctypes.data, data.size, name)
        return int(data.ctypes.data)

    def _locate(self, addrs: np.ndarray, size: int, fault) -> tuple[np.ndarray, np.ndarray]:
        first = int(addrs[0])
        for start, length, view, name in self.regions:
            if start <= first < start + length:
                offsets = addrs.astype(np.int64) - start
                bad = np.flatnonzero((offsets < 0) | (offsets + size > length))
                if bad.size:
                    lane = int(bad[0])
                    fault(lane, int(addrs[lane]), f"the access strays out of {name}")
                return view, offsets
        fault(0, first, "no launch operand is at that address")
        raise AssertionError("unreachable")

    def load(self, addrs: np.ndarray, size: int, fault) -> np.ndarray:
        if addrs.size == 0:
            return np.zeros((0, size), np.uint8)
        view, offsets = self._locate(addrs, size, fault)
        return view[offsets[:, None] + np.arange(size)]

    def store(self, addrs: np.ndarray, data: np.ndarray, fault) -> None:
        if addrs.size == 0:
            return
        view, offsets = self._locate(addrs, data.shape[1], fault)
        view[offsets[:, None] + np.arange(data.shape[1])] = data


class Emulation:
    """Runs each launched kernel in the ISA emulator over the launch's host memory."""

    def __init__(self, runtime: FakeHipRuntime) -> None:
        self.runtime = runtime
        self.programs: dict[bytes, Any] = {}
        self.errors: list[str] = []
        self.runs = 0

    def __call__(self, record: Any) -> bool:
        from inductor_flydsl.emulator.code_object import assembly
        from inductor_flydsl.emulator.machine import Machine
        from inductor_flydsl.emulator.program import parse_program

        try:
            image = ctypes.string_at(record.image, record.image_size)
            key = hashlib.sha256(image).digest()
            program = self.programs.get(key)
            if program is None:
                program = self.programs[key] = parse_program(
                    assembly(image, record.kernel.decode()))
            memory = HostMemory()
            for address, size, name in self.runtime.regions:
                memory.add_region(address, size, name)
            kernarg = np.frombuffer(bytes(record.kernarg[:record.kernarg_size]),
                                    dtype=np.uint8).copy()
            address = memory.add("kernarg", kernarg, writable=False)
            Machine(program, memory).run(address, tuple(record.grid), tuple(record.block))
            self.runs += 1
            return True
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return False


class FakeHipRuntime:
    """``kernel_runner.DeviceRuntime`` over :class:`FakeHip` for CPU tensors: every
    tensor is on device ``device`` of arch ``arch``; launches go to one stream."""

    def __init__(self, hip: FakeHip, *, arch: str = "gfx950", device: int = 0,
                 emulate: bool = False, graphs: bool = False) -> None:
        from inductor_flydsl.flydsl_backend.run.kernel_runner import HipErrors

        self.hip = hip
        self.arch_name = arch
        self.device = device
        self.stream_handle = hip.create_stream()
        self.outside_graph_buffers: list[Any] = []  # zeros_outside_graphs' streams
        self.regions: list[tuple[int, int, str]] = []
        self.emulation = Emulation(self) if emulate else None
        # graphs: the CPU device stands for a GPU whose compiled graphs are captured (the
        # test then stands in for the capture too: CPU torch has no CUDA graphs)
        self.graphs = graphs
        self._errors = HipErrors(str(hip.path))
        hip.reset()
        if self.emulation is not None:
            hip.call(self.emulation)
        else:
            hip.record()

    def reasons(self, device: Any) -> list[str]:
        return []

    @property
    def inspects_launches(self) -> bool:
        return self.emulation is not None  # before_launch registers the operands

    def captures_graphs(self, device: Any) -> bool:
        return self.graphs

    def is_capturing(self, stream: Any) -> bool:
        return self._errors.is_capturing(stream)

    def arch(self, tensor: Any) -> str:
        return self.arch_name

    def device_index(self, tensor: Any) -> int:
        return self.device

    def current_device(self) -> int:
        return self.hip.current_device()

    def current_stream(self, tensor: Any) -> int:
        return self.stream_handle

    def stream_scope(self, stream: Any, device: Any = None) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def zeros_outside_graphs(self, numel: int, dtype: Any, device: Any, stream: Any) -> Any:
        import torch

        self.outside_graph_buffers.append(stream)
        return torch.zeros(numel, dtype=dtype)

    @contextlib.contextmanager
    def device_scope(self, index: int):
        saved = self.hip.current_device()
        if self.hip.set_device(index):
            raise RuntimeError(f"hipSetDevice({index}) failed")
        try:
            yield
        finally:
            self.hip.set_device(saved)

    def before_launch(self, args: tuple) -> None:
        if self.emulation is None:
            return
        import torch

        self.regions = []
        for i, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                self.regions.append((storage.data_ptr(), storage.nbytes(), f"argument {i}"))

    def last_error(self) -> tuple[int, str]:
        return self._errors.last_error()
