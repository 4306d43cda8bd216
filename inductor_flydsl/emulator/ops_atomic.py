"""Global atomics, cache maintenance and the lane-counting ops an atomic arrival compiles to.

Semantics from AMD's CDNA3/CDNA4 ISA guides:

- ``global_atomic_add`` (and ``_sub``, ``_smin``/``_umin``, ``_smax``/``_umax``, ``_and``,
  ``_or``, ``_xor``, ``_swap``), 32-bit: each active lane reads the dword at its address,
  combines it with its data and writes it back, lanes in increasing order (the ISA
  leaves their order unspecified; the emulator picks one). With ``sc0`` (gfx940 and
  later: "return the pre-op value", GLC on older parts) the lane's old value is written
  to ``vdst``, tracked by ``vmcnt`` like a load.
- ``buffer_wbl2`` / ``buffer_inv``: write back / invalidate the caches at the scope their
  ``sc0``/``sc1`` bits name. The emulator has no caches (a store is visible to every
  later access), so they only count as a memory operation on ``vmcnt``; what they order
  on hardware is LLVM's memory-model lowering of the kernel's fences and atomics.
- ``v_mbcnt_lo_u32_b32 d, mask, s``: ``d = s + popcount(mask & lanes below this one,
  bits 0-31)``; ``v_mbcnt_hi_u32_b32``: the same over bits 32-63.
- ``s_ff1_i32_b64 d, s``: the index of the lowest set bit of ``s``, or -1.
- ``s_bcnt1_i32_b64 d, s`` (``_b32``): ``d`` = the number of set bits of ``s``, SCC = ``d``
  != 0 (an atomic whose value is the same in every lane adds that times the active lanes).
- ``v_writelane_b32 vd, s, lane``: lane ``lane & 63`` of ``vd`` := ``s``, whatever EXEC.

Workgroups run one after another (:meth:`~.machine.Machine.run`, in the order it is
given), so an atomic sees every earlier workgroup's writes: a kernel whose correctness
depends on which workgroup arrives last is checked by running the grid in several orders.
"""

from __future__ import annotations

import numpy as np

from .decode import (
    Compiled,
    DecodeContext,
    codes,
    opcode,
    operands,
    sreader,
    swriter,
    vreader,
    vwriter,
)
from .errors import UnknownOpcode
from .ops_memory import _fault_fn, _global_addr, _issue
from .program import Instruction
from .wave import LANES, Wave

M32 = 0xFFFFFFFF


def _i32(x: np.ndarray) -> np.ndarray:
    return x.view(np.int32)


_ATOMIC_OPS = {
    "add": lambda old, v: old + v,
    "sub": lambda old, v: old - v,
    "and": lambda old, v: old & v,
    "or": lambda old, v: old | v,
    "xor": lambda old, v: old ^ v,
    "swap": lambda old, v: v,
    "umin": np.minimum,
    "umax": np.maximum,
    "smin": lambda old, v: np.minimum(_i32(old), _i32(v)).view(np.uint32),
    "smax": lambda old, v: np.maximum(_i32(old), _i32(v)).view(np.uint32),
}


def _global_atomic(ins: Instruction, ctx: DecodeContext) -> Compiled:
    kind = ins.mnemonic.removeprefix("global_atomic_")
    fn = _ATOMIC_OPS[kind]
    returns = ins.has("sc0")
    ops = operands(ins)
    if returns:
        if len(ops) != 4:
            raise UnknownOpcode(f"a returning atomic takes vdst, vaddr, vdata, saddr "
                                f"({ins.where()})")
        d, vaddr, data_op, saddr = ops
    else:
        if len(ops) != 3:
            raise UnknownOpcode(f"an atomic takes vaddr, vdata, saddr ({ins.where()})")
        d = None
        vaddr, data_op, saddr = ops
    addr = _global_addr(vaddr, saddr, ins)
    rdata = vreader(data_op, ins)
    wd = vwriter(d, ins) if d is not None else None
    memory = ctx.machine.memory

    def run(w: Wave) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        fault = _fault_fn(ins, w, lanes)
        addresses = addr(w, lanes)
        data = rdata(w)
        old = np.zeros(LANES, np.uint32)
        for j, lane in enumerate(lanes):  # one lane after another: same-address lanes chain
            at = addresses[j:j + 1]
            before = memory.load(at, 4, fault).view(np.uint32).reshape(-1)[:1]
            after = np.asarray(fn(before, data[lane:lane + 1]), dtype=np.uint32)
            memory.store(at, after.view(np.uint8).reshape(1, 4), fault)
            old[lane] = before[0]
        if wd is not None:
            wd(w, old)
        _issue(ctx, w, ins, "vm", d.codes() if d is not None else ())

    reads = codes(vaddr, data_op) + (codes(saddr) if saddr.text != "off" else ())
    return Compiled(ins, run, reads, d.codes() if d is not None else (), kind="mem")


for _kind in _ATOMIC_OPS:
    opcode(f"global_atomic_{_kind}")(_global_atomic)


@opcode("buffer_wbl2", "buffer_inv")
def _cache_op(ins: Instruction, ctx: DecodeContext) -> Compiled:
    def run(w: Wave) -> None:
        _issue(ctx, w, ins, "vm", ())

    return Compiled(ins, run, (), (), kind="mem")


@opcode("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32")
def _mbcnt(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, mask_op, add_op = operands(ins, 3)
    rmask, radd, wd = vreader(mask_op, ins), vreader(add_op, ins), vwriter(d, ins)
    high = "_hi_" in ins.mnemonic
    lane = np.arange(LANES)
    # bits of the 32-bit mask below each lane: lo counts bits 0..lane-1 (all 32 from lane
    # 32 on), hi counts bits 32..lane-1 (none below lane 32)
    below = np.clip(lane - (32 if high else 0), 0, 32)
    keep = np.where(below >= 32, M32, (np.uint64(1) << below.astype(np.uint64)) - 1)
    keep = keep.astype(np.uint64)

    def run(w: Wave) -> None:
        masked = rmask(w).astype(np.uint64) & keep
        counts = np.array([int(x).bit_count() for x in masked], np.uint32)
        wd(w, (radd(w).astype(np.uint64) + counts).astype(np.uint32))

    return Compiled(ins, run, codes(mask_op, add_op), codes(d))


@opcode("s_ff1_i32_b64")
def _ff1_b64(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a = operands(ins, 2)
    ra, wd = sreader(a, ins, 64), swriter(d, ins)

    def run(w: Wave) -> None:
        value = ra(w)
        wd(w, ((value & -value).bit_length() - 1) & M32 if value else M32)

    return Compiled(ins, run, codes(a), codes(d))


@opcode("s_bcnt1_i32_b64", "s_bcnt1_i32_b32")
def _bcnt1(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a = operands(ins, 2)
    ra, wd = sreader(a, ins, 64 if ins.mnemonic.endswith("b64") else 32), swriter(d, ins)

    def run(w: Wave) -> None:
        count = int(ra(w)).bit_count()
        wd(w, count)
        w.scc = int(count != 0)

    return Compiled(ins, run, codes(a), codes(d))


@opcode("v_writelane_b32")
def _writelane(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, src, lane_op = operands(ins, 3)
    if d.reg is None or d.reg.file != "v":
        raise UnknownOpcode(f"v_writelane_b32 writes a VGPR ({ins.where()})")
    rs, rl = sreader(src, ins), sreader(lane_op, ins)
    index = d.reg.index

    def run(w: Wave) -> None:
        w.v[index][rl(w) & 63] = np.uint32(rs(w) & M32)

    return Compiled(ins, run, codes(src, lane_op, d), codes(d))
