"""The FlyDSL backend hands the hooks a ``ChoiceProvider`` (a typing.Protocol), not a
function with capabilities set as attributes."""

from __future__ import annotations

import pytest
import torch

from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.autotune.provider import FlydslChoiceProvider
from inductor_flydsl.inductor.adapter import internals
from inductor_flydsl.inductor.autotune.choice_provider import ChoiceProvider


def test_flydsl_provider_is_a_choice_provider_and_a_bare_function_is_not() -> None:
    assert isinstance(FlydslChoiceProvider(), ChoiceProvider)
    assert not isinstance(provider.flydsl_choices, ChoiceProvider)  # no fuses_epilogues


def test_fuses_epilogues_asks_the_backend_token_and_the_runtime(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    flydsl = FlydslChoiceProvider()
    with internals.config.patch(max_autotune_gemm_backends="ATEN,TRITON,FLYDSL"):
        assert not flydsl.fuses_epilogues(cpu)  # no ROCm runtime here
        monkeypatch.setattr(provider, "runtime_target", lambda device: ("gfx950", []))
        assert flydsl.fuses_epilogues(cpu)
    with internals.config.patch(max_autotune_gemm_backends="ATEN,TRITON"):
        assert not flydsl.fuses_epilogues(cpu)  # FLYDSL not asked for
    assert flydsl("not_a_gemm", [], None, []) == []
