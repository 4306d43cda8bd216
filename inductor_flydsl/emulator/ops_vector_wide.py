"""Vector instructions that are not one 32-bit op per lane from a table (those are
``ops_vector.py``): 64-bit shifts, moves and multiply-adds, lane reads
(``v_readlane``, ``v_readfirstlane``, AccVGPR moves, permlane swaps), packed fp32,
``v_bitop3`` and the carry-out/carry-in adds, per the CDNA3/CDNA4 pseudocode."""

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
    vreader64,
    vwriter,
    vwriter64,
)
from .errors import UnknownOpcode
from .ops_vector import base, fma_f32, vreader_mask
from .program import Instruction
from .wave import LANES, Wave, mask_to_bits

U32 = np.uint32
Arr = np.ndarray


@opcode("v_lshl_add_u64")
def _lshl_add_u64(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a, b, c = operands(ins, 4)
    ra, rb, rc, wd = vreader64(a, ins), vreader(b, ins), vreader64(c, ins), vwriter64(d, ins)

    def run(w) -> None:
        shift = (rb(w) & U32(7)).astype(np.uint64)
        wd(w, (ra(w) << shift) + rc(w))

    return Compiled(ins, run, codes(a, b, c), codes(d))


@opcode("v_lshlrev_b64", "v_lshrrev_b64", "v_ashrrev_i64")
def _shift64(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a, b = operands(ins, 3)
    ra, rb, wd = vreader(a, ins), vreader64(b, ins), vwriter64(d, ins)
    name = base(ins)

    def run(w) -> None:
        n, x = (ra(w) & U32(63)).astype(np.uint64), rb(w)
        if name == "v_lshlrev_b64":
            wd(w, x << n)
        elif name == "v_lshrrev_b64":
            wd(w, x >> n)
        else:
            wd(w, (x.view(np.int64) >> n.astype(np.int64)).view(np.uint64))

    return Compiled(ins, run, codes(a, b), codes(d))


@opcode("v_mov_b64", "v_pk_mov_b32")
def _mov64(ins: Instruction, ctx: DecodeContext) -> Compiled:
    if base(ins) == "v_pk_mov_b32":
        return _pk_mov(ins)
    d, a = operands(ins, 2)
    ra, wd = vreader64(a, ins), vwriter64(d, ins)
    return Compiled(ins, lambda w: wd(w, ra(w)), codes(a), codes(d))


def _pk_mov(ins: Instruction) -> Compiled:
    d, a, b = operands(ins, 3)
    sel = _op_sel(ins, "op_sel", (0, 1))
    ra, rb, wd = vreader64(a, ins), vreader64(b, ins), vwriter64(d, ins)

    def run(w) -> None:
        x, y = ra(w), rb(w)
        lo = (x >> np.uint64(32 * sel[0])) & np.uint64(0xFFFFFFFF)
        hi = (y >> np.uint64(32 * sel[1])) & np.uint64(0xFFFFFFFF)
        wd(w, lo | (hi << np.uint64(32)))

    return Compiled(ins, run, codes(a, b), codes(d))


def _op_sel(ins: Instruction, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
    text = ins.modifier(name)
    if text is None:
        return default
    return tuple(int(x) for x in text.strip("[]").split(","))


@opcode("v_mad_u64_u32", "v_mad_i64_i32")
def _mad64(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, carry, a, b, c = operands(ins, 5)
    ra, rb, rc = vreader(a, ins), vreader(b, ins), vreader64(c, ins)
    wd, wcarry = vwriter64(d, ins), swriter(carry, ins, 64)
    signed = base(ins) == "v_mad_i64_i32"

    def run(w) -> None:
        x, y, z = ra(w), rb(w), rc(w)
        if signed:
            prod = x.view(np.int32).astype(object) * y.view(np.int32).astype(object)
            total = prod + z.view(np.int64).astype(object)
            low = np.array([int(t) & 0xFFFFFFFFFFFFFFFF for t in total], np.uint64)
            over = np.array([not -(2**63) <= int(t) < 2**63 for t in total])
        else:
            prod = x.astype(np.uint64) * y.astype(np.uint64)  # < 2**64, exact
            low = prod + z
            over = low < prod
        wd(w, low)
        wcarry(w, mask_to_bits(over & w.exec_mask))

    return Compiled(ins, run, codes(a, b, c), codes(d, carry))


@opcode("v_readfirstlane_b32")
def _readfirstlane(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a = operands(ins, 2)
    ra, wd = vreader(a, ins), swriter(d, ins)

    def run(w) -> None:
        lanes = np.flatnonzero(w.exec_mask)
        wd(w, int(ra(w)[lanes[0] if lanes.size else 0]))

    return Compiled(ins, run, codes(a), codes(d))


@opcode("v_readlane_b32")
def _readlane(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a, lane = operands(ins, 3)
    ra, rl, wd = vreader(a, ins), sreader(lane, ins), swriter(d, ins)
    return Compiled(ins, lambda w: wd(w, int(ra(w)[rl(w) & 63])), codes(a, lane), codes(d))


@opcode("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32")
def _accvgpr(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a = operands(ins, 2)
    ra, wd = vreader(a, ins), vwriter(d, ins)
    return Compiled(ins, lambda w: wd(w, ra(w).copy()), codes(a), codes(d))


# Packed fp32 (VOP3P on 64-bit register pairs): op_sel picks the half feeding the low
# result, op_sel_hi the half feeding the high result (default: low->low, high->high).
_PK_F32 = {"v_pk_mul_f32": (2, lambda a, b: a * b), "v_pk_add_f32": (2, lambda a, b: a + b),
           "v_pk_fma_f32": (3, fma_f32)}


def _pk_f32_reader(op, ins: Instruction, selects: tuple[int, int]):
    """A packed-fp32 source as uint64. An inline constant is a 32-bit float (as LLVM
    encodes it, the IEEE single value in the low half); its high half is not documented,
    so an instruction that selects it (``op_sel``/``op_sel_hi`` 1) is refused unless the
    constant is 0 (LLVM always selects the low half of a constant)."""
    if op.const is None:
        return vreader64(op, ins)
    low = op.const.bits(32, "f32")
    if 1 in selects and low != 0:
        raise UnknownOpcode(f"high half of the constant {op.text} in packed fp32 "
                            f"({ins.where()})")
    value = np.full(LANES, low, np.uint64)
    return lambda w: value


def _build_pk_f32(ins: Instruction, ctx: DecodeContext) -> Compiled:
    """VOP3P packed fp32: ``op_sel``/``op_sel_hi`` pick each source's half for the low and
    high result, ``neg_lo``/``neg_hi`` negate a source's picked value for that result."""
    nsrc, fn = _PK_F32[base(ins)]
    if ins.has("clamp"):
        raise UnknownOpcode(f"modifier clamp on packed fp32 ({ins.where()})")
    ops = operands(ins, nsrc + 1)
    d, srcs = ops[0], ops[1:]
    lo_sel = _op_sel(ins, "op_sel", (0,) * nsrc)
    hi_sel = _op_sel(ins, "op_sel_hi", (1,) * nsrc)
    lo_neg = _op_sel(ins, "neg_lo", (0,) * nsrc)
    hi_neg = _op_sel(ins, "neg_hi", (0,) * nsrc)
    readers = [_pk_f32_reader(s, ins, (lo_sel[i], hi_sel[i])) for i, s in enumerate(srcs)]
    wd = vwriter64(d, ins)
    sign = np.uint64(0x80000000)

    def half(x: Arr, which: int, neg: int) -> Arr:
        bits = (x >> np.uint64(32 * which)) & np.uint64(0xFFFFFFFF)
        return (bits ^ sign if neg else bits).astype(U32).view(np.float32)

    def run(w) -> None:
        values = [r(w) for r in readers]
        with np.errstate(all="ignore"):
            lo = fn(*(half(v, s, g) for v, s, g in zip(values, lo_sel, lo_neg, strict=True)))
            hi = fn(*(half(v, s, g) for v, s, g in zip(values, hi_sel, hi_neg, strict=True)))
        lo_bits = np.asarray(lo, np.float32).view(U32).astype(np.uint64)
        hi_bits = np.asarray(hi, np.float32).view(U32).astype(np.uint64)
        wd(w, lo_bits | (hi_bits << np.uint64(32)))

    return Compiled(ins, run, codes(*srcs), codes(d))


for _name in _PK_F32:
    opcode(_name)(_build_pk_f32)


@opcode("v_bitop3_b32", "v_bitop3_b16")
def _bitop3(ins: Instruction, ctx: DecodeContext) -> Compiled:
    """Bit ``i`` of D is bit ``(S0_i << 2) | (S1_i << 1) | S2_i`` of the ``bitop3`` table."""
    d, a, b, c = operands(ins, 4)
    table = int(ins.modifier("bitop3", "0") or "0", 0)
    ra, rb, rc, wd = vreader(a, ins), vreader(b, ins), vreader(c, ins), vwriter(d, ins)
    width_mask = U32(0xFFFF) if base(ins).endswith("b16") else U32(0xFFFFFFFF)
    terms = [(bit, s0, s1, s2) for bit in range(8)
             for s0, s1, s2 in [((bit >> 2) & 1, (bit >> 1) & 1, bit & 1)] if table >> bit & 1]

    def run(w) -> None:
        x, y, z = ra(w), rb(w), rc(w)
        out = np.zeros(LANES, U32)
        for _, s0, s1, s2 in terms:
            out |= (x if s0 else ~x) & (y if s1 else ~y) & (z if s2 else ~z)
        if width_mask != U32(0xFFFFFFFF):
            out = (w.v[d.reg.index] & ~width_mask) | (out & width_mask)
        wd(w, out)

    return Compiled(ins, run, codes(a, b, c), codes(d))


# Carry-out ops: ``v_add_co_u32 D, SDST, S0, S1`` (SDST = VCC in the e32 form) and the
# carry-in forms ``v_addc_co_u32 D, SDST, S0, S1, SCARRY``.
_CARRY_OPS = {
    "v_add_co_u32": lambda a, b, c: (a + b, a + b >= 1 << 32),
    "v_sub_co_u32": lambda a, b, c: (a - b, b > a),
    "v_subrev_co_u32": lambda a, b, c: (b - a, a > b),
    "v_addc_co_u32": lambda a, b, c: (a + b + c, a + b + c >= 1 << 32),
    "v_subb_co_u32": lambda a, b, c: (a - b - c, b + c > a),
    "v_subbrev_co_u32": lambda a, b, c: (b - a - c, a + c > b),
}


@opcode(*_CARRY_OPS)
def _carry_op(ins: Instruction, ctx: DecodeContext) -> Compiled:
    fn = _CARRY_OPS[base(ins)]
    with_carry_in = base(ins) in ("v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32")
    ops = operands(ins, 5 if with_carry_in else 4)
    d, sdst, a, b = ops[:4]
    ra, rb, wd, wc = vreader(a, ins), vreader(b, ins), vwriter(d, ins), swriter(sdst, ins, 64)
    rcarry = vreader_mask(ops[4], ins) if with_carry_in else None

    def run(w) -> None:
        x, y = ra(w).astype(np.int64), rb(w).astype(np.int64)
        c = rcarry(w).astype(np.int64) if rcarry is not None else np.zeros(LANES, np.int64)
        value, carry = fn(x, y, c)
        wd(w, (value & 0xFFFFFFFF).astype(U32))
        wc(w, mask_to_bits(carry & w.exec_mask))

    return Compiled(ins, run, codes(*ops[2:]), codes(d, sdst))


@opcode("v_permlane16_swap_b32", "v_permlane32_swap_b32")
def _permlane_swap(ins: Instruction, ctx: DecodeContext) -> Compiled:
    """CDNA4 lane swaps between two VGPRs, in rows of 16 lanes (``permlane16``: VDST's
    odd rows trade places with SRC0's even rows, i.e. rows 1 <-> 0 and 3 <-> 2) or halves
    of 32 (``permlane32``: VDST's upper half with SRC0's lower half). Both registers are
    written; the emulator takes a full EXEC only."""
    if ctx.arch != "gfx950":
        raise UnknownOpcode(f"{ins.mnemonic} does not exist on {ctx.arch} ({ins.where()})")
    if any(ins.has(name) for name in ("fi", "bound_ctrl")):
        raise UnknownOpcode(f"{ins.mnemonic} modifiers are not implemented ({ins.where()})")
    d, a = operands(ins, 2)
    if d.reg is None or a.reg is None:
        raise UnknownOpcode(f"{ins.mnemonic} takes two VGPRs ({ins.where()})")
    width = 16 if "permlane16" in ins.mnemonic else 32
    # lanes of VDST and SRC0 that trade places
    d_lanes = np.array([lane for lane in range(64) if (lane // width) % 2 == 1])
    a_lanes = d_lanes - width

    def run(w: Wave) -> None:
        if not w.exec_full:
            raise UnknownOpcode(f"{ins.mnemonic} with a partial EXEC ({ins.where()})")
        dfile, afile = w.vfile(d.reg.file), w.vfile(a.reg.file)
        moved = dfile[d.reg.index][d_lanes].copy()
        dfile[d.reg.index][d_lanes] = afile[a.reg.index][a_lanes]
        afile[a.reg.index][a_lanes] = moved

    return Compiled(ins, run, codes(d, a), codes(d, a))
