"""vLLM's opaque GEMM ops made visible to Inductor's GEMM autotuning.

On a ROCm build vLLM (0.32) sends every unquantized linear layer through its custom op
``vllm::rocm_unquantized_gemm(x, weight, bias)`` (``model_executor/layers/utils.py``:
``dispatch_unquantized_gemm`` returns ``rocm_unquantized_gemm`` on every ROCm build), an
op with a fake implementation that Inductor lowers as a fallback kernel: no GEMM
selection, so nothing is autotuned, recorded or served. Inside, vLLM's hand-written
rules pick among its skinny kernels, AITER's Triton and tuned GEMMs, and ``F.linear``.

This pass (run by the plugin's post-grad pass, ``epilogue_pass.EpilogueFusionPass``,
while the plugin is on) rewrites each such node whose shapes are static (one of vLLM's
``compile_sizes``) into the ATen GEMM it computes, ``addmm(bias, x, weight.t())`` or
``mm(x, weight.t())``, marked with the op it came from. Inductor then lowers it as any
``addmm``/``mm``: one autotune selection with ATen, Triton and FlyDSL choices, epilogue
fusion, the DB's recording and serving; and the plugin's vLLM choice provider
(``vllm_choices.py``) adds vLLM's own op, called as vLLM calls it, to that selection. So
vLLM's dispatch stays wherever it is fastest, and the DB shows where it is not.

``vllm::rocm_mxfp8_block32_gemm(x, x_scale, weight, weight_scale, out_dtype)`` has no
ATen op to become (its weight scales are per 32x32 block): a static node is replaced by
the plugin's ``inductor_flydsl::vllm_mxfp8_block32_gemm`` (the same arguments, marked),
which ``vllm_choices.lower_mxfp8_block32`` lowers to one ``scaled_mm`` selection with
vLLM's op among its choices and the MX template's block-scaled variant beside it.

Left as vLLM dispatches it (and why):
- a symbolic token count (vLLM's general shape): vLLM's op branches on M at run time, a
  compiled selection would freeze one choice for every M;
- a compile that does not autotune GEMMs (``max_autotune`` and ``max_autotune_gemm``
  off): Inductor would lower the ``mm`` to ATen alone, replacing vLLM's dispatch untimed;
- operands whose dtypes differ, a weight that is not 2-D, a bias that is not 1-D, an
  activation of more than two dimensions that is not contiguous;
- MXFP8: operands other than e4m3, scales that are not (M, K/32) and (ceil(N/32), K/32)
  E8M0 bytes, an output other than bf16/fp16.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...problems.mx_scales import block_scale_rows
from .vllm_ops import mxfp8_block32_op

log = logging.getLogger("inductor_flydsl")

aten = torch.ops.aten
# FX node meta key: the vLLM op a rewritten GEMM node came from ("vllm::<name>")
MARKER = "inductor_flydsl_vllm_op"
GEMM_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# what a rewritten node keeps of the original's meta (provenance for Inductor's logs)
_KEPT_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "seq_nr",
              "original_aten", "from_node")


@dataclass(frozen=True)
class LoweredOp:
    """A vLLM op the pass rewrites: its qualified name and the function that rewrites
    one of its nodes (returns why not, or None once rewritten)."""

    name: str  # "vllm::rocm_unquantized_gemm"
    rewrite: Callable[[torch.fx.Graph, torch.fx.Node], str | None]


SYMBOLIC = "a symbolic shape (vLLM's general shape): vLLM's op dispatches on M"


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _static(val: Any) -> bool:
    # never int() a SymInt: that would guard on it and specialize a dynamic shape
    return isinstance(val, torch.Tensor) and all(type(s) is int for s in val.shape)


def _node(graph: torch.fx.Graph, target: Any, args: tuple, val: Any,
          origin: torch.fx.Node) -> torch.fx.Node:
    new = graph.call_function(target, args)
    new.meta["val"] = val
    for key in _KEPT_META:
        if key in origin.meta:
            new.meta[key] = origin.meta[key]
    return new


def unquantized_reasons(x: Any, weight: Any, bias: Any) -> list[str]:
    """Why a ``rocm_unquantized_gemm(x, weight, bias)`` with these example values is left
    to vLLM (empty: it is rewritten)."""
    reasons = []
    if not _static(x) or not _static(weight) or (bias is not None and not _static(bias)):
        return [SYMBOLIC]
    if weight.dim() != 2 or x.dim() < 2 or x.shape[-1] != weight.shape[1]:
        reasons.append(f"shapes x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        reasons.append(f"bias of shape {tuple(bias.shape)}")
    dtypes = {x.dtype, weight.dtype, *((bias.dtype,) if bias is not None else ())}
    if len(dtypes) != 1 or x.dtype not in GEMM_DTYPES:
        reasons.append(f"dtypes {sorted(str(d) for d in dtypes)}")
    if x.dim() > 2 and not x.is_contiguous():
        reasons.append("a non-contiguous activation of more than two dimensions")
    return reasons


def _rewrite_unquantized(graph: torch.fx.Graph, node: torch.fx.Node) -> str | None:
    args = [*node.args, None, None][:3]
    x, weight, bias = args[0], args[1], node.kwargs.get("bias", args[2])
    xv, wv, bv = _val(x), _val(weight), _val(bias)
    if xv is None or wv is None or (bias is not None and bv is None):
        return "operands without example values"
    reasons = unquantized_reasons(xv, wv, bv)
    if reasons:
        return "; ".join(reasons)
    m, k, n = xv.numel() // xv.shape[-1], wv.shape[1], wv.shape[0]
    # example values first (fake tensors: what the new nodes compute), then the graph
    x2v = xv if xv.dim() == 2 else aten.view.default(xv, [m, k])
    wtv = aten.permute.default(wv, [1, 0])
    outv = aten.addmm.default(bv, x2v, wtv) if bias is not None else \
        aten.mm.default(x2v, wtv)
    with graph.inserting_before(node):
        x2 = x if xv.dim() == 2 else _node(graph, aten.view.default, (x, [m, k]), x2v, node)
        wt = _node(graph, aten.permute.default, (weight, [1, 0]), wtv, node)
        gemm = _node(graph, aten.addmm.default, (bias, x2, wt), outv, node) \
            if bias is not None else _node(graph, aten.mm.default, (x2, wt), outv, node)
        gemm.meta[MARKER] = op_name(node)
        out = gemm if xv.dim() == 2 else _node(
            graph, aten.view.default, (gemm, [*xv.shape[:-1], n]),
            aten.view.default(outv, [*xv.shape[:-1], n]), node)
    node.replace_all_uses_with(out)
    graph.erase_node(node)
    return None


E8M0_DTYPES = (torch.uint8, torch.float8_e8m0fnu)  # vLLM passes E8M0 scales as uint8
MX_OUT_DTYPES = (torch.bfloat16, torch.float16)


def mxfp8_reasons(x: Any, x_scale: Any, weight: Any, weight_scale: Any,
                  out_dtype: Any) -> list[str]:
    """Why a ``rocm_mxfp8_block32_gemm`` with these example values is left to vLLM."""
    if not all(_static(t) for t in (x, x_scale, weight, weight_scale)):
        return [SYMBOLIC]
    reasons = []
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        return [f"shapes x {tuple(x.shape)}, weight {tuple(weight.shape)}"]
    if {x.dtype, weight.dtype} != {torch.float8_e4m3fn}:
        reasons.append(f"operands {x.dtype}, {weight.dtype}: not e4m3")
    (m, k), n = x.shape, weight.shape[0]
    if k % 32:
        reasons.append(f"K={k} is not a multiple of 32")
    for name, scale, rows in (("x_scale", x_scale, m),
                              ("weight_scale", weight_scale, block_scale_rows(n))):
        if scale.dtype not in E8M0_DTYPES or tuple(scale.shape) != (rows, k // 32):
            reasons.append(f"{name} is {scale.dtype} {tuple(scale.shape)}, not E8M0 bytes "
                           f"({rows}, {k // 32})")
    if out_dtype not in MX_OUT_DTYPES:
        reasons.append(f"output dtype {out_dtype}")
    if m == 0:
        reasons.append("no tokens (M = 0)")
    return reasons


def _rewrite_mxfp8(graph: torch.fx.Graph, node: torch.fx.Node) -> str | None:
    args = [*node.args, *[None] * 5][:5]
    names = ("x", "x_scale", "weight", "weight_scale", "out_dtype")
    args = [node.kwargs.get(name, arg) for name, arg in zip(names, args, strict=True)]
    values = [_val(a) for a in args[:4]]
    if any(v is None for v in values):
        return "operands without example values"
    reasons = mxfp8_reasons(*values, args[4])
    if reasons:
        return "; ".join(reasons)
    with graph.inserting_before(node):
        new = _node(graph, mxfp8_block32_op(), tuple(args), node.meta.get("val"), node)
        new.meta[MARKER] = op_name(node)
    node.replace_all_uses_with(new)
    graph.erase_node(node)
    return None


LOWERED_OPS = {op.name: op for op in (
    LoweredOp("vllm::rocm_unquantized_gemm", _rewrite_unquantized),
    LoweredOp("vllm::rocm_mxfp8_block32_gemm", _rewrite_mxfp8),
)}


def op_name(node: torch.fx.Node) -> str:
    """``namespace::name`` of a call_function node's op overload ('' for other nodes)."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    return str(schema.name) if schema is not None else ""


def rewrite_vllm_gemms(graph: torch.fx.Graph, *, autotunes_gemms: bool) -> int:
    """Rewrite every static vLLM GEMM op node of ``graph`` into Inductor's ATen GEMM
    (module docstring). ``autotunes_gemms``: the compile autotunes GEMMs (max-autotune);
    without it nothing is rewritten. Returns how many nodes were rewritten; why each
    other one was left goes to the debug log."""
    rewritten = 0
    for node in [n for n in graph.nodes if op_name(n) in LOWERED_OPS]:
        why = LOWERED_OPS[op_name(node)].rewrite(graph, node) if autotunes_gemms else \
            "the compile does not autotune GEMMs (max_autotune off)"
        if why is None:
            rewritten += 1
        else:
            log.debug("inductor_flydsl: %s left to vLLM: %s", node.name, why)
    return rewritten
