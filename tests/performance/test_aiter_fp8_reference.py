"""scripts/aiter_fp8_reference.py (AITER's FlyDSL FP8 preshuffle kernel names, its tables)
and scripts/validate_performance_model.py (its summaries by kernel, bound, stage count and
for the fastest rows), on CPU: no AITER clone, no compile; the validation runs as a real
subprocess on a stored gfx950 ISA file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = ROOT / "scripts" / "aiter_fp8_reference.py"
STORED_ISA = ROOT / "tests" / "flydsl" / "data" / "gfx950_bf16_nt_mm_64x64x64_w2x2_s2.s"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_script("aiter_fp8_reference")


def test_parse_the_four_field_preshuffle_names(tool: ModuleType) -> None:
    name = "flydsl_bpreshuflle_32x64x128_F8_F8_B16_0x1x0x1_default"
    cfg = tool.parse_kernel_name(name)
    assert cfg == {"tile_m": 32, "tile_n": 64, "tile_k": 128, "async_copy": 0,
                   "waves_per_eu": 1, "xcd_swizzle": 0, "lds_stage": 1,
                   "scheduler": "default"}
    assert tool.config_id(cfg) == "aiter_fp8_s1_t32x64x128_a0_w1_x0"
    swizzled = tool.parse_kernel_name("flydsl_bpreshuflle_128x256x128_F8_F8_B16_1x2x4x2_default")
    assert (swizzled["xcd_swizzle"], swizzled["lds_stage"]) == (4, 2)
    # another grammar (five fields), the 8-wave pipeline and a third LDS stage are not taken
    for other in ("flydsl_bpreshuflle_32x64x512_F8_F8_B16_2x1x0x3x4_default",
                  "flydsl_bpreshuffle_8w_256x256x128_F8_F8_B16_2x8",
                  "flydsl_bpreshuflle_32x64x128_F8_F8_B16_0x1x0x3_default"):
        assert tool.parse_kernel_name(other) is None


def test_only_the_per_token_fp8_preshuffle_tables(tool: ModuleType) -> None:
    assert tool._is_fp8_table("aiter/configs/a8w8_bpreshuffle_tuned_gemm.csv")
    assert tool._is_fp8_table(
        "aiter/configs/model_configs/a8w8_bpreshuffle_tuned_gemm_kimik3.csv")
    for other in ("aiter/configs/a8w8_bpreshuffle_untuned_gemm.csv",
                  "aiter/configs/a8w8_blockscale_bpreshuffle_tuned_gemm.csv",
                  "aiter/configs/bf16_tuned_gemm.csv"):
        assert not tool._is_fp8_table(other)


def test_missing_git_dir_names_the_option(tool: ModuleType, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        tool.main(["rows", "--aiter-git", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--aiter-git" in capsys.readouterr().err


def _manifest(tmp_path: Path, name: str, entry: dict, rows: list[tuple[int, float]]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    entry = {**entry, "isa": str(STORED_ISA), "compiled_for": {"N": 1024, "K": 4096},
             "other_NK_compiles": [],
             "rows": [{"M": m, "N": 1024, "K": 4096, "us": us, "cu_num": 256,
                       "source_file": "aiter/configs/x.csv"} for m, us in rows]}
    path = folder / "manifest.json"
    path.write_text(json.dumps([entry]))
    return path


def test_validation_summarises_by_kernel_bound_stages_and_the_fastest(tmp_path: Path
                                                                      ) -> None:
    """Two manifests (a split-K HGEMM entry, an FP8 preshuffle entry) on one stored ISA
    file: every row is a point, each family and stage count has its own figures, and only
    rows measured at most --fast-us count as the fastest."""
    bf16 = _manifest(tmp_path, "bf16", {
        "id": "aiter_s2_t64x64x64_sk1_w2x2x1",
        "config": {"tile_m": 64, "tile_n": 64, "tile_k": 64, "stages": 2, "split_k": 1,
                   "block_m_warps": 2, "block_n_warps": 2, "block_k_warps": 1}},
        [(16, 5.0), (256, 9.0)])
    fp8 = _manifest(tmp_path, "fp8", {
        "id": "aiter_fp8_s1_t64x64x64_a0_w0_x0", "kernel": "fp8_preshuffle",
        "config": {"tile_m": 64, "tile_n": 64, "tile_k": 64, "lds_stage": 1}},
        [(32, 2.9)])
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "validate_performance_model.py"),
         "--manifest", str(bf16), "--manifest", str(fp8), "--csv", str(tmp_path / "v.csv")],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout[out.stdout.index("\n{") + 1:])
    assert summary["points"] == 3 and summary["timing"] == "kernel"
    assert set(summary["by_kernel"]) == {"bf16_splitk", "fp8_preshuffle"}
    assert summary["by_kernel"]["fp8_preshuffle"]["points"] == 1
    assert {k: v["points"] for k, v in summary["by_stages"].items()} == {"1": 1, "2": 2}
    assert sum(v["points"] for v in summary["by_bound"].values()) == 3
    assert summary["fastest"]["points"] == 1 and summary["fastest"]["max_measured_us"] == 3.1
    assert len((tmp_path / "v.csv").read_text().splitlines()) == 4
