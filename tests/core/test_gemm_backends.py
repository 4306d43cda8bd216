"""``max_autotune_gemm_backends`` read in one place (``inductor/autotune/gemm_backends.py``): by
the FlyDSL provider (is FLYDSL asked for), by ``doctor`` (which backends) and by the
fused-epilogue lowering (Inductor's own competitor, FlyDSL left out)."""

from __future__ import annotations

import torch._inductor.config as inductor_config

from inductor_flydsl.inductor.autotune.gemm_backends import (
    backend_tokens,
    flydsl_requested,
    without_flydsl,
)


def test_tokens_any_case_and_spacing() -> None:
    assert backend_tokens(" aten, Triton ,,flydsl ") == ["ATEN", "TRITON", "FLYDSL"]
    assert flydsl_requested("ATEN,FlyDSL") and not flydsl_requested("ATEN,TRITON")
    assert not flydsl_requested("FLYDSLX,ATEN")  # a whole name, not a prefix


def test_without_flydsl_keeps_the_others_as_written() -> None:
    assert without_flydsl("ATEN, triton,flydsl") == "ATEN,triton"
    assert without_flydsl("FLYDSL") == "ATEN"  # Inductor needs one backend


def test_reads_inductors_config_when_given_nothing() -> None:
    with inductor_config.patch(max_autotune_gemm_backends="TRITON,FLYDSL"):
        assert backend_tokens() == ["TRITON", "FLYDSL"] and flydsl_requested()
        assert without_flydsl() == "TRITON"
    with inductor_config.patch(max_autotune_gemm_backends="ATEN"):
        assert not flydsl_requested()
