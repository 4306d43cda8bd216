"""What a plugin backend hands the hooks: a :class:`ChoiceProvider` adds its candidates to
one of Inductor's GEMM autotunings and says whether it can fuse epilogues on a device.

The hooks (``hooks.py``) hold a list of them (``PluginState.providers``, filled by
``plugin_choices.py``); the FlyDSL backend's is
``flydsl_backend.autotune.provider.FlydslChoiceProvider``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ChoiceProvider(Protocol):
    def __call__(self, name: str, input_nodes: Sequence[Any], layout: Any,
                 choices: Sequence[Any]) -> list[Any]:
        """Extra ChoiceCallers for the selection ``name`` (Inductor's op name, or the
        epilogue-fusion selection's) over ``input_nodes`` into ``layout``, given Inductor's
        own ``choices``; ``[]`` when the backend offers none (a debug log says why)."""
        ...

    def fuses_epilogues(self, device: Any) -> bool:
        """Whether the backend may offer candidates with a fused epilogue on ``device``:
        the epilogue-fusion graph pass asks before it turns a GEMM and its epilogue into
        one selection."""
        ...

    def captures_graphs(self, device: Any) -> bool:
        """Whether kernels on ``device`` can run inside CUDA/HIP graphs (a GPU): then a
        compile that captures graphs has each choice of this backend's selections timed
        by graph replay (``timing_parity.py``)."""
        ...
