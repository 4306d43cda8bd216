"""vLLM's own GEMM op as a choice of the selection its node became.

``vllm_gemm_rewrite.py`` turns a static ``vllm::rocm_unquantized_gemm(x, weight, bias)``
into ``addmm(bias, x, weight.t())`` / ``mm(x, weight.t())``, marked with the op it came
from. When Inductor lowers that node, :class:`VllmOpChoiceProvider` adds one extern
choice to its selection: vLLM's op itself, so a selection picks it wherever vLLM's
hand-written dispatch (its skinny kernels, AITER's GEMMs, ``F.linear``) is fastest, and
the DB records its time beside every other candidate's (backend ``vllm``).

- Benchmarked as Inductor benchmarks any extern choice, on the selection's inputs: the
  call is ``vllm::rocm_unquantized_gemm(x, weight_t.t(), bias_row)``, two views and the
  op (timed by graph replay where the compile captures graphs, as every choice then is).
- Generated code calls ``torch.ops.vllm.rocm_unquantized_gemm.default(x, weight, bias)``
  on views of the same buffers (an Inductor fallback kernel, as Inductor lowers the op
  without the plugin): a graph loaded from a cache needs vLLM's op, nothing of the plugin.
- Its candidate id is the op's name and a hash of this module's call code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from . import internals
from .choice_state import PluginChoiceState
from .plugin_state import report_error
from .vllm_gemm_rewrite import MARKER

BACKEND = "vllm"
UNQUANTIZED = "vllm::rocm_unquantized_gemm"
_SELECTIONS = {"mm", "addmm"}  # what a rewritten unquantized GEMM is lowered as
_CHOICE_NAME = "inductor_flydsl_vllm_rocm_unquantized_gemm"


def _unquantized_op() -> Any:
    return torch.ops.vllm.rocm_unquantized_gemm.default


def _operands(values: Sequence[Any]) -> tuple[Any, Any, Any]:
    """(bias, x, weight_t) of a selection's inputs: ``addmm``'s (bias expanded to the
    output's shape, x, weight.t()) or ``mm``'s (x, weight.t())."""
    return (values[0], values[1], values[2]) if len(values) == 3 else \
        (None, values[0], values[1])


def call_unquantized(*inputs: torch.Tensor) -> torch.Tensor:
    """What Inductor benchmarks: vLLM's op on the selection's inputs."""
    bias, x, weight_t = _operands(inputs)
    if bias is not None:  # the expanded row vector: its first row is the bias itself
        if bias.dim() == 2 and bias.stride(0) != 0:
            raise ValueError("the bias of a rewritten vLLM GEMM is a broadcast row")
        bias = bias[0] if bias.dim() == 2 else bias
    return _unquantized_op()(x, weight_t.t(), bias)


def _boxed(node: Any) -> Any:
    """An IR input of the selection as the ``TensorBox`` Inductor's view lowerings take."""
    if isinstance(node, internals.TensorBox):
        return node
    if isinstance(node, internals.BaseView):
        return internals.TensorBox(node)
    return internals.TensorBox.create(node)


def _unquantized_node(*nodes: Any) -> Any:
    """What the selection lowers to when vLLM's op wins: its fallback kernel over views
    of the selection's buffers (the weight un-transposed, the bias's first row). Should
    that fail, ATen's fallback kernel of the same GEMM: never a failed compile."""
    bias, x, weight_t = _operands(nodes)
    lower = internals.lowerings
    try:
        weight = lower[torch.ops.aten.permute.default](_boxed(weight_t), [1, 0])
        row = lower[torch.ops.aten.select.int](_boxed(bias), 0, 0) if bias is not None \
            else None
        return internals.FallbackKernel.create(_unquantized_op(), x, weight, row)
    except Exception as exc:
        report_error("lowering vLLM's op as the selected choice", exc)
    if bias is None:
        return internals.FallbackKernel.create(torch.ops.aten.mm.default, x, weight_t)
    return internals.FallbackKernel.create(torch.ops.aten.addmm.default, bias, x, weight_t)


def _unquantized_choice() -> Any:
    found = internals.ExternKernelChoice.lookup(_CHOICE_NAME)
    if found is not None:
        return found
    return internals.ExternKernelChoice(call_unquantized, name=_CHOICE_NAME,
                                        has_out_variant=False,
                                        kernel_creator=_unquantized_node)


class VllmOpCaller(internals.ExternKernelCaller):
    """vLLM's op as one choice; its plugin state names the backend ``vllm``."""

    def __init__(self, op: str, choice: Any, input_nodes: Sequence[Any], layout: Any) -> None:
        super().__init__(choice, input_nodes, layout, {}, has_out_variant=False)
        self.name = op.replace("::", "_")
        self.inductor_flydsl = PluginChoiceState(backend=BACKEND, config={"op": op})

    def info_dict(self) -> dict[str, Any]:
        return {"backend": BACKEND, "op": self.inductor_flydsl.config["op"]}


def marked_op() -> str | None:
    """The vLLM op the FX node being lowered came from (``vllm_gemm_rewrite.MARKER``)."""
    graph = internals.V.graph
    node = getattr(graph, "current_node", None)
    meta = getattr(node, "meta", None)
    return meta.get(MARKER) if isinstance(meta, dict) else None


class VllmOpChoiceProvider:
    """A ``ChoiceProvider`` (``choice_provider.py``): vLLM's op, in the selection of a GEMM
    node rewritten from it."""

    def __call__(self, name: str, input_nodes: Sequence[Any], layout: Any,
                 choices: Sequence[Any]) -> list[Any]:
        if name not in _SELECTIONS or marked_op() != UNQUANTIZED:
            return []
        return [VllmOpCaller(UNQUANTIZED, _unquantized_choice(), input_nodes, layout)]

    def fuses_epilogues(self, device: Any) -> bool:
        return False

    def captures_graphs(self, device: Any) -> bool:
        """vLLM's ops run inside the HIP graphs vLLM captures: a selection holding one is
        graph-timed when the compile captures graphs (only the marked selections ask)."""
        return getattr(device, "type", None) == "cuda" and marked_op() is not None
