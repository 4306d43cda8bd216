"""The emulator's MX element formats and E8M0 scales (the CDNA4 f8f6f4 operand formats)
and the MX template's host-side checks, without a compile."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inductor_flydsl.numerics import fp
from inductor_flydsl.numerics import mx as mx_numerics
from inductor_flydsl.template_loader import load_template

mx = load_template("gemm_mx")


@pytest.mark.parametrize(("code", "dtype"), [(0, torch.float8_e4m3fn), (1, torch.float8_e5m2)])
def test_fp8_tables_match_torch(code: int, dtype: torch.dtype) -> None:
    ours = fp.MX_FORMATS[code][2]
    theirs = torch.arange(256, dtype=torch.uint8).view(dtype).double().numpy()
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.array_equal(ours[~np.isnan(ours)], theirs[~np.isnan(theirs)])


def test_small_formats() -> None:
    assert fp.MX_FORMATS[4][2][:8].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]  # e2m1
    assert fp.MX_FORMATS[2][2][:8].tolist() == [i / 8 for i in range(8)]  # e2m3 subnormals
    assert fp.MX_FORMATS[2][2].max() == 7.5 and fp.MX_FORMATS[3][2].max() == 28.0
    # FP4 nibbles: the lower K index in the low nibble of each byte
    word = np.array([[0x000000F1]], np.uint32)
    assert fp.unpack_mx(word, 4, 4).tolist() == [[0.5, -6.0, 0.0, 0.0]]
    # FP6: 6-bit fields packed across byte boundaries, little-endian
    word = np.array([[0b000011_000001]], np.uint32)
    assert fp.unpack_mx(word, 2, 2).tolist() == [[0.125, 0.375]]


def test_e8m0_scales() -> None:
    values = fp.e8m0_to_f64(np.array([0, 126, 127, 130, 254, 255]))
    assert values[:5].tolist() == [2.0**-127, 0.5, 1.0, 8.0, 2.0**127]
    assert np.isnan(values[5])


def test_dequantize_applies_one_scale_per_32_elements() -> None:
    gen = torch.Generator().manual_seed(0)
    a = mx_numerics.random_operand(3, 64, "e2m1", gen)
    scale = torch.tensor([[127, 129], [126, 127], [127, 127]], dtype=torch.uint8)
    deq = mx_numerics.dequantize(a, scale.view(torch.float8_e8m0fnu))
    raw = mx_numerics.element_values(a)
    assert torch.equal(deq[0, :32], raw[0, :32]) and torch.equal(deq[0, 32:], 4 * raw[0, 32:])
    assert torch.equal(deq[1, :32], raw[1, :32] / 2)


def test_launcher_args_refuse_bad_operands() -> None:
    gen = torch.Generator().manual_seed(0)
    a = mx_numerics.random_operand(32, 256, "e4m3", gen)
    w = mx_numerics.random_operand(64, 256, "e4m3", gen)
    sa, sb = mx_numerics.random_scales(32, 256, gen), mx_numerics.random_scales(64, 256, gen)
    out = torch.empty(32, 64, dtype=torch.bfloat16)
    args = mx.launcher_args(a, w.t(), sa, sb, None, out)
    assert args[6:9] == (32, 64, 256)
    assert args[0].dtype == torch.bfloat16 and args[0].shape == (32, 128)  # 16-bit units
    with pytest.raises(ValueError, match="K-contiguous"):
        mx.launcher_args(a, w.t().contiguous(), sa, sb, None, out)
    with pytest.raises(ValueError, match="scale_b"):
        mx.launcher_args(a, w.t(), sa, sb[:, :4], None, out)
    with pytest.raises(ValueError, match="unsupported MX operand"):
        mx.launcher_args(a.view(torch.uint8), w.t(), sa, sb, None, out)


def test_configs_and_archs() -> None:
    config = mx.MxConfig()
    assert "no scaled MFMA" in mx.resource_reason(config, "e4m3xe4m3_bf16", "gfx942")
    big = mx.MxConfig(tile_m=256, tile_n=256, tile_k=512, waves_m=2, waves_n=4)
    assert "LDS" in mx.resource_reason(big, "e4m3xe4m3_bf16", "gfx950")
    with pytest.raises(ValueError, match="tile_k"):
        mx.MxConfig(tile_k=64).validate()
    with pytest.raises(ValueError, match="format"):
        mx.parse_dtype("e4m3xint8_bf16")
    assert mx.lds_bytes(config, "e2m1xe2m1_bf16") * 2 == mx.lds_bytes(config, "e4m3xe4m3_bf16")
