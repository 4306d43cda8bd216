"""Floating-point conversions as the CDNA3/CDNA4 ISA guides define them.

All values travel as raw bit patterns in ``uint32`` arrays. Rounding is round-to-nearest-
even (the mode the kernels are compiled with, ``.amdhsa_float_round_mode_* 0``) except
where an instruction says otherwise (``v_cvt_pkrtz_f16_f32`` rounds toward zero).
Denormals are kept (``.amdhsa_float_denorm_mode_* 3``); the emulator refuses kernels
compiled with another float mode rather than guess.
"""

from __future__ import annotations

import numpy as np


def f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint32, copy=False).view(np.float32)


def bits32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def bf16_to_f32(half: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (low 16 bits of ``half``) to float32 values (exact)."""
    return ((half.astype(np.uint32) & 0xFFFF) << 16).view(np.float32)


def f16_to_f32(half: np.ndarray) -> np.ndarray:
    """fp16 bit patterns (low 16 bits) to float32 values (exact, denormals kept)."""
    return (half.astype(np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32)


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values to bf16 bit patterns, round to nearest even; NaN stays a quiet NaN."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    quiet = (bits >> 16) | 0x40
    return np.where(nan, quiet, rounded).astype(np.uint32) & 0xFFFF


def f32_to_f16(values: np.ndarray) -> np.ndarray:
    """float32 values to fp16 bit patterns, round to nearest even (IEEE, denormals kept)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16).astype(
            np.uint32)


def f32_to_f16_rtz(values: np.ndarray) -> np.ndarray:
    """float32 values to fp16 bit patterns, rounding toward zero."""
    x = np.asarray(values, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x.astype(np.float16)
        away = np.abs(h.astype(np.float32)) > np.abs(x)
        toward = np.nextafter(h, np.float16(0)).astype(np.float16)
        h = np.where(away & np.isfinite(x), toward, h)
        h = np.where(np.isinf(h) & np.isfinite(x), np.copysign(np.float16(65504), x), h)
    return h.astype(np.float16).view(np.uint16).astype(np.uint32)


def f32_to_u32(values: np.ndarray) -> np.ndarray:
    """Saturating float32 to uint32 (NaN gives 0), truncating toward zero."""
    x = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    return np.clip(np.trunc(x), 0, 2**32 - 1).astype(np.uint64).astype(np.uint32)


def f32_to_i32(values: np.ndarray) -> np.ndarray:
    x = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    return np.clip(np.trunc(x), -(2**31), 2**31 - 1).astype(np.int64).astype(np.int32).view(
        np.uint32)


def _minifloat_table(exp_bits: int, man_bits: int, bias: int, *, nan_all_ones: bool,
                     ieee_special: bool) -> np.ndarray:
    """float64 value of every bit pattern of a small float format (sign, exponent,
    mantissa; subnormals at exponent 0). ``ieee_special``: the top exponent holds inf
    (mantissa 0) and NaN (e5m2); ``nan_all_ones``: only the all-ones exponent and
    mantissa pattern is NaN (e4m3fn); neither: every pattern is a number (fp6, fp4)."""
    count = 1 << (1 + exp_bits + man_bits)
    table = np.empty(count, np.float64)
    top = (1 << exp_bits) - 1
    for bits in range(count):
        sign = -1.0 if bits >> (exp_bits + man_bits) else 1.0
        exp = (bits >> man_bits) & top
        man = bits & ((1 << man_bits) - 1)
        if ieee_special and exp == top:
            value = np.inf if man == 0 else np.nan
        elif nan_all_ones and exp == top and man == (1 << man_bits) - 1:
            value = np.nan
        elif exp == 0:
            value = man / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + man / (1 << man_bits)) * 2.0 ** (exp - bias)
        table[bits] = sign * value
    return table


# The OCP microscaling element formats the CDNA4 f8f6f4 MFMAs read, by cbsz/blgp code:
# 0 FP8 E4M3 (bias 7, no inf, S.1111.111 NaN), 1 BF8 E5M2 (bias 15, IEEE inf/NaN),
# 2 FP6 E2M3 (bias 1), 3 BF6 E3M2 (bias 3), 4 FP4 E2M1 (bias 1); no inf/NaN in fp6/fp4.
MX_FORMATS: dict[int, tuple[str, int, np.ndarray]] = {
    0: ("fp8_e4m3", 8, _minifloat_table(4, 3, 7, nan_all_ones=True, ieee_special=False)),
    1: ("bf8_e5m2", 8, _minifloat_table(5, 2, 15, nan_all_ones=False, ieee_special=True)),
    2: ("fp6_e2m3", 6, _minifloat_table(2, 3, 1, nan_all_ones=False, ieee_special=False)),
    3: ("bf6_e3m2", 6, _minifloat_table(3, 2, 3, nan_all_ones=False, ieee_special=False)),
    4: ("fp4_e2m1", 4, _minifloat_table(2, 1, 1, nan_all_ones=False, ieee_special=False)),
}


def unpack_mx(words: np.ndarray, code: int, count: int) -> np.ndarray:
    """``count`` elements of MX format ``code`` from each row of little-endian 32-bit
    ``words`` (rows, n): element ``i`` is bits ``[i * w, (i + 1) * w)`` of the row's bit
    string (w = 8, 6 or 4), as float64."""
    _, width, table = MX_FORMATS[code]
    raw = np.ascontiguousarray(words.astype(np.uint32)).view(np.uint8)  # (rows, 4n)
    bits = np.unpackbits(raw, axis=-1, bitorder="little")[:, : count * width]
    weights = (1 << np.arange(width)).astype(np.uint16)
    codes = (bits.reshape(bits.shape[0], count, width) * weights).sum(-1)
    return table[codes]


def e8m0_to_f64(byte: np.ndarray) -> np.ndarray:
    """E8M0 scale bytes to their values ``2^(byte - 127)``; 0xFF is NaN."""
    b = np.asarray(byte).astype(np.int64) & 0xFF
    return np.where(b == 0xFF, np.nan, np.ldexp(1.0, b - 127))
