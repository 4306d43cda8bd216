"""Everything that changes a candidate's time or numerics is in the DB key or in a
result's validity (issue 33, point 4): flipping it gives a miss, not a served record
measured under other settings. Real torch.compile (CPU, freezing, max-autotune), real
SQLite file; the validity and candidate-id parts with Inductor's own objects' values."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

import inductor_flydsl
from inductor_flydsl.inductor.autotune.candidates import candidate_id, config_of
from inductor_flydsl.provenance.software import current_software
from inductor_flydsl.provenance.validity import result_changes


@pytest.fixture
def compile_counts(tmp_path: Path) -> Iterator[Callable[[], dict[str, int]]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 48).eval()
    x = torch.randn(24, 64)
    precision = torch.backends.mkldnn.matmul.fp32_precision
    inductor_flydsl.enable(tmp_path / "t.db", "readwrite")

    def compile_once() -> dict[str, int]:
        before = dict(inductor_flydsl.stats())
        torch._dynamo.reset()
        with torch.no_grad(), torch._inductor.config.patch(
                freezing=True, fx_graph_cache=False, autotune_local_cache=False,
                max_autotune_gemm_backends="ATEN,CPP"):
            torch.compile(model, mode="max-autotune")(x)
        after = inductor_flydsl.stats()
        return {k: after[k] - before[k] for k in ("hits", "misses")}

    try:
        yield compile_once
    finally:
        inductor_flydsl.disable()
        torch.backends.mkldnn.matmul.fp32_precision = precision
        torch.set_float32_matmul_precision("highest")
        torch._dynamo.reset()


def test_float32_matmul_precision_and_onednn_math_mode_are_keyed(compile_counts) -> None:
    assert compile_counts() == {"hits": 0, "misses": 1}
    assert compile_counts() == {"hits": 1, "misses": 0}
    torch.set_float32_matmul_precision("high")  # TF32 allowed (ATen, Triton, oneDNN)
    assert compile_counts() == {"hits": 0, "misses": 1}
    assert compile_counts() == {"hits": 1, "misses": 0}
    # oneDNN's bf16 math for fp32 GEMMs (torch 2.13's Inductor fails on the per-backend
    # API alone, torch.backends.mkldnn.matmul.fp32_precision = "bf16", plugin or not)
    torch.set_float32_matmul_precision("medium")
    assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"
    assert compile_counts() == {"hits": 0, "misses": 1}
    torch.set_float32_matmul_precision("highest")
    assert compile_counts() == {"hits": 1, "misses": 0}  # the first record again


class _Subgraph:
    """What candidates.py reads of Inductor's SubgraphChoiceCaller: its hash_key(),
    info_dict() and config_patches (the settings it is compiled with)."""

    name = "gemm_epilogue_0"

    def __init__(self, patches: dict) -> None:
        self.config_patches = patches

    def hash_key(self) -> str:
        return "gemm_epilogue-[8, 8]-graph"

    def info_dict(self) -> dict:
        return {"backend": "subgraph", "kernel_name": self.name}


def test_subgraph_config_patches_are_in_its_identity() -> None:
    plain = _Subgraph({"max_autotune": False, "max_autotune_gemm_backends": "ATEN"})
    tuned = _Subgraph({"max_autotune": True, "max_autotune_gemm_backends": "ATEN,TRITON"})
    assert candidate_id(plain) != candidate_id(tuned)
    assert config_of(tuned)["config_patches"]["max_autotune_gemm_backends"] == "ATEN,TRITON"
    assert candidate_id(_Subgraph({})) == "gemm_epilogue-[8, 8]-graph"


def test_subgraph_results_depend_on_triton_and_blas() -> None:
    now = current_software()
    recorded = {"torch": now.torch, "triton": "0.0.1-other", "blas": now.blas}
    assert any("triton" in c for c in result_changes("subgraph", {}, recorded, now, "cpu"))
    assert not result_changes("aten", {}, recorded, now, "cpu")
    gpu = {"torch": now.torch, "triton": now.triton, "blas": "otherblas"}
    assert any("BLAS" in c for c in result_changes("subgraph", {}, gpu, now, "cuda"))
    assert not result_changes("triton", {}, gpu, now, "cuda")
