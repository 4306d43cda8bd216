"""scripts/aiter_reference.py: AITER FlyDSL kernel-name parsing and argument errors
(no network, no AITER clone, no compile)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_script

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "aiter_reference.py"
GFX950 = ("flydsl_gemm4_abf16_wbf16_bf16_t16x64x128_split_k8_block_m_warp1_block_n_warp2"
          "_block_k_warp1_async_copyTrue_b_to_ldsTrue_b_preshuffleFalse_c_to_ldsFalse_gfx950")
GFX942 = ("flydsl_gemm4_abf16_wbf16_bf16_t32x64x64_split_k8_block_m_warp2_block_n_warp2"
          "_block_k_warp1_async_copyFalse_b_to_ldsTrue_b_preshuffleFalse_c_to_ldsFalse_gfx942")


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_script("aiter_reference")


def test_parse_gfx950_name(tool: ModuleType) -> None:
    f = tool.parse_kernel_name(GFX950)
    assert f["stages"] == "4" and f["a_dtype"] == "bf16" and f["kernel_out_dtype"] == "bf16"
    assert (f["tile_m"], f["tile_n"], f["tile_k"], f["split_k"]) == ("16", "64", "128", "8")
    assert (f["block_m_warps"], f["block_n_warps"], f["block_k_warps"]) == ("1", "2", "1")
    assert f["async_copy"] == "True" and f["b_preshuffle"] == "False"
    assert f["small_m_suffix"] == "" and f["target_gfx"] == "gfx950"
    cfg = tool.config_from_name(GFX950)
    assert cfg == {"dtype": "bf16", "stages": 4, "tile_m": 16, "tile_n": 64, "tile_k": 128,
                   "split_k": 8, "block_m_warps": 1, "block_n_warps": 2, "block_k_warps": 1,
                   "b_to_lds": True}
    assert tool.config_id(cfg) == "aiter_s4_t16x64x128_sk8_w1x2x1"


def test_parse_gfx942_and_small_m(tool: ModuleType) -> None:
    f = tool.parse_kernel_name(GFX942)
    assert f["target_gfx"] == "gfx942" and f["async_copy"] == "False"
    small = GFX950.replace("_gfx950", "_small_m_nr2_pn4_gfx950")
    assert tool.parse_kernel_name(small)["small_m_suffix"] == "_small_m_nr2_pn4"
    with pytest.raises(tool.UsageError, match="small_m"):
        tool.config_from_name(small)
    assert tool.parse_kernel_name("flydsl_gemm4_bogus") is None


def test_missing_git_dir_names_the_option(tool: ModuleType, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        tool.main(["rows", "--aiter-git", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--aiter-git" in capsys.readouterr().err
