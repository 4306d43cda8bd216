"""Which plugin backends add choices to Inductor's autotuning (FlyDSL on ROCm)."""

from __future__ import annotations

from .inductor.hooks import PluginState


def register_choice_providers(state: PluginState) -> None:
    """Attach the choice providers of every plugin backend to ``state``."""
    from .flydsl_backend.autotune.provider import FlydslChoiceProvider
    from .inductor.vllm.vllm_choices import VllmOpChoiceProvider

    # Nothing is started and no device is asked here (enable() runs at `import torch`
    # in every process): the build server starts at the first selection offering FlyDSL.
    # vLLM's op: in the selections of the GEMMs rewritten from it (vllm_gemm_rewrite.py)
    state.providers[:] = [FlydslChoiceProvider(), VllmOpChoiceProvider()]
