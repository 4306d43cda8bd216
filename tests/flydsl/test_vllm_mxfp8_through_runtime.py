"""vLLM's MXFP8 linear (``vllm::rocm_mxfp8_block32_gemm``, e4m3 with 32x32 block-scaled
weights) lowered by the plugin inside a real ``torch.compile(mode="max-autotune")`` on
this CPU machine, with the MX template's ``nt_b32`` candidates offered, built, launched
through FlyDSL's runtime into the ISA emulator (over the stand-in HIP library),
validated against the float64 block-scale reference, benchmarked beside vLLM's op and
recorded (issue 51).

vLLM's op is registered with vLLM 0.32.0's schema by tests/core/test_vllm_gemm_rewrite.py
(its CPU body computes the dequantize-then-matmul reference). Replaced as in
tests/flydsl/test_autotune_through_runtime.py, and nothing else: the provider's runtime
check and the kernel runner's device runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.db.open import open_db
from inductor_flydsl.db.queries import export_rows
from tests.core.test_vllm_gemm_rewrite import mxfp8_linear, mxfp8_operands
from tests.flydsl.test_autotune_through_runtime import offered_through_runtime
from tests.flydsl.test_launch_runtime import pytestmark as needs_llvm

pytestmark = [needs_llvm, pytest.mark.slow]


def cloned_mxfp8_linear(x: torch.Tensor, x_scale: torch.Tensor, weight: torch.Tensor,
                        w_scale: torch.Tensor) -> torch.Tensor:
    """The operands made in the graph (Inductor treats CPU graph inputs as unaligned,
    which the MX template refuses; a GPU's inputs are aligned): the same bytes, through a
    kernel of the graph."""
    def made(t: torch.Tensor) -> torch.Tensor:
        if t.dtype == torch.uint8:  # the scales
            return t ^ 0
        return t.to(torch.float16).to(t.dtype)  # e4m3 -> fp16 -> e4m3: exact

    return mxfp8_linear(made(x), made(x_scale), made(weight), made(w_scale))


def test_block_scaled_candidates_are_validated_and_recorded_beside_vllms_op(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INDUCTOR_FLYDSL_CANDIDATES", "2")
    # N = 96: three 32-row scale blocks, the last tile partly past N for tile_n = 64
    args = mxfp8_operands(m=16, n=96, k=256)
    with offered_through_runtime(monkeypatch, tmp_path) as (db, runner, hip):
        before = inductor_flydsl.stats().as_dict()  # the process's counters: count ours
        with fresh_cache():
            torch._dynamo.reset()
            got = torch.compile(cloned_mxfp8_linear, mode="max-autotune",
                                dynamic=False)(*args)
        emulation = runner.runtime.emulation
        assert emulation.errors == [] and emulation.runs >= 2
        assert hip.launch_count() == emulation.runs
        after = inductor_flydsl.stats().as_dict()
    torch.testing.assert_close(got, mxfp8_linear(*args), rtol=2e-2, atol=2e-2)
    gained = {k: after[k] - before[k] for k in ("errors", "recorded")}
    assert gained == {"errors": 0, "recorded": 1}, gained
    rows = export_rows(open_db(db, writable=False))
    assert {r["summary"] for r in rows} == {
        "scaled_mm float8_e4m3fn 16x96x256 nt scale_b=32x32 out_dtype=bfloat16"}, rows
    vllm = [r for r in rows if r["backend"] == "vllm"]
    flydsl = [r for r in rows if r["backend"] == "flydsl"]
    assert len(vllm) == 1 and vllm[0]["status"] == "ok", rows
    assert json.loads(vllm[0]["config"]) == {"op": "vllm::rocm_mxfp8_block32_gemm"}
    assert len(flydsl) == 2 and all(r["status"] == "ok" and r["time_ms"] > 0
                                    for r in flydsl), rows
    assert {json.loads(r["config"])["template"] for r in flydsl} == {"gemm_mx"}
