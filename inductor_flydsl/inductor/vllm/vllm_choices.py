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

``vllm::rocm_mxfp8_block32_gemm(x, x_scale, weight, weight_scale, out_dtype)`` (e4m3
operands, E8M0 scales per row and 32 K for ``x``, per 32x32 block for the weight) has no
ATen op to become: the rewrite leaves the plugin's stand-in node
(``vllm_ops.MXFP8_BLOCK32``), and :func:`lower_mxfp8_block32` makes the selection itself,
named ``scaled_mm`` as torch's MX GEMM is, over ``[x, weight.t(), x_scale, weight_scale]``
(the scales viewed as ``float8_e8m0fnu``, a free reinterpretation of vLLM's uint8 bytes):
vLLM's op as one choice, and the FlyDSL MX template's 32x32-block variant where the
provider offers it (gfx950). With a single choice nothing is benchmarked or recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..adapter import internals
from ..adapter.choice_state import PluginChoiceState
from ..adapter.plugin_state import report_error
from .vllm_gemm_rewrite import MARKER

BACKEND = "vllm"
UNQUANTIZED = "vllm::rocm_unquantized_gemm"
MXFP8 = "vllm::rocm_mxfp8_block32_gemm"
MX_SELECTION = "scaled_mm"  # torch's MX GEMM's selection name: the MX template serves it
_SELECTIONS = {"mm", "addmm"}  # what a rewritten unquantized GEMM is lowered as
_CHOICE_NAME = "inductor_flydsl_vllm_rocm_unquantized_gemm"
_MXFP8_CHOICE = "inductor_flydsl_vllm_rocm_mxfp8_block32_gemm"


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


def _extern_choice(name: str, call: Any, lowered: Any) -> Any:
    """The process's extern choice ``name`` (Inductor keeps one per name): ``call`` is
    benchmarked, ``lowered`` makes the IR node when it wins."""
    found = internals.ExternKernelChoice.lookup(name)
    if found is not None:
        return found
    return internals.ExternKernelChoice(call, name=name, has_out_variant=False,
                                        kernel_creator=lowered)


def _mxfp8_op() -> Any:
    return torch.ops.vllm.rocm_mxfp8_block32_gemm.default


def call_mxfp8(x: torch.Tensor, weight_t: torch.Tensor, x_scale: torch.Tensor,
               weight_scale: torch.Tensor, *, out_dtype: torch.dtype) -> torch.Tensor:
    """What Inductor benchmarks: vLLM's MXFP8 op on the selection's inputs."""
    return _mxfp8_op()(x, x_scale.view(torch.uint8), weight_t.t(),
                       weight_scale.view(torch.uint8), out_dtype)


def _mxfp8_node(x: Any, weight_t: Any, x_scale: Any, weight_scale: Any, *,
                out_dtype: torch.dtype) -> Any:
    """vLLM's MXFP8 op as the selected choice: its fallback kernel over views of the
    selection's buffers (the weight un-transposed, the scales as vLLM's uint8 bytes)."""
    lower = internals.lowerings
    weight = lower[torch.ops.aten.permute.default](_boxed(weight_t), [1, 0])
    scales = [lower[torch.ops.aten.view.dtype](_boxed(s), torch.uint8)
              for s in (x_scale, weight_scale)]
    return internals.FallbackKernel.create(_mxfp8_op(), x, scales[0], weight, scales[1],
                                           out_dtype)


def lower_mxfp8_block32(x: Any, x_scale: Any, weight: Any, weight_scale: Any,
                        out_dtype: torch.dtype) -> Any:
    """The lowering of ``inductor_flydsl::vllm_mxfp8_block32_gemm``: one ``scaled_mm``
    selection (module docstring). Anything failing here lowers vLLM's op as Inductor
    would have (a fallback kernel): never a failed compile."""
    try:
        for value in (x, x_scale, weight, weight_scale):  # buffers first: the views below
            value.realize()                                # then reinterpret them, no copy
        lower = internals.lowerings
        weight_t = lower[torch.ops.aten.permute.default](weight, [1, 0])
        scales = [lower[torch.ops.aten.view.dtype](s, torch.float8_e8m0fnu)
                  for s in (x_scale, weight_scale)]
        inputs = list(internals.realize_inputs(x, weight_t, *scales))
        m, n = x.get_size()[0], weight.get_size()[0]
        layout = internals.FixedLayout(x.get_device(), out_dtype, [m, n])
        choice = VllmOpCaller(MXFP8, _extern_choice(_MXFP8_CHOICE, call_mxfp8, _mxfp8_node),
                              inputs, layout, {"out_dtype": out_dtype})
        node, _ = internals.autotune_select_algorithm(MX_SELECTION, [choice], inputs, layout,
                                                      return_multi_template=False)
        return node
    except Exception as exc:
        report_error("lowering vLLM's MXFP8 GEMM as a selection", exc)
    return internals.TensorBox.create(internals.FallbackKernel.create(
        _mxfp8_op(), x, x_scale, weight, weight_scale, out_dtype))


class VllmOpCaller(internals.ExternKernelCaller):
    """vLLM's op as one choice; its plugin state names the backend ``vllm``. Its kwargs
    (``out_dtype``) are the op's own arguments, keyed as an ATen choice's are."""

    def __init__(self, op: str, choice: Any, input_nodes: Sequence[Any], layout: Any,
                 kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(choice, input_nodes, layout, dict(kwargs or {}),
                         has_out_variant=False)
        self.name = op.replace("::", "_")
        self.inductor_flydsl = PluginChoiceState(backend=BACKEND, config={"op": op},
                                                 keyed_kwargs=True)

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
        choice = _extern_choice(_CHOICE_NAME, call_unquantized, _unquantized_node)
        return [VllmOpCaller(UNQUANTIZED, choice, input_nodes, layout)]

    def fuses_epilogues(self, device: Any) -> bool:
        return False

    def captures_graphs(self, device: Any) -> bool:
        """vLLM's ops run inside the HIP graphs vLLM captures: a selection holding one is
        graph-timed when the compile captures graphs (only the marked selections ask)."""
        return getattr(device, "type", None) == "cuda" and marked_op() is not None
