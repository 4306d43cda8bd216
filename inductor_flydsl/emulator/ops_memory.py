"""Memory instructions: scalar loads (SMEM), global (FLAT global) and buffer (MUBUF) loads
and stores, LDS (DS) reads and writes, and buffer loads straight into LDS.

Loads read memory when they issue and fill their destination registers at once, but the
registers stay *pending* until a ``s_waitcnt`` retires the load (see
:mod:`.machine`): reading them earlier is a hazard. Buffer accesses follow the ISA guide's
range checking: with a raw descriptor (stride 0, no ``idxen``) a dword component whose
bytes reach past ``num_records`` (counted from the VGPR and instruction offsets; the
SGPR offset is not range-checked) reads as 0 and is not written.
"""

from __future__ import annotations

import numpy as np

from .decode import Compiled, DecodeContext, codes, opcode, operands, sreader
from .errors import MemoryFault, UnknownOpcode
from .operands import M0, SGPR_BASE, Operand
from .program import Instruction
from .wave import MemOp, Wave

_SIZES = {"dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16, "ubyte": 1, "sbyte": 1,
          "ushort": 2, "sshort": 2, "short_d16": 2, "short_d16_hi": 2, "ubyte_d16": 1,
          "ubyte_d16_hi": 1, "byte": 1, "short": 2, "byte_d16_hi": 1, "sbyte_d16": 1}


def _fault_fn(ins: Instruction, w: Wave, lanes: np.ndarray):
    def fault(index: int, address: int, why: str) -> None:
        lane = int(lanes[index]) if lanes.size else 0
        raise MemoryFault(f"{ins.where()}: wave {w.wave_id} of workgroup {w.workgroup}, "
                          f"lane {lane}, address {address:#x}: {why}")

    return fault


def _offset(ins: Instruction, name: str = "offset") -> int:
    text = ins.modifier(name, "0")
    return int(text, 0) if text else 0


def _widen(data: np.ndarray, kind: str) -> np.ndarray:
    """Bytes ``(n, size)`` to the 32-bit words a load writes, ``(n, words)``."""
    n, size = data.shape
    if size % 4 == 0:
        return data.view(np.uint32).reshape(n, size // 4)
    if kind in ("ushort", "short_d16", "short_d16_hi"):
        return data.view(np.uint16).astype(np.uint32).reshape(n, 1)
    if kind == "sshort":
        return data.view(np.int16).astype(np.int32).view(np.uint32).reshape(n, 1)
    if kind == "sbyte":
        return data.view(np.int8).astype(np.int32).view(np.uint32).reshape(n, 1)
    return data.astype(np.uint32).reshape(n, 1)


def _write_loaded(w: Wave, dst: Operand, lanes: np.ndarray, words: np.ndarray, kind: str) -> None:
    assert dst.reg is not None
    reg = w.vfile(dst.reg.file)
    base = dst.reg.index
    if kind.endswith("d16_hi"):
        reg[base, lanes] = (reg[base, lanes] & np.uint32(0xFFFF)) | (words[:, 0] << np.uint32(16))
    elif kind.endswith("d16"):
        low = words[:, 0] & np.uint32(0xFFFF)
        reg[base, lanes] = (reg[base, lanes] & np.uint32(0xFFFF0000)) | low
    else:
        for j in range(words.shape[1]):
            reg[base + j, lanes] = words[:, j]


def _store_bytes(w: Wave, src: Operand, lanes: np.ndarray, size: int, kind: str) -> np.ndarray:
    assert src.reg is not None
    if lanes.size == 0:
        return np.zeros((0, size), np.uint8)
    reg = w.vfile(src.reg.file)
    base = src.reg.index
    words = reg[base: base + max(1, size // 4), :][:, lanes].T.copy()  # (n, words)
    if kind.endswith("d16_hi"):
        words = words >> np.uint32(16)
    data = words.view(np.uint8).reshape(len(lanes), -1)
    return data[:, :size]


def _issue(ctx: DecodeContext, w: Wave, ins: Instruction, counter: str, dst_codes: tuple[int, ...],
           *, smem: bool = False, lds_write: bool = False) -> MemOp:
    op = MemOp(ctx.machine.next_op_id(), counter, smem, dst_codes, lds_write, ins.where())
    (w.vm_queue if counter == "vm" else w.lgkm_queue).append(op)
    for code in dst_codes:
        w.pending[code] = op
    return op


# -- scalar loads ------------------------------------------------------------------------
@opcode("s_load_dword", "s_load_dwordx2", "s_load_dwordx4", "s_load_dwordx8",
        "s_load_dwordx16", "s_buffer_load_dword", "s_buffer_load_dwordx2",
        "s_buffer_load_dwordx4", "s_buffer_load_dwordx8", "s_buffer_load_dwordx16")
def _smem(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, base, off = operands(ins, 3)
    words = int(ins.mnemonic.rsplit("dword", 1)[1].lstrip("x") or 1)
    roff = sreader(off, ins)
    assert d.reg is not None and base.reg is not None
    dst, b = d.reg.index, base.reg.index
    buffer = ins.mnemonic.startswith("s_buffer")
    memory = ctx.machine.memory

    def run(w: Wave) -> None:
        if buffer:
            addr = w.s[b] | (w.s[b + 1] & 0xFFFF) << 32
        else:
            addr = w.get_s64(b)
        addr += roff(w)
        data = memory.load(np.array([addr], np.uint64), 4 * words,
                           _fault_fn(ins, w, np.zeros(1, np.int64)))
        values = data.view(np.uint32).reshape(-1)
        for j in range(words):
            w.s[dst + j] = int(values[j])
        _issue(ctx, w, ins, "lgkm", tuple(SGPR_BASE + dst + j for j in range(words)), smem=True)

    return Compiled(ins, run, codes(base, off), codes(d), kind="mem")


# -- global ------------------------------------------------------------------------------
def _global_addr(vaddr: Operand, saddr: Operand, ins: Instruction):
    offset = _offset(ins)
    assert vaddr.reg is not None
    vi, file = vaddr.reg.index, vaddr.reg.file
    if saddr.text == "off":
        def addr(w: Wave, lanes: np.ndarray) -> np.ndarray:
            reg = w.vfile(file)
            lo, hi = reg[vi, lanes].astype(np.uint64), reg[vi + 1, lanes].astype(np.uint64)
            return (lo | (hi << np.uint64(32))) + np.uint64(offset & 0xFFFFFFFFFFFFFFFF)
        return addr
    rs = sreader(saddr, ins, 64)

    def addr_s(w: Wave, lanes: np.ndarray) -> np.ndarray:
        return (np.uint64(rs(w)) + w.vfile(file)[vi, lanes].astype(np.uint64) +
                np.uint64(offset & 0xFFFFFFFFFFFFFFFF))
    return addr_s


def _global_load(ins: Instruction, ctx: DecodeContext) -> Compiled:
    kind = ins.mnemonic.removeprefix("global_load_")
    size = _SIZES[kind]
    d, vaddr, saddr = operands(ins, 3)
    addr = _global_addr(vaddr, saddr, ins)
    memory = ctx.machine.memory

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        data = memory.load(addr(w, lanes), size, _fault_fn(ins, w, lanes))
        _write_loaded(w, d, lanes, _widen(data, kind), kind)
        _issue(ctx, w, ins, "vm", d.codes())

    reads = codes(vaddr) + (codes(saddr) if saddr.text != "off" else ())
    if kind.endswith(("d16", "d16_hi")):
        reads += codes(d)
    return Compiled(ins, run, reads, codes(d), kind="mem")


def _global_store(ins: Instruction, ctx: DecodeContext) -> Compiled:
    kind = ins.mnemonic.removeprefix("global_store_")
    size = _SIZES[kind]
    vaddr, data_op, saddr = operands(ins, 3)
    addr = _global_addr(vaddr, saddr, ins)
    memory = ctx.machine.memory

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        data = _store_bytes(w, data_op, lanes, size, kind)
        memory.store(addr(w, lanes), data, _fault_fn(ins, w, lanes))
        _issue(ctx, w, ins, "vm", ())

    reads = codes(vaddr, data_op) + (codes(saddr) if saddr.text != "off" else ())
    return Compiled(ins, run, reads, (), kind="mem")


for _kind in ("dword", "dwordx2", "dwordx3", "dwordx4", "ubyte", "sbyte", "ushort", "sshort",
              "short_d16", "short_d16_hi"):
    opcode(f"global_load_{_kind}")(_global_load)
for _kind in ("dword", "dwordx2", "dwordx3", "dwordx4", "byte", "short", "short_d16_hi",
              "byte_d16_hi"):
    opcode(f"global_store_{_kind}")(_global_store)


# -- buffer ------------------------------------------------------------------------------
class _Descriptor:
    def __init__(self, w: Wave, index: int, ins: Instruction) -> None:
        s = w.s
        self.base = s[index] | (s[index + 1] & 0xFFFF) << 32
        self.stride = (s[index + 1] >> 16) & 0x3FFF
        self.num_records = s[index + 2]
        if (s[index + 3] >> 23) & 1:
            raise UnknownOpcode(f"buffer descriptor with ADD_TID_ENABLE ({ins.where()})")


def _buffer_offsets(ins: Instruction, vaddr: Operand, w: Wave, lanes: np.ndarray,
                    desc: _Descriptor) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-lane byte offsets within the buffer (before soffset) and, if idxen, indices."""
    inst = _offset(ins)
    offen, idxen = ins.has("offen"), ins.has("idxen")
    voff = np.zeros(lanes.size, np.int64)
    index = None
    if offen or idxen:
        assert vaddr.reg is not None
        reg = w.vfile(vaddr.reg.file)
        first = reg[vaddr.reg.index, lanes].astype(np.int64)
        if idxen:
            index = first
            if offen:
                voff = reg[vaddr.reg.index + 1, lanes].astype(np.int64)
        else:
            voff = first
    offsets = voff + inst
    if index is not None:
        offsets = offsets + index * desc.stride
    return offsets, index


def _in_range(offsets: np.ndarray, index: np.ndarray | None, size: int,
              desc: _Descriptor) -> np.ndarray:
    if index is not None and desc.stride:
        return index < desc.num_records
    return offsets + size <= desc.num_records


def _buffer_parts(ins: Instruction):
    ops = operands(ins)
    lds = ins.has("lds")
    if lds:
        vaddr, srsrc, soffset = ops
        return None, vaddr, srsrc, soffset
    if len(ops) != 4:
        raise UnknownOpcode(f"expected 4 operands ({ins.where()})")
    return ops[0], ops[1], ops[2], ops[3]


def _buffer_load(ins: Instruction, ctx: DecodeContext) -> Compiled:
    kind = ins.mnemonic.removeprefix("buffer_load_")
    size = _SIZES[kind]
    dst, vaddr, srsrc, soffset = _buffer_parts(ins)
    assert srsrc.reg is not None
    rsrc, rsoff = srsrc.reg.index, sreader(soffset, ins)
    memory, to_lds = ctx.machine.memory, dst is None
    comp = 4 if size >= 4 else size

    def run(w: Wave) -> None:
        desc = _Descriptor(w, rsrc, ins)
        lanes = np.flatnonzero(w.exec_mask)
        offsets, index = _buffer_offsets(ins, vaddr, w, lanes, desc)
        data = np.zeros((lanes.size, size), np.uint8)
        fault = _fault_fn(ins, w, lanes)
        for c in range(0, size, comp):
            ok = _in_range(offsets + c, index, comp, desc)
            if ok.any():
                addrs = (np.uint64(desc.base + rsoff(w)) + (offsets[ok] + c).astype(np.uint64))
                data[ok, c: c + comp] = memory.load(addrs, comp, _fault_fn(ins, w, lanes[ok]))
        if to_lds:
            lds_addr = (w.s[M0] & 0x3FFFF) + _offset(ins) + lanes.astype(np.int64) * size
            op = _issue(ctx, w, ins, "vm", (), lds_write=True)
            ctx.machine.lds_write(w, ins, lds_addr, data, fault, op)
        else:
            _write_loaded(w, dst, lanes, _widen(data, kind), kind)
            _issue(ctx, w, ins, "vm", dst.codes())

    reads = codes(srsrc, soffset) + (codes(vaddr) if vaddr.reg is not None else ())
    if to_lds:
        reads += (SGPR_BASE + M0,)
    return Compiled(ins, run, reads, () if to_lds else codes(dst), kind="mem")


def _buffer_store(ins: Instruction, ctx: DecodeContext) -> Compiled:
    kind = ins.mnemonic.removeprefix("buffer_store_")
    size = _SIZES[kind]
    data_op, vaddr, srsrc, soffset = operands(ins, 4)
    assert srsrc.reg is not None
    rsrc, rsoff = srsrc.reg.index, sreader(soffset, ins)
    memory = ctx.machine.memory
    comp = 4 if size >= 4 else size

    def run(w: Wave) -> None:
        desc = _Descriptor(w, rsrc, ins)
        lanes = np.flatnonzero(w.exec_mask)
        offsets, index = _buffer_offsets(ins, vaddr, w, lanes, desc)
        data = _store_bytes(w, data_op, lanes, size, kind)
        for c in range(0, size, comp):
            ok = _in_range(offsets + c, index, comp, desc)
            if ok.any():
                addrs = np.uint64(desc.base + rsoff(w)) + (offsets[ok] + c).astype(np.uint64)
                memory.store(addrs, np.ascontiguousarray(data[ok, c: c + comp]),
                             _fault_fn(ins, w, lanes[ok]))
        _issue(ctx, w, ins, "vm", ())

    reads = codes(data_op, srsrc, soffset) + (codes(vaddr) if vaddr.reg is not None else ())
    return Compiled(ins, run, reads, (), kind="mem")


for _kind in ("dword", "dwordx2", "dwordx3", "dwordx4", "ubyte", "sbyte", "ushort", "sshort",
              "short_d16", "short_d16_hi"):
    opcode(f"buffer_load_{_kind}")(_buffer_load)
for _kind in ("dword", "dwordx2", "dwordx3", "dwordx4", "byte", "short", "short_d16_hi",
              "byte_d16_hi"):
    opcode(f"buffer_store_{_kind}")(_buffer_store)


# -- LDS ---------------------------------------------------------------------------------
_DS_READ = {"ds_read_b32": (4, "dword"), "ds_read_b64": (8, "dword"),
            "ds_read_b96": (12, "dword"), "ds_read_b128": (16, "dword"),
            "ds_read_u8": (1, "ubyte"), "ds_read_i8": (1, "sbyte"),
            "ds_read_u16": (2, "ushort"), "ds_read_i16": (2, "sshort"),
            "ds_read_u16_d16": (2, "short_d16"), "ds_read_u16_d16_hi": (2, "short_d16_hi")}
_DS_WRITE = {"ds_write_b8": (1, "byte"), "ds_write_b16": (2, "short"),
             "ds_write_b32": (4, "dword"), "ds_write_b64": (8, "dword"),
             "ds_write_b96": (12, "dword"), "ds_write_b128": (16, "dword"),
             "ds_write_b16_d16_hi": (2, "short_d16_hi"), "ds_write_b8_d16_hi": (1, "byte_d16_hi")}


def _lds_addr(w: Wave, vaddr: Operand, lanes: np.ndarray, offset: int) -> np.ndarray:
    assert vaddr.reg is not None
    return w.vfile(vaddr.reg.file)[vaddr.reg.index, lanes].astype(np.int64) + offset


def _ds_read(ins: Instruction, ctx: DecodeContext) -> Compiled:
    size, kind = _DS_READ[ins.mnemonic]
    d, vaddr = operands(ins, 2)
    offset, machine = _offset(ins), ctx.machine

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        data = machine.lds_read(w, ins, _lds_addr(w, vaddr, lanes, offset), size,
                                _fault_fn(ins, w, lanes))
        _write_loaded(w, d, lanes, _widen(data, kind), kind)
        _issue(ctx, w, ins, "lgkm", d.codes())

    reads = codes(vaddr) + (codes(d) if kind.startswith("short_d16") else ())
    return Compiled(ins, run, reads, codes(d), kind="mem")


def _ds_read2(ins: Instruction, ctx: DecodeContext) -> Compiled:
    size = 8 if "b64" in ins.mnemonic else 4
    scale = size * (64 if "st64" in ins.mnemonic else 1)
    d, vaddr = operands(ins, 2)
    off0, off1 = _offset(ins, "offset0") * scale, _offset(ins, "offset1") * scale
    machine = ctx.machine

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        fault = _fault_fn(ins, w, lanes)
        first = machine.lds_read(w, ins, _lds_addr(w, vaddr, lanes, off0), size, fault)
        second = machine.lds_read(w, ins, _lds_addr(w, vaddr, lanes, off1), size, fault)
        words = np.concatenate([first, second], axis=1).view(np.uint32)
        _write_loaded(w, d, lanes, words, "dword")
        _issue(ctx, w, ins, "lgkm", d.codes())

    return Compiled(ins, run, codes(vaddr), codes(d), kind="mem")


def _ds_write(ins: Instruction, ctx: DecodeContext) -> Compiled:
    size, kind = _DS_WRITE[ins.mnemonic]
    vaddr, data_op = operands(ins, 2)
    offset, machine = _offset(ins), ctx.machine

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        data = _store_bytes(w, data_op, lanes, size, kind)
        op = _issue(ctx, w, ins, "lgkm", (), lds_write=True)
        machine.lds_write(w, ins, _lds_addr(w, vaddr, lanes, offset), data,
                          _fault_fn(ins, w, lanes), op)

    return Compiled(ins, run, codes(vaddr, data_op), (), kind="mem")


def _ds_write2(ins: Instruction, ctx: DecodeContext) -> Compiled:
    size = 8 if "b64" in ins.mnemonic else 4
    scale = size * (64 if "st64" in ins.mnemonic else 1)
    vaddr, d0, d1 = operands(ins, 3)
    off0, off1 = _offset(ins, "offset0") * scale, _offset(ins, "offset1") * scale
    machine = ctx.machine

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        fault = _fault_fn(ins, w, lanes)
        op = _issue(ctx, w, ins, "lgkm", (), lds_write=True)
        for data_op, off in ((d0, off0), (d1, off1)):
            data = _store_bytes(w, data_op, lanes, size, "dword")
            machine.lds_write(w, ins, _lds_addr(w, vaddr, lanes, off), data, fault, op)

    return Compiled(ins, run, codes(vaddr, d0, d1), (), kind="mem")


for _name in _DS_READ:
    opcode(_name)(_ds_read)
for _name in _DS_WRITE:
    opcode(_name)(_ds_write)
opcode("ds_read2_b32", "ds_read2_b64", "ds_read2st64_b32", "ds_read2st64_b64")(_ds_read2)
opcode("ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64")(_ds_write2)


@opcode("ds_read_b64_tr_b16")
def _ds_read_tr16(ins: Instruction, ctx: DecodeContext) -> Compiled:
    """gfx950 transposed LDS read of 16-bit elements.

    Each group of 16 lanes reads a 4 x 16 tile: lane ``4 r + q`` of the group supplies the
    address of row ``r``'s elements ``4 q .. 4 q + 3``. After the exchange lane ``c`` of
    the group holds column ``c``: element ``r`` of its 64-bit result is row ``r``, column
    ``c`` of the tile.
    """
    d, vaddr = operands(ins, 2)
    offset, machine = _offset(ins), ctx.machine

    def run(w: Wave) -> None:
        if not w.exec_full:
            raise UnknownOpcode(f"{ins.where()}: ds_read_b64_tr_b16 with some lanes inactive "
                                f"is not emulated")
        lanes = np.arange(64)
        data = machine.lds_read(w, ins, _lds_addr(w, vaddr, lanes, offset), 8,
                                _fault_fn(ins, w, lanes))
        elems = data.view(np.uint16).reshape(4, 4, 4, 4)  # [group, row, quad, element]
        # lane c = 4 * quad + element of the group receives [row 0..3] of that column
        columns = elems.transpose(0, 2, 3, 1).reshape(64, 4)
        _write_loaded(w, d, lanes, columns.view(np.uint32).reshape(64, 2), "dword")
        _issue(ctx, w, ins, "lgkm", d.codes())

    return Compiled(ins, run, codes(vaddr), codes(d), kind="mem")
