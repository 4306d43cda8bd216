"""Global memory (numpy buffers at fixed virtual addresses) and LDS with race tracking.

Global memory: buffer ``i`` lives at ``(i + 1) << 32``, so an address names its buffer by
its high 32 bits and its byte offset by the low 32 bits. An access that falls outside
every buffer is a :class:`MemoryFault` naming the instruction, wave, lane and address.

LDS: one byte array per workgroup, sized from the kernel's metadata. Each byte remembers
the last wave that wrote it and in which barrier epoch (an epoch is the span between two
workgroup barriers), and which waves read it in the current epoch. Two waves touching a
byte in the same epoch, one of them writing, is a :class:`~.errors.Race`. A byte whose
write is still outstanding (a ``ds_write`` the writer has not waited for with
``lgkmcnt``, or a direct-to-LDS buffer load not waited for with ``vmcnt``) may not be read
by another wave (nor, for a direct-to-LDS load, by the same wave): that is a hazard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import HazardError, Race

BUFFER_SHIFT = 32


@dataclass
class Buffer:
    name: str
    data: np.ndarray  # uint8
    writable: bool


class GlobalMemory:
    def __init__(self) -> None:
        self.buffers: list[Buffer] = []

    def add(self, name: str, data: np.ndarray, *, writable: bool) -> int:
        """Bind a byte array; returns its base address."""
        if data.dtype != np.uint8 or data.ndim != 1:
            raise ValueError("global buffers are 1-D uint8 arrays")
        self.buffers.append(Buffer(name, data, writable))
        return len(self.buffers) << BUFFER_SHIFT

    def _locate(self, addrs: np.ndarray, size: int, fault) -> tuple[Buffer, np.ndarray]:
        which = (addrs >> np.uint64(BUFFER_SHIFT)).astype(np.int64)
        first = int(which[0])
        if not 1 <= first <= len(self.buffers):
            fault(0, int(addrs[0]), "no buffer is bound at that address")
        other = np.flatnonzero(which != first)
        if other.size:
            lane = int(other[0])
            name = self.buffers[first - 1].name
            fault(lane, int(addrs[lane]), f"the access strays out of {name}")
        buf = self.buffers[first - 1]
        offsets = (addrs & np.uint64(0xFFFFFFFF)).astype(np.int64)
        over = np.flatnonzero(offsets + size > buf.data.size)
        if over.size:
            lane = int(over[0])
            fault(lane, int(addrs[lane]),
                  f"offset {int(offsets[lane])} + {size} bytes is past the end of "
                  f"{buf.name} ({buf.data.size} bytes)")
        return buf, offsets

    def load(self, addrs: np.ndarray, size: int, fault) -> np.ndarray:
        """Bytes ``[addr, addr + size)`` for each address: an ``(n, size)`` uint8 array."""
        if addrs.size == 0:
            return np.zeros((0, size), np.uint8)
        buf, offsets = self._locate(addrs, size, fault)
        return buf.data[offsets[:, None] + np.arange(size)]

    def store(self, addrs: np.ndarray, data: np.ndarray, fault) -> None:
        if addrs.size == 0:
            return
        size = data.shape[1]
        buf, offsets = self._locate(addrs, size, fault)
        if not buf.writable:
            fault(0, int(addrs[0]), f"{buf.name} is read-only")
        buf.data[offsets[:, None] + np.arange(size)] = data


def _raise_hazard(message: str) -> None:
    raise HazardError(message)


class Lds:
    """One workgroup's LDS with per-byte race and outstanding-write tracking."""

    def __init__(self, size: int, workgroup: tuple[int, int, int], on_hazard=None) -> None:
        self.on_hazard = on_hazard or _raise_hazard
        self.size = size
        self.workgroup = workgroup
        self.data = np.zeros(size, np.uint8)
        self.epoch = 0
        self.w_wave = np.full(size, -1, np.int16)
        self.w_epoch = np.full(size, -1, np.int32)
        self.w_instr = np.zeros(size, np.int32)
        self.r_epoch = np.full(size, -1, np.int32)
        self.r_mask = np.zeros(size, np.uint32)
        self.r_instr = np.zeros(size, np.int32)
        # Outstanding writes: op id per byte (0: none) and what each op is.
        self.pending = np.zeros(size, np.int64)
        # id -> [wave, vm, where, crossed a barrier, retired]
        self.pending_ops: dict[int, list] = {}
        self.races: list[Race] = []
        self._race_keys: set[tuple[str, int, int]] = set()

    def _indices(self, addrs: np.ndarray, size: int, fault) -> np.ndarray:
        addrs = addrs.astype(np.int64)
        bad = np.flatnonzero((addrs < 0) | (addrs + size > self.size))
        if bad.size:
            lane = int(bad[0])
            fault(lane, int(addrs[lane]), f"outside LDS ({self.size} bytes)")
        return (addrs[:, None] + np.arange(size)).reshape(-1)

    def _race(self, kind: str, byte: int, first_wave: int, first_instr: int, wave: int,
              instr: int, describe) -> None:
        key = (kind, first_instr, instr)
        if key in self._race_keys:
            return
        self._race_keys.add(key)
        self.races.append(Race(kind, self.workgroup, byte, first_wave, describe(first_instr),
                               wave, describe(instr)))

    def _check_pending(self, idx: np.ndarray, wave: int, where: str) -> None:
        ops = self.pending[idx]
        hit = np.flatnonzero(ops)
        for j in hit:
            owner, vm, origin, _, retired = self.pending_ops[int(ops[j])]
            if owner != wave or (vm and not retired):
                self.on_hazard(
                    f"{where} (wave {wave}) reads LDS byte {int(idx[j])} that an outstanding "
                    f"write of wave {owner} has not finished ({origin}); a s_waitcnt "
                    f"{'vmcnt' if vm else 'lgkmcnt'} is missing before the barrier or read")
                return

    def read(self, addrs: np.ndarray, size: int, wave: int, instr: int, fault, describe,
             where: str) -> np.ndarray:
        idx = self._indices(addrs, size, fault)
        if self.pending_ops:
            self._check_pending(idx, wave, where)
        e = self.epoch
        conflict = np.flatnonzero((self.w_epoch[idx] == e) & (self.w_wave[idx] != wave) &
                                  (self.w_wave[idx] >= 0))
        if conflict.size:
            b = int(idx[conflict[0]])
            self._race("read-after-write", b, int(self.w_wave[b]), int(self.w_instr[b]), wave,
                       instr, describe)
        stale = self.r_epoch[idx] != e
        self.r_mask[idx[stale]] = 0
        self.r_epoch[idx] = e
        self.r_mask[idx] |= np.uint32(1 << wave)
        self.r_instr[idx] = instr
        return self.data[idx].reshape(-1, size)

    def write(self, addrs: np.ndarray, data: np.ndarray, wave: int, instr: int, fault, describe,
              op_id: int) -> None:
        size = data.shape[1]
        idx = self._indices(addrs, size, fault)
        e = self.epoch
        others = np.uint32(~(1 << wave) & 0xFFFFFFFF)
        war = np.flatnonzero((self.r_epoch[idx] == e) & ((self.r_mask[idx] & others) != 0))
        if war.size:
            b = int(idx[war[0]])
            mask = int(self.r_mask[b]) & int(others)
            first = (mask & -mask).bit_length() - 1
            self._race("write-after-read", b, first, int(self.r_instr[b]), wave, instr, describe)
        waw = np.flatnonzero((self.w_epoch[idx] == e) & (self.w_wave[idx] != wave) &
                             (self.w_wave[idx] >= 0))
        if waw.size:
            b = int(idx[waw[0]])
            self._race("write-after-write", b, int(self.w_wave[b]), int(self.w_instr[b]), wave,
                       instr, describe)
        # Later writes land after earlier ones (in order): the bytes take the new data.
        self.data[idx] = data.reshape(-1)
        self.w_wave[idx] = wave
        self.w_epoch[idx] = e
        self.w_instr[idx] = instr
        if op_id:
            self.pending[idx] = op_id

    def retire(self, op_id: int) -> None:
        """The writer waited for the op. If it was still outstanding when a barrier
        released, other waves may only read its bytes after the next barrier."""
        entry = self.pending_ops.get(op_id)
        if entry is None:
            return
        if entry[3]:
            entry[4] = True
        else:
            self._clear(op_id)

    def _clear(self, op_id: int) -> None:
        del self.pending_ops[op_id]
        self.pending[self.pending == op_id] = 0

    def barrier(self) -> None:
        self.epoch += 1
        for op_id, entry in list(self.pending_ops.items()):
            if entry[4]:
                self._clear(op_id)
            else:
                entry[3] = True
