"""Scalar ALU instructions (SOP1, SOP2, SOPC, SOPK), per the CDNA3/CDNA4 pseudocode.

Each function takes the source values (unsigned 32- or 64-bit Python ints) and the
current SCC and returns ``(result, scc)``; ``scc`` None leaves SCC unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from .decode import Compiled, DecodeContext, codes, opcode, operands, signed32, sreader, swriter
from .program import Instruction

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


def _ovf_add(a: int, b: int, r: int) -> int:
    sa, sb, sr = a >> 31 & 1, b >> 31 & 1, r >> 31 & 1
    return int(sa == sb and sr != sa)


def _ovf_sub(a: int, b: int, r: int) -> int:
    sa, sb, sr = a >> 31 & 1, b >> 31 & 1, r >> 31 & 1
    return int(sa != sb and sr != sa)


def _add_i32(a, b, scc):
    r = (a + b) & M32
    return r, _ovf_add(a, b, r)


def _sub_i32(a, b, scc):
    r = (a - b) & M32
    return r, _ovf_sub(a, b, r)


def _ashr32(a: int, n: int) -> int:
    return (signed32(a) >> (n & 31)) & M32


def _mul_hi_i32(a: int, b: int) -> int:
    return ((signed32(a) * signed32(b)) >> 32) & M32


def _nz(r: int) -> tuple[int, int]:
    return r, int(r != 0)


BINARY32: dict[str, Callable[[int, int, int], tuple[int, int | None]]] = {
    "s_add_u32": lambda a, b, c: ((a + b) & M32, int(a + b > M32)),
    "s_addc_u32": lambda a, b, c: ((a + b + c) & M32, int(a + b + c > M32)),
    "s_sub_u32": lambda a, b, c: ((a - b) & M32, int(b > a)),
    "s_subb_u32": lambda a, b, c: ((a - b - c) & M32, int(b + c > a)),
    "s_add_i32": _add_i32,
    "s_sub_i32": _sub_i32,
    "s_mul_i32": lambda a, b, c: ((a * b) & M32, None),
    "s_mul_hi_u32": lambda a, b, c: ((a * b) >> 32 & M32, None),
    "s_mul_hi_i32": lambda a, b, c: (_mul_hi_i32(a, b), None),
    "s_and_b32": lambda a, b, c: _nz(a & b),
    "s_or_b32": lambda a, b, c: _nz(a | b),
    "s_xor_b32": lambda a, b, c: _nz(a ^ b),
    "s_andn2_b32": lambda a, b, c: _nz(a & ~b & M32),
    "s_orn2_b32": lambda a, b, c: _nz((a | ~b) & M32),
    "s_nand_b32": lambda a, b, c: _nz(~(a & b) & M32),
    "s_nor_b32": lambda a, b, c: _nz(~(a | b) & M32),
    "s_xnor_b32": lambda a, b, c: _nz(~(a ^ b) & M32),
    "s_lshl_b32": lambda a, b, c: _nz((a << (b & 31)) & M32),
    "s_lshr_b32": lambda a, b, c: _nz(a >> (b & 31)),
    "s_ashr_i32": lambda a, b, c: _nz(_ashr32(a, b)),
    "s_min_i32": lambda a, b, c: (a, 1) if signed32(a) < signed32(b) else (b, 0),
    "s_max_i32": lambda a, b, c: (a, 1) if signed32(a) > signed32(b) else (b, 0),
    "s_min_u32": lambda a, b, c: (a, 1) if a < b else (b, 0),
    "s_max_u32": lambda a, b, c: (a, 1) if a > b else (b, 0),
    "s_cselect_b32": lambda a, b, c: (a if c else b, None),
    "s_lshl1_add_u32": lambda a, b, c: ((a << 1) + b & M32, int((a << 1) + b > M32)),
    "s_lshl2_add_u32": lambda a, b, c: ((a << 2) + b & M32, int((a << 2) + b > M32)),
    "s_lshl3_add_u32": lambda a, b, c: ((a << 3) + b & M32, int((a << 3) + b > M32)),
    "s_lshl4_add_u32": lambda a, b, c: ((a << 4) + b & M32, int((a << 4) + b > M32)),
    "s_bfe_u32": lambda a, b, c: _nz(_bfe(a, b)),
    "s_bfe_i32": lambda a, b, c: _nz(_bfe_signed(a, b)),
    "s_pack_ll_b32_b16": lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF) << 16, None),
    "s_pack_lh_b32_b16": lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF0000), None),
    "s_pack_hh_b32_b16": lambda a, b, c: ((a >> 16) | (b & 0xFFFF0000), None),
}


def _bfe_signed(a: int, b: int) -> int:
    width = (b >> 16) & 0x7F
    value = _bfe(a, b)
    if width and value >> (width - 1) & 1:
        value -= 1 << width
    return value & M32


def _bfe(a: int, b: int) -> int:
    offset, width = b & 31, (b >> 16) & 0x7F
    return (a >> offset) & ((1 << width) - 1) if width else 0


BINARY64: dict[str, Callable[[int, int, int], tuple[int, int | None]]] = {
    "s_and_b64": lambda a, b, c: _nz(a & b),
    "s_or_b64": lambda a, b, c: _nz(a | b),
    "s_xor_b64": lambda a, b, c: _nz(a ^ b),
    "s_andn2_b64": lambda a, b, c: _nz(a & ~b & M64),
    "s_orn2_b64": lambda a, b, c: _nz((a | ~b) & M64),
    "s_nand_b64": lambda a, b, c: _nz(~(a & b) & M64),
    "s_nor_b64": lambda a, b, c: _nz(~(a | b) & M64),
    "s_xnor_b64": lambda a, b, c: _nz(~(a ^ b) & M64),
    "s_cselect_b64": lambda a, b, c: (a if c else b, None),
}
SHIFT64: dict[str, Callable[[int, int], int]] = {
    "s_lshl_b64": lambda a, n: (a << (n & 63)) & M64,
    "s_lshr_b64": lambda a, n: a >> (n & 63),
    "s_ashr_i64": lambda a, n: ((a - (1 << 64) if a >> 63 else a) >> (n & 63)) & M64,
}
UNARY32: dict[str, Callable[[int, int], tuple[int, int | None]]] = {
    "s_mov_b32": lambda a, c: (a, None),
    "s_not_b32": lambda a, c: _nz(~a & M32),
    "s_abs_i32": lambda a, c: _nz(abs(signed32(a)) & M32),
    "s_brev_b32": lambda a, c: (int(f"{a:032b}"[::-1], 2), None),
    "s_sext_i32_i16": lambda a, c: ((a & 0xFFFF) - (0x10000 if a & 0x8000 else 0) & M32, None),
    "s_sext_i32_i8": lambda a, c: ((a & 0xFF) - (0x100 if a & 0x80 else 0) & M32, None),
    "s_ff1_i32_b32": lambda a, c: (((a & -a).bit_length() - 1) & M32 if a else M32, None),
}


@opcode("s_bitset1_b32", "s_bitset0_b32")
def _bitset(ins: Instruction, ctx: DecodeContext) -> Compiled:
    """``D.u32[S0.u32[4:0]] = 1`` (or 0): the destination keeps its other bits."""
    d, a = operands(ins, 2)
    ra, wd = sreader(a, ins), swriter(d, ins)
    assert d.reg is not None
    i, one = d.reg.index, ins.mnemonic.endswith("1_b32")

    def run(w) -> None:
        bit = 1 << (ra(w) & 31)
        wd(w, w.s[i] | bit if one else w.s[i] & ~bit)

    return Compiled(ins, run, codes(a, d), codes(d))
UNARY64: dict[str, Callable[[int, int], tuple[int, int | None]]] = {
    "s_mov_b64": lambda a, c: (a, None),
    "s_not_b64": lambda a, c: _nz(~a & M64),
}
COMPARE: dict[str, Callable[[int, int], bool]] = {
    "eq_i32": lambda a, b: a == b, "lg_i32": lambda a, b: a != b,
    "gt_i32": lambda a, b: signed32(a) > signed32(b),
    "ge_i32": lambda a, b: signed32(a) >= signed32(b),
    "lt_i32": lambda a, b: signed32(a) < signed32(b),
    "le_i32": lambda a, b: signed32(a) <= signed32(b),
    "eq_u32": lambda a, b: a == b, "lg_u32": lambda a, b: a != b,
    "gt_u32": lambda a, b: a > b, "ge_u32": lambda a, b: a >= b,
    "lt_u32": lambda a, b: a < b, "le_u32": lambda a, b: a <= b,
    "eq_u64": lambda a, b: a == b, "lg_u64": lambda a, b: a != b,
}


def _build_binary(fn, width: int):
    def build(ins: Instruction, ctx: DecodeContext) -> Compiled:
        d, a, b = operands(ins, 3)
        ra, rb, wd = sreader(a, ins, width), sreader(b, ins, width), swriter(d, ins, width)

        def run(w) -> None:
            result, scc = fn(ra(w), rb(w), w.scc)
            wd(w, result)
            if scc is not None:
                w.scc = scc

        return Compiled(ins, run, codes(a, b), codes(d))

    return build


def _build_shift64(fn):
    def build(ins: Instruction, ctx: DecodeContext) -> Compiled:
        d, a, b = operands(ins, 3)
        ra, rb, wd = sreader(a, ins, 64), sreader(b, ins), swriter(d, ins, 64)

        def run(w) -> None:
            result = fn(ra(w), rb(w))
            wd(w, result)
            w.scc = int(result != 0)

        return Compiled(ins, run, codes(a, b), codes(d))

    return build


def _build_unary(fn, width: int):
    def build(ins: Instruction, ctx: DecodeContext) -> Compiled:
        d, a = operands(ins, 2)
        ra, wd = sreader(a, ins, width), swriter(d, ins, width)

        def run(w) -> None:
            result, scc = fn(ra(w), w.scc)
            wd(w, result)
            if scc is not None:
                w.scc = scc

        return Compiled(ins, run, codes(a), codes(d))

    return build


def _build_compare(fn, width: int):
    def build(ins: Instruction, ctx: DecodeContext) -> Compiled:
        a, b = operands(ins, 2)
        ra, rb = sreader(a, ins, width), sreader(b, ins, width)

        def run(w) -> None:
            w.scc = int(fn(ra(w), rb(w)))

        return Compiled(ins, run, codes(a, b), ())

    return build


for _name, _fn in BINARY32.items():
    opcode(_name)(_build_binary(_fn, 32))
for _name, _fn in BINARY64.items():
    opcode(_name)(_build_binary(_fn, 64))
for _name, _fn in SHIFT64.items():
    opcode(_name)(_build_shift64(_fn))
for _name, _fn in UNARY32.items():
    opcode(_name)(_build_unary(_fn, 32))
for _name, _fn in UNARY64.items():
    opcode(_name)(_build_unary(_fn, 64))
for _name, _fn in COMPARE.items():
    opcode(f"s_cmp_{_name}")(_build_compare(_fn, 64 if _name.endswith("64") else 32))


@opcode("s_bitcmp1_b32", "s_bitcmp0_b32")
def _bitcmp(ins: Instruction, ctx: DecodeContext) -> Compiled:
    a, b = operands(ins, 2)
    ra, rb = sreader(a, ins), sreader(b, ins)
    want = 1 if ins.mnemonic.endswith("1_b32") else 0

    def run(w) -> None:
        w.scc = int((ra(w) >> (rb(w) & 31) & 1) == want)

    return Compiled(ins, run, codes(a, b), ())


# SOPK: 16-bit immediate, sign-extended for the _i32 forms.
def _simm16(text: str) -> int:
    value = int(text, 0) & 0xFFFF
    return value - 0x10000 if value & 0x8000 else value


@opcode("s_movk_i32", "s_mulk_i32", "s_addk_i32", "s_cmovk_i32")
def _sopk(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d = operands(ins, 2)[0]
    imm = _simm16(ins.operands[1])
    i = d.reg.index if d.reg is not None else -1
    wd = swriter(d, ins)
    name = ins.mnemonic

    def run(w) -> None:
        cur = w.s[i]
        if name == "s_movk_i32":
            wd(w, imm & M32)
        elif name == "s_mulk_i32":
            wd(w, (signed32(cur) * imm) & M32)
        elif name == "s_cmovk_i32":
            if w.scc:
                wd(w, imm & M32)
        else:
            result = (cur + imm) & M32
            w.scc = _ovf_add(cur, imm & M32, result)
            wd(w, result)

    reads = codes(d) if name != "s_movk_i32" else ()
    return Compiled(ins, run, reads, codes(d))


@opcode("s_cmpk_eq_i32", "s_cmpk_lg_i32", "s_cmpk_gt_i32", "s_cmpk_ge_i32", "s_cmpk_lt_i32",
        "s_cmpk_le_i32", "s_cmpk_eq_u32", "s_cmpk_lg_u32", "s_cmpk_gt_u32", "s_cmpk_ge_u32",
        "s_cmpk_lt_u32", "s_cmpk_le_u32")
def _cmpk(ins: Instruction, ctx: DecodeContext) -> Compiled:
    a = operands(ins, 2)[0]
    kind = ins.mnemonic.removeprefix("s_cmpk_")
    imm = _simm16(ins.operands[1]) if kind.endswith("i32") else int(ins.operands[1], 0) & 0xFFFF
    fn, ra = COMPARE[kind], sreader(a, ins)

    def run(w) -> None:
        w.scc = int(fn(ra(w), imm & M32))

    return Compiled(ins, run, codes(a), ())


@opcode("s_and_saveexec_b64", "s_or_saveexec_b64", "s_xor_saveexec_b64",
        "s_andn2_saveexec_b64")
def _saveexec(ins: Instruction, ctx: DecodeContext) -> Compiled:
    d, a = operands(ins, 2)
    ra, wd = sreader(a, ins, 64), swriter(d, ins, 64)
    op = ins.mnemonic.removeprefix("s_").removesuffix("_saveexec_b64")
    fns = {"and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
           "andn2": lambda s, e: s & ~e & M64}
    fn = fns[op]

    def run(w) -> None:
        saved = w.exec_bits
        src = ra(w)
        w.set_s64(126, fn(src, saved))
        wd(w, saved)
        w.scc = int(w.exec_bits != 0)

    return Compiled(ins, run, codes(a), codes(d))
