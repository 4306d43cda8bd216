"""Vector ALU instructions (VOP1, VOP2, VOP3, VOPC, packed fp32), per the CDNA3/CDNA4
pseudocode. Values are per-lane ``uint32`` bit patterns; results land in active lanes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..numerics import fp
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
from .program import Instruction
from .wave import LANES, mask_to_bits

U32 = np.uint32
Arr = np.ndarray


def _i32(x: Arr) -> Arr:
    return x.view(np.int32)


def _sh(x: Arr) -> Arr:
    return x & U32(31)


def _bfe_u(a: Arr, off: Arr, width: Arr) -> Arr:
    off, width = off & U32(31), width & U32(31)
    mask = ((np.uint64(1) << width.astype(np.uint64)) - np.uint64(1)).astype(U32)
    return np.where(width == 0, U32(0), (a >> off) & mask).astype(U32)


def _bfe_i(a: Arr, off: Arr, width: Arr) -> Arr:
    off, width = (off & U32(31)).astype(np.int64), (width & U32(31)).astype(np.int64)
    val = (a.astype(np.int64) >> off) & ((np.int64(1) << width) - 1)
    sign = (val >> np.maximum(width - 1, 0)) & 1
    val = np.where((sign == 1) & (width > 0), val - (np.int64(1) << width), val)
    return np.where(width == 0, 0, val).astype(np.int64).astype(np.uint32)


def _perm(s0: Arr, s1: Arr, sel: Arr) -> Arr:
    data = (s0.astype(np.uint64) << np.uint64(32)) | s1.astype(np.uint64)
    out = np.zeros(LANES, np.uint64)
    for byte in range(4):
        sel_b = (sel >> U32(8 * byte)) & U32(0xFF)
        picked = (data >> (np.minimum(sel_b, 7).astype(np.uint64) * np.uint64(8))) & np.uint64(0xFF)
        sign_src = {8: 1, 9: 3, 10: 5, 11: 7}
        for code, src in sign_src.items():
            bit = (data >> np.uint64(src * 8 + 7)) & np.uint64(1)
            picked = np.where(sel_b == code, bit * np.uint64(0xFF), picked)
        picked = np.where(sel_b == 12, np.uint64(0), picked)
        picked = np.where(sel_b >= 13, np.uint64(0xFF), picked)
        out |= picked << np.uint64(8 * byte)
    return out.astype(U32)


def _f(fn: Callable[..., Arr]) -> Callable[..., Arr]:
    """Lift a float32 function over bit patterns."""

    def lifted(*args: Arr) -> Arr:
        with np.errstate(all="ignore"):
            return fp.bits32(fn(*(fp.f32(a) for a in args)))

    return lifted


def fma_f32(a: Arr, b: Arr, c: Arr) -> Arr:
    # The product of two float32 values is exact in float64; the sum rounds twice (to
    # float64, then float32), which can differ from a fused result in the last bit only
    # in rare halfway cases.
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def _med3_f(a: Arr, b: Arr, c: Arr) -> Arr:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _ieee_extremum(a: Arr, b: Arr, *, maximum: bool) -> Arr:
    """CDNA4 ``v_maximum_f32``/``v_minimum_f32`` (IEEE 754-2019 maximum/minimum) on bit
    patterns: a signaling NaN source gives that NaN quieted (S0 first), else a quiet NaN
    source is returned as it is (S0 first); +0 counts as greater than -0."""
    x, y = fp.f32(a), fp.f32(b)
    with np.errstate(invalid="ignore"):
        bigger = (x > y) if maximum else (x < y)
    sign_x, sign_y = (a >> U32(31)).astype(bool), (b >> U32(31)).astype(bool)
    zeros = ((a | b) & U32(0x7FFFFFFF)) == 0
    wins = bigger | (zeros & ((~sign_x & sign_y) if maximum else (sign_x & ~sign_y)))
    out = np.where(wins, a, b)
    quiet_bit = U32(0x00400000)
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    snan_x, snan_y = nan_x & ((a & quiet_bit) == 0), nan_y & ((b & quiet_bit) == 0)
    out = np.where(nan_y, b, out)
    out = np.where(nan_x, a, out)
    out = np.where(snan_y & ~snan_x, b | quiet_bit, out)
    return np.where(snan_x, a | quiet_bit, out).astype(U32)


def _maximum3(a: Arr, b: Arr, c: Arr) -> Arr:
    return _ieee_extremum(_ieee_extremum(a, b, maximum=True), c, maximum=True)


def _minimum3(a: Arr, b: Arr, c: Arr) -> Arr:
    return _ieee_extremum(_ieee_extremum(a, b, maximum=False), c, maximum=False)


def _u64(x: Arr) -> Arr:
    return x.astype(np.uint64)


def _mul_hi_u32(a: Arr, b: Arr) -> Arr:
    return ((_u64(a) * b) >> np.uint64(32)).astype(U32)


def _mul_hi_i32(a: Arr, b: Arr) -> Arr:
    return ((_i32(a).astype(np.int64) * _i32(b)) >> 32).astype(np.int64).astype(U32)


def _u24(x: Arr) -> Arr:
    return x & U32(0xFFFFFF)


def _mul_hi_u24(a: Arr, b: Arr) -> Arr:
    return ((_u64(_u24(a)) * _u24(b)) >> np.uint64(32)).astype(U32)


def _alignbit(a: Arr, b: Arr, c: Arr) -> Arr:
    return (((_u64(a) << np.uint64(32)) | b) >> _u64(c & U32(31))).astype(U32)


def _med3_i(a: Arr, b: Arr, c: Arr) -> Arr:
    x, y, z = _i32(a), _i32(b), _i32(c)
    return np.maximum(np.minimum(x, y), np.minimum(np.maximum(x, y), z)).view(U32)


def _pack16(lo: Arr, hi: Arr) -> Arr:
    return (lo & U32(0xFFFF)) | ((hi & U32(0xFFFF)) << U32(16))


def _cvt_pk(convert: Callable[[Arr], Arr]) -> Callable[[Arr, Arr], Arr]:
    return lambda a, b: _pack16(convert(fp.f32(a)), convert(fp.f32(b)))


# name -> (number of sources, operand kind for constants/modifiers, function)
INT_OPS: dict[str, tuple[int, str, Callable[..., Arr]]] = {
    "v_mov_b32": (1, "int", lambda a: a.copy()),
    "v_not_b32": (1, "int", lambda a: ~a),
    "v_add_u32": (2, "int", lambda a, b: a + b),
    "v_sub_u32": (2, "int", lambda a, b: a - b),
    "v_subrev_u32": (2, "int", lambda a, b: b - a),
    "v_and_b32": (2, "int", lambda a, b: a & b),
    "v_or_b32": (2, "int", lambda a, b: a | b),
    "v_xor_b32": (2, "int", lambda a, b: a ^ b),
    "v_lshlrev_b32": (2, "int", lambda a, b: b << _sh(a)),
    "v_lshrrev_b32": (2, "int", lambda a, b: b >> _sh(a)),
    "v_ashrrev_i32": (2, "int", lambda a, b: (_i32(b) >> _sh(a).astype(np.int32)).view(U32)),
    "v_min_i32": (2, "int", lambda a, b: np.minimum(_i32(a), _i32(b)).view(U32)),
    "v_max_i32": (2, "int", lambda a, b: np.maximum(_i32(a), _i32(b)).view(U32)),
    "v_min_u32": (2, "int", lambda a, b: np.minimum(a, b)),
    "v_max_u32": (2, "int", lambda a, b: np.maximum(a, b)),
    "v_mul_lo_u32": (2, "int", lambda a, b: (_u64(a) * b).astype(U32)),
    "v_mul_hi_u32": (2, "int", _mul_hi_u32),
    "v_mul_hi_i32": (2, "int", _mul_hi_i32),
    "v_mul_u32_u24": (2, "int", lambda a, b: _u24(a) * _u24(b)),
    "v_mul_hi_u32_u24": (2, "int", _mul_hi_u24),
    "v_add3_u32": (3, "int", lambda a, b, c: a + b + c),
    "v_add_lshl_u32": (3, "int", lambda a, b, c: (a + b) << _sh(c)),
    "v_lshl_add_u32": (3, "int", lambda a, b, c: (a << _sh(b)) + c),
    "v_lshl_or_b32": (3, "int", lambda a, b, c: (a << _sh(b)) | c),
    "v_and_or_b32": (3, "int", lambda a, b, c: (a & b) | c),
    "v_or3_b32": (3, "int", lambda a, b, c: a | b | c),
    "v_xad_u32": (3, "int", lambda a, b, c: (a ^ b) + c),
    "v_mad_u32_u24": (3, "int", lambda a, b, c: _u24(a) * _u24(b) + c),
    "v_bfe_u32": (3, "int", _bfe_u),
    "v_bfe_i32": (3, "int", _bfe_i),
    "v_bfi_b32": (3, "int", lambda a, b, c: (a & b) | (~a & c)),
    "v_alignbit_b32": (3, "int", _alignbit),
    "v_perm_b32": (3, "int", _perm),
    "v_min3_i32": (3, "int", lambda a, b, c: np.minimum(np.minimum(_i32(a), _i32(b)),
                                                            _i32(c)).view(U32)),
    "v_max3_i32": (3, "int", lambda a, b, c: np.maximum(np.maximum(_i32(a), _i32(b)),
                                                            _i32(c)).view(U32)),
    "v_med3_i32": (3, "int", _med3_i),
    # float32
    "v_add_f32": (2, "f32", _f(lambda a, b: a + b)),
    "v_sub_f32": (2, "f32", _f(lambda a, b: a - b)),
    "v_subrev_f32": (2, "f32", _f(lambda a, b: b - a)),
    "v_mul_f32": (2, "f32", _f(lambda a, b: a * b)),
    "v_min_f32": (2, "f32", _f(np.fmin)),
    "v_max_f32": (2, "f32", _f(np.fmax)),
    "v_fma_f32": (3, "f32", _f(fma_f32)),
    # VOP2 with a 32-bit literal K, written in its operand place: fmamk is ``vdst, src0, K,
    # vsrc1`` (S0 * K + S1), fmaak ``vdst, src0, vsrc1, K`` (S0 * S1 + K): both a positional fma
    "v_fmamk_f32": (3, "f32", _f(fma_f32)),
    "v_fmaak_f32": (3, "f32", _f(fma_f32)),
    "v_med3_f32": (3, "f32", _f(_med3_f)),
    "v_maximum3_f32": (3, "f32", _maximum3),  # CDNA4 (gfx950)
    "v_minimum3_f32": (3, "f32", _minimum3),
    "v_rcp_f32": (1, "f32", _f(lambda a: np.float32(1.0) / a)),
    "v_sqrt_f32": (1, "f32", _f(np.sqrt)),
    "v_exp_f32": (1, "f32", _f(np.exp2)),
    "v_log_f32": (1, "f32", _f(np.log2)),
    "v_trunc_f32": (1, "f32", _f(np.trunc)),
    "v_floor_f32": (1, "f32", _f(np.floor)),
    "v_cvt_f32_u32": (1, "int", lambda a: fp.bits32(a.astype(np.float32))),
    "v_cvt_f32_i32": (1, "int", lambda a: fp.bits32(_i32(a).astype(np.float32))),
    "v_cvt_u32_f32": (1, "f32", lambda a: fp.f32_to_u32(fp.f32(a))),
    "v_cvt_i32_f32": (1, "f32", lambda a: fp.f32_to_i32(fp.f32(a))),
    "v_cvt_f16_f32": (1, "f32", lambda a: fp.f32_to_f16(fp.f32(a))),
    "v_cvt_f32_f16": (1, "f16", lambda a: fp.bits32(fp.f16_to_f32(a))),
    "v_cvt_pk_bf16_f32": (2, "f32", _cvt_pk(fp.f32_to_bf16)),
    "v_cvt_pk_f16_f32": (2, "f32", _cvt_pk(fp.f32_to_f16)),
    "v_cvt_pkrtz_f16_f32": (2, "f32", _cvt_pk(fp.f32_to_f16_rtz)),
    "v_pack_b32_f16": (2, "f16", _pack16),
}
# Ops whose e32 form reads its destination as the third source (``D = S0 * S1 + D``).
ACCUMULATING = {"v_fmac_f32": "v_fma_f32", "v_mac_f32": "v_fma_f32"}

_SDWA_SEL = {"DWORD": (0, 32), "WORD_0": (0, 16), "WORD_1": (16, 16), "BYTE_0": (0, 8),
             "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8)}


def _sdwa_source(read, sel: str | None, ins: Instruction):
    if sel is None or sel == "DWORD":
        return read
    if sel not in _SDWA_SEL:
        raise UnknownOpcode(f"SDWA selector {sel} ({ins.where()})")
    shift, width = _SDWA_SEL[sel]
    mask = U32((1 << width) - 1)
    return lambda w: (read(w) >> U32(shift)) & mask


def _check_sdwa(ins: Instruction) -> None:
    if not ins.mnemonic.endswith("_sdwa"):
        return
    if ins.modifier("dst_sel", "DWORD") != "DWORD" or ins.has("src0_sext") or ins.has("src1_sext"):
        raise UnknownOpcode(f"SDWA form with a partial destination ({ins.where()})")


def _clamp_check(ins: Instruction) -> None:
    for name in ("clamp", "op_sel", "mul", "div"):
        if ins.has(name):
            raise UnknownOpcode(f"modifier {name} is not implemented ({ins.where()})")


def _build_valu(nsrc: int, kind: str, fn):
    def build(ins: Instruction, ctx: DecodeContext) -> Compiled:
        _clamp_check(ins)
        _check_sdwa(ins)
        ops = operands(ins, nsrc + 1)
        d, srcs = ops[0], ops[1:]
        readers = [vreader(s, ins, kind) for s in srcs]
        for j, name in enumerate(("src0_sel", "src1_sel")[: len(readers)]):
            readers[j] = _sdwa_source(readers[j], ins.modifier(name), ins)
        write = vwriter(d, ins)
        if nsrc == 1:
            r0 = readers[0]
            run = lambda w: write(w, fn(r0(w)))  # noqa: E731
        elif nsrc == 2:
            r0, r1 = readers
            run = lambda w: write(w, fn(r0(w), r1(w)))  # noqa: E731
        else:
            r0, r1, r2 = readers
            run = lambda w: write(w, fn(r0(w), r1(w), r2(w)))  # noqa: E731
        return Compiled(ins, run, codes(*srcs), codes(d))

    return build


for _name, (_n, _kind, _fn) in INT_OPS.items():
    opcode(_name)(_build_valu(_n, _kind, _fn))


@opcode(*ACCUMULATING)
def _mac(ins: Instruction, ctx: DecodeContext) -> Compiled:
    _clamp_check(ins)
    d, a, b = operands(ins, 3)
    ra, rb, rd = vreader(a, ins, "f32"), vreader(b, ins, "f32"), vreader(d, ins, "f32")
    write, fn = vwriter(d, ins), INT_OPS[ACCUMULATING[base(ins)]][2]
    return Compiled(ins, lambda w: write(w, fn(ra(w), rb(w), rd(w))), codes(a, b, d), codes(d))


def base(ins: Instruction) -> str:
    from .decode import base_mnemonic

    return base_mnemonic(ins.mnemonic)


@opcode("v_cndmask_b32")
def _cndmask(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a, b, sel = operands(ins, 4)
    ra, rb, write = vreader(a, ins, "f32"), vreader(b, ins, "f32"), vreader_mask(sel, ins)
    wd = vwriter(d, ins)
    return Compiled(ins, lambda w: wd(w, np.where(write(w), rb(w), ra(w))), codes(a, b, sel),
                    codes(d))


def vreader_mask(op, ins: Instruction):
    """A 64-bit lane mask operand (VCC or an SGPR pair) as a bool array."""
    from .wave import bits_to_mask

    read = sreader(op, ins, 64)
    return lambda w: bits_to_mask(read(w))


_ICMP: dict[str, Callable[[Arr, Arr], Arr]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
_FCMP: dict[str, Callable[[Arr, Arr], Arr]] = {
    # Ordered comparisons are false when either side is NaN; the n* forms are their
    # negations (true on NaN).
    "eq": np.equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lg": lambda a, b: (a < b) | (a > b),
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b), "nle": lambda a, b: ~(a <= b),
    "ngt": lambda a, b: ~(a > b), "nge": lambda a, b: ~(a >= b),
    "nlg": lambda a, b: ~((a < b) | (a > b)),
}


def _build_cmp(ins: Instruction, ctx: DecodeContext) -> Compiled:
    _, _, op, typ = base(ins).split("_")
    if typ == "f32":
        kind, fcmp = "f32", _FCMP[op]
        fn = lambda a, b: fcmp(fp.f32(a), fp.f32(b))  # noqa: E731
    elif typ == "i32":
        kind, icmp = "int", _ICMP[op]
        fn = lambda a, b: icmp(a.view(np.int32), b.view(np.int32))  # noqa: E731
    else:
        kind, fn = "int", _ICMP[op]
    d, a, b = operands(ins, 3)
    ra, rb, wd = vreader(a, ins, kind), vreader(b, ins, kind), swriter(d, ins, 64)

    def run(w) -> None:
        # Inactive lanes write 0 into the mask.
        with np.errstate(invalid="ignore"):
            wd(w, mask_to_bits(fn(ra(w), rb(w)) & w.exec_mask))

    return Compiled(ins, run, codes(a, b), codes(d))


for _op in _ICMP:
    opcode(f"v_cmp_{_op}_i32", f"v_cmp_{_op}_u32")(_build_cmp)
for _op in _FCMP:
    opcode(f"v_cmp_{_op}_f32")(_build_cmp)
