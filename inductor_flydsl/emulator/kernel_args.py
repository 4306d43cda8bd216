"""Lay out kernel arguments as the code-object metadata describes them, and bind torch
tensors to emulated global memory.

FlyDSL passes an ``fx.Tensor`` parameter as a ``global_buffer`` pointer followed by a
``by_value`` struct of its dynamic layout: every dimension's extent as int32, then every
non-unit stride as int64 (a unit stride is static in the type). Integers are int32 and
floats float32, as the kernel signature declares.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import EmulatorError
from .memory import GlobalMemory
from .program import KernelInfo


@dataclass
class TensorBinding:
    """Where a tensor's storage lives in emulated memory."""

    data: np.ndarray
    base: int
    tensors: list[Any] = field(default_factory=list)


class Bindings:
    """Tensors bound to global memory, one buffer per distinct storage."""

    def __init__(self, memory: GlobalMemory) -> None:
        self.memory = memory
        self.by_storage: dict[int, TensorBinding] = {}

    def address_of(self, tensor: Any, *, writable: bool) -> int:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        binding = self.by_storage.get(key)
        if binding is None:
            data = _storage_bytes(storage)
            name = f"tensor{len(self.by_storage)}{tuple(tensor.shape)}"
            base = self.memory.add(name, data, writable=True)
            binding = TensorBinding(data, base)
            self.by_storage[key] = binding
        binding.tensors.append(tensor)
        return binding.base + tensor.storage_offset() * tensor.element_size()

    def read_back(self, tensor: Any) -> Any:
        """The emulated contents of ``tensor`` (a new CPU tensor of the same view)."""
        import torch

        binding = self.by_storage[tensor.untyped_storage().data_ptr()]
        flat = torch.frombuffer(bytearray(binding.data.tobytes()), dtype=tensor.dtype)
        return flat.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset()).clone()


def _storage_bytes(storage: Any) -> np.ndarray:
    """A copy of a CPU storage's bytes, through a uint8 tensor over the whole storage
    (``bytes(storage)`` reads it one byte per Python call: seconds per megabyte)."""
    import torch

    whole = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),))
    return whole.numpy().copy()


def _layout_struct(tensor: Any) -> bytes:
    shape = b"".join(struct.pack("<i", int(d)) for d in tensor.shape)
    strides = b"".join(struct.pack("<q", int(s)) for s in tensor.stride() if s != 1)
    return shape + strides


def pack_kernargs(info: KernelInfo, args: tuple, bindings: Bindings) -> np.ndarray:
    """The kernarg segment for ``args`` (tensors, ints, floats) as a byte array."""
    import torch

    meta = info.args
    buf = bytearray(max(info.kernarg_size, 8))
    slot = 0
    for position, value in enumerate(args):
        if slot >= len(meta):
            raise EmulatorError(f"the kernel declares {len(meta)} argument slots; argument "
                                f"{position} has none")
        entry = meta[slot]
        offset, size, kind = int(entry[".offset"]), int(entry[".size"]), entry[".value_kind"]
        if isinstance(value, torch.Tensor):
            if kind != "global_buffer":
                raise EmulatorError(f"argument {position} is a tensor but slot {slot} is {kind}")
            struct.pack_into("<Q", buf, offset, bindings.address_of(value, writable=True))
            slot += 1
            if slot < len(meta) and meta[slot][".value_kind"] == "by_value" and (
                    int(meta[slot][".size"]) == len(_layout_struct(value))):
                layout = _layout_struct(value)
                buf[int(meta[slot][".offset"]): int(meta[slot][".offset"]) + len(layout)] = layout
                slot += 1
            continue
        if kind != "by_value":
            raise EmulatorError(f"argument {position} is a scalar but slot {slot} is {kind}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EmulatorError(f"argument {position}: unsupported type {type(value).__name__}")
        if size != 4:
            raise EmulatorError(f"argument {position}: {size}-byte scalars are not supported")
        fmt = "<i" if isinstance(value, int) else "<f"
        struct.pack_into(fmt, buf, offset, value)
        slot += 1
    if slot != len(meta):
        raise EmulatorError(f"{len(args)} arguments filled {slot} of the kernel's {len(meta)} "
                            f"argument slots")
    return np.frombuffer(bytes(buf), dtype=np.uint8).copy()
