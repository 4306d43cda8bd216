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

Left as vLLM dispatches it (and why):
- a symbolic token count (vLLM's general shape): vLLM's op branches on M at run time, a
  compiled selection would freeze one choice for every M;
- a compile that does not autotune GEMMs (``max_autotune`` and ``max_autotune_gemm``
  off): Inductor would lower the ``mm`` to ATen alone, replacing vLLM's dispatch untimed;
- operands whose dtypes differ, a weight that is not 2-D, a bias that is not 1-D, an
  activation of more than two dimensions that is not contiguous.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

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
        return ["a symbolic shape (vLLM's general shape): vLLM's op dispatches on M"]
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


LOWERED_OPS = {op.name: op for op in (
    LoweredOp("vllm::rocm_unquantized_gemm", _rewrite_unquantized),
)}


def op_name(node: torch.fx.Node) -> str:
    """``namespace::name`` of a call_function node's op overload ('' for other nodes)."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    return str(schema.name) if schema is not None else ""


@dataclass
class RewriteReport:
    rewritten: dict[str, int]
    left: dict[str, list[str]]  # op -> why each node left was left


def rewrite_vllm_gemms(graph: torch.fx.Graph, *, autotunes_gemms: bool) -> RewriteReport:
    """Rewrite every static vLLM GEMM op node of ``graph`` into Inductor's ATen GEMM
    (module docstring). ``autotunes_gemms``: the compile autotunes GEMMs (max-autotune);
    without it nothing is rewritten."""
    report = RewriteReport({}, {})
    for node in [n for n in graph.nodes if op_name(n) in LOWERED_OPS]:
        name = op_name(node)
        why = LOWERED_OPS[name].rewrite(graph, node) if autotunes_gemms else \
            "the compile does not autotune GEMMs (max_autotune off)"
        if why is None:
            report.rewritten[name] = report.rewritten.get(name, 0) + 1
        else:
            report.left.setdefault(name, []).append(why)
            log.debug("inductor_flydsl: %s left to vLLM: %s", node.name, why)
    return report
