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
