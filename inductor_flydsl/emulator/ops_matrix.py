"""Matrix instructions (MFMA) with the operand and result lane layouts AMD documents.

For the 16x16 dense MFMAs with 16-bit inputs (``v_mfma_f32_16x16x{16,32}_{f16,bf16}``),
with ``K`` the instruction's depth and ``E = K / 4`` the elements each lane holds (2 per
32-bit register):

* A (16 x K): lane ``l`` holds row ``l % 16``, columns ``(l // 16) * E ... + E - 1``, in
  register order, low half first;
* B (K x 16): lane ``l`` holds column ``l % 16``, rows ``(l // 16) * E ... + E - 1``;
* C and D (16 x 16, fp32, 4 registers): register ``r`` of lane ``l`` is element
  ``(4 * (l // 16) + r, l % 16)``.

The CDNA3 layouts (K = 16) were read from AMD's Matrix Instruction Calculator; CDNA4's
K = 32 forms keep the pattern with 8 elements per lane (AMD CDNA4 ISA guide). Products of
bf16/fp16 values are exact; the K-term sum and the add of C are done in float64 and
rounded once to float32, i.e. the emulator is at least as accurate as the hardware, whose
internal accumulation order AMD does not specify.

The CDNA4 block-scaled MFMA ``v_mfma_scale_f32_16x16x128_f8f6f4 D, A, B, C, sA, sB``
(AMD CDNA4 ISA guide and the ROCm blog on CDNA4 matrix cores; the LLVM MC tests give the
syntax): A and B hold 32 elements per lane in the format ``cbsz`` (A) / ``blgp`` (B)
names (0 FP8 E4M3, 1 BF8 E5M2, 2 FP6 E2M3, 3 BF6 E3M2, 4 FP4 E2M1; 8, 6 or 4 registers),
packed little-endian from the first register's low bits. Lane ``l`` holds row (A) or
column (B) ``l % 16``, K elements ``32 * (l // 16) ... + 31``: exactly one 32-element
scale block. ``sA``/``sB`` are VGPRs: the byte ``op_sel[i] + 2 * op_sel_hi[i]`` of lane
``l``'s register is the E8M0 scale (``2^(byte - 127)``, 0xFF = NaN) of the data that lane
holds. ``D = C + sum_k (A[i,k] sA[i,k/32]) (B[k,j] sB[j,k/32])``; D and C have the 16x16
layout above. Products of these formats and power-of-two scales are exact in float64;
the sum is rounded once to float32.
"""

from __future__ import annotations

import re

import numpy as np

from ..numerics import fp
from .decode import Compiled, DecodeContext, codes, opcode, operands, vreader
from .errors import UnknownOpcode
from .operands import Operand
from .program import Instruction
from .wave import Wave

_MFMA_RE = re.compile(r"^v_mfma_f32_16x16x(\d+)_?(bf16|f16)(?:_1k)?$")


def _lane_matrix(w: Wave, op: Operand, elems: int, to_f32) -> np.ndarray:
    """A 16 x K operand (rows = lane % 16) from its registers, as float64."""
    assert op.reg is not None
    regs = w.vfile(op.reg.file)[op.reg.index: op.reg.index + elems // 2]  # (R, 64)
    halves = np.stack([regs & np.uint32(0xFFFF), regs >> np.uint32(16)], axis=-1)  # (R,64,2)
    per_lane = halves.transpose(1, 0, 2).reshape(64, elems)  # (64, E)
    values = to_f32(per_lane).astype(np.float64)
    return values.reshape(4, 16, elems).transpose(1, 0, 2).reshape(16, 4 * elems)


def _check_modifiers(ins: Instruction) -> None:
    for name in ("cbsz", "abid", "blgp"):
        value = ins.modifier(name)
        if value not in (None, "0"):
            raise UnknownOpcode(f"MFMA modifier {name}:{value} is not implemented ({ins.where()})")
    for name in ("neg_lo", "neg_hi"):
        if ins.has(name):
            raise UnknownOpcode(f"MFMA modifier {name} is not implemented ({ins.where()})")


def _read_c16(w: Wave, c: Operand) -> np.ndarray:
    """The 16 x 16 accumulator C (4 registers, or an inline constant) as float64."""
    if c.reg is not None:
        creg = w.vfile(c.reg.file)[c.reg.index: c.reg.index + 4].view(np.float32)
        return creg.reshape(4, 4, 16).transpose(1, 0, 2).reshape(16, 16).astype(np.float64)
    assert c.const is not None
    return np.full((16, 16), np.float32(np.uint32(c.const.bits(32, "f32")).view(np.float32)),
                   np.float64)


def _write_d16(w: Wave, d: Operand, dmat: np.ndarray) -> None:
    """Round the 16 x 16 float64 result once to fp32 and write it to D's 4 registers in
    the lanes EXEC enables."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = dmat.astype(np.float32).reshape(4, 4, 16).transpose(1, 0, 2).reshape(4, 64)
    out = out.view(np.uint32)
    assert d.reg is not None
    target = w.vfile(d.reg.file)
    if w.exec_full:
        target[d.reg.index: d.reg.index + 4] = out
    else:
        m = w.exec_mask
        for r in range(4):
            target[d.reg.index + r][m] = out[r][m]


@opcode("v_mfma_f32_16x16x32_bf16", "v_mfma_f32_16x16x32_f16", "v_mfma_f32_16x16x16_bf16",
        "v_mfma_f32_16x16x16bf16_1k", "v_mfma_f32_16x16x16_f16", "v_mfma_f32_16x16x16f16")
def _mfma16(ins: Instruction, ctx: DecodeContext) -> Compiled:
    _check_modifiers(ins)
    match = _MFMA_RE.match(ins.mnemonic.replace("x16bf16", "x16_bf16").replace("x16f16", "x16_f16"))
    if match is None:
        raise UnknownOpcode(f"MFMA form {ins.mnemonic!r} ({ins.where()})")
    k, dtype = int(match.group(1)), match.group(2)
    want_k = {"gfx950": (16, 32), "gfx942": (16,)}.get(ctx.arch, (16,))
    if k not in want_k:
        raise UnknownOpcode(f"{ins.mnemonic} does not exist on {ctx.arch} ({ins.where()})")
    elems = k // 4
    to_f32 = fp.bf16_to_f32 if dtype == "bf16" else fp.f16_to_f32
    d, a, b, c = operands(ins, 4)
    if d.reg is None or a.reg is None or b.reg is None:
        raise UnknownOpcode(f"MFMA operands must be registers ({ins.where()})")
    if a.reg.count != elems // 2 or b.reg.count != elems // 2 or d.reg.count != 4:
        raise UnknownOpcode(f"MFMA register counts do not match {ins.mnemonic} ({ins.where()})")

    def run(w: Wave) -> None:
        amat = _lane_matrix(w, a, elems, to_f32)  # (16, K)
        bmat = _lane_matrix(w, b, elems, to_f32)  # (16, K): row = column of B
        cmat = _read_c16(w, c)
        _write_d16(w, d, cmat + amat @ bmat.T)

    return Compiled(ins, run, codes(a, b, c), codes(d))


_SCALED_MFMA_16 = "v_mfma_scale_f32_16x16x128_f8f6f4"


def _selector(ins: Instruction, index: int) -> int:
    """The scale byte operand ``index`` (0: sA, 1: sB) selects: op_sel + 2 * op_sel_hi."""
    def bit(name: str) -> int:
        text = ins.modifier(name)
        if text is None:
            return 0
        values = [v.strip() for v in text.strip("[]").split(",")]
        if len(values) <= index or values[index] not in ("0", "1"):
            raise UnknownOpcode(f"cannot read {name}:{text} ({ins.where()})")
        return int(values[index])

    return bit("op_sel") + 2 * bit("op_sel_hi")


def _mx_matrix(w: Wave, op: Operand, code: int, regs: int) -> np.ndarray:
    """A 16 x 128 MX operand (rows = lane % 16) from its registers, as float64."""
    assert op.reg is not None
    words = w.vfile(op.reg.file)[op.reg.index: op.reg.index + regs].T  # (64 lanes, regs)
    per_lane = fp.unpack_mx(words, code, 32)  # (64, 32)
    return per_lane.reshape(4, 16, 32).transpose(1, 0, 2).reshape(16, 128)


def _mx_scales(values: np.ndarray, byte: int) -> np.ndarray:
    """16 x 128 per-element scales from the scale operand's 64 lane ``values``: lane
    ``16 g + r``'s selected byte scales row ``r``, K block ``g``."""
    scale = fp.e8m0_to_f64((values >> np.uint32(8 * byte)) & np.uint32(0xFF))  # (64,)
    return np.repeat(scale.reshape(4, 16).T, 32, axis=1)


@opcode(_SCALED_MFMA_16)
def _mfma_scale16(ins: Instruction, ctx: DecodeContext) -> Compiled:
    if ctx.arch != "gfx950":
        raise UnknownOpcode(f"{ins.mnemonic} does not exist on {ctx.arch} ({ins.where()})")
    for name in ("abid", "neg_lo", "neg_hi"):
        if ins.has(name) and ins.modifier(name) not in ("0", "[0,0,0]"):
            raise UnknownOpcode(f"MFMA modifier {name} is not implemented ({ins.where()})")
    codes_ab = []
    for name in ("cbsz", "blgp"):
        code = int(ins.modifier(name) or 0)
        if code not in fp.MX_FORMATS:
            raise UnknownOpcode(f"{name}:{code} names no f8f6f4 format ({ins.where()})")
        codes_ab.append(code)
    d, a, b, c, sa, sb = operands(ins, 6)
    if d.reg is None or a.reg is None or b.reg is None:
        raise UnknownOpcode(f"MFMA operands must be registers ({ins.where()})")
    regs = [fp.MX_FORMATS[code][1] for code in codes_ab]  # 32 elements x bits / 32
    if a.reg.count != regs[0] or b.reg.count != regs[1] or d.reg.count != 4:
        raise UnknownOpcode(f"MFMA register counts do not match the formats ({ins.where()})")
    byte_a, byte_b = _selector(ins, 0), _selector(ins, 1)
    read_sa, read_sb = vreader(sa, ins), vreader(sb, ins)

    def run(w: Wave) -> None:
        amat = _mx_matrix(w, a, codes_ab[0], regs[0]) * _mx_scales(read_sa(w), byte_a)
        bmat = _mx_matrix(w, b, codes_ab[1], regs[1]) * _mx_scales(read_sb(w), byte_b)
        cmat = _read_c16(w, c)
        _write_d16(w, d, cmat + amat @ bmat.T)

    return Compiled(ins, run, codes(a, b, c, sa, sb), codes(d))
