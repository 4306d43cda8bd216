"""FlyDSL GEMMs with their pointwise epilogue fused, decided by benchmarking against
Inductor's own handling of the same GEMM and epilogue.

How it works (only while the plugin is on, ``FLYDSL`` is among the GEMM backends and the
GEMM's device can run FlyDSL kernels; otherwise the graph is left alone):

1. A post-grad graph pass (``config.post_grad_custom_post_pass``, a ``CustomGraphPass``
   chained after a user's) finds each static bf16/fp16 ``mm``/``addmm`` whose result only
   feeds pointwise ops a fused kernel can compute (``epilogue_spec``: add, sub, mul,
   div, neg, exp, erf, tanh, relu, sigmoid, maximum, minimum, dtype conversions; extra
   operands of the output's shape, a vector over N or over M, scalars). The GEMM and the
   largest such region with a single output get one ``inductor_flydsl::gemm_epilogue``
   node right after the region's output, which takes its place for every later use. The
   original ops stay in the graph, untouched; the node names the region's inputs instead
   of using them (a use changes Inductor's realize decisions), and a
   ``keep_for_selection`` marker at the top of the graph keeps their lowered values
   alive until the selection reads them. The region (the exact original ops) is kept in
   a registry under a stable id. Anything else is left as it was.
2. Its lowering (``user_lowerings``, the hook ``register_custom_op_autotuning`` uses) runs
   one selection, ``gemm_epilogue``, among:
   - the region as a subgraph (``SubgraphTemplate``): benchmarked as Inductor compiles it
     with the same max-autotune settings (FlyDSL left out), so its time is Inductor's own
     decision for that GEMM and epilogue: a fused template or the best GEMM plus a
     separate epilogue kernel;
   - FlyDSL candidates with the epilogue fused (added by the plugin's choice provider:
     ``flydsl_backend.autotune.provider``), validated against the float64 reference first.
   The choices read the region's inputs where Inductor has made them buffers with fixed
   layouts, and realized copies of the others. The selection goes through the plugin's
   hooks like any GEMM: recorded with the epilogue in the problem key (``attrs``: its id,
   ops and region), served from the DB later. If the subgraph wins, the result is the
   region's output as Inductor lowered it: the final code is plain Inductor's (the
   copies and the unused selection are dead code it drops). If a FlyDSL kernel wins, the
   original ops are the dead code.
Any failure leaves the region to Inductor unchanged.

The parts, one job each: ``epilogue_regions`` (finding a region), ``epilogue_ops`` (the
graph ops and the region registry), ``epilogue_pass`` (the graph pass), ``epilogue_lowering``
(the selection); this module turns them on and off.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..adapter import internals
from ..vllm.vllm_choices import lower_mxfp8_block32
from ..vllm.vllm_ops import mxfp8_block32_op
from .epilogue_lowering import lower_gemm_epilogue, lower_keep_for_selection
from .epilogue_pass import EpilogueFusionPass, FusionHooks, fuse_epilogues, set_hooks
from .epilogue_regions import find_region

__all__ = ["EpilogueFusionPass", "find_region", "fuse_epilogues", "install_pass",
           "lower_gemm_epilogue", "uninstall_pass"]


def install_pass(gate: Callable[[torch.fx.Node], bool],
                 report: Callable[[str, BaseException], None],
                 count: Callable[[int], None]) -> None:
    """Turn the fusion on: the pass wraps the user's post-grad passes (once), and the
    selection ops get their lowerings."""
    set_hooks(FusionHooks(gate, report, count))
    config = internals.config
    current = config.post_grad_custom_post_pass
    if not isinstance(current, EpilogueFusionPass):
        config.post_grad_custom_post_pass = EpilogueFusionPass(current)
    internals.user_lowerings[torch.ops.inductor_flydsl.gemm_epilogue.default] = lower_gemm_epilogue
    internals.user_lowerings[torch.ops.inductor_flydsl.keep_for_selection.default] = \
        lower_keep_for_selection
    # vLLM's MXFP8 GEMM, as the pass leaves it (vllm_gemm_rewrite.py)
    internals.user_lowerings[mxfp8_block32_op()] = lower_mxfp8_block32


def uninstall_pass() -> None:
    """Turn it off: the user's passes are back as they were (the lowerings stay: a graph
    made while the plugin was on still lowers)."""
    set_hooks(None)
    config = internals.config
    current = config.post_grad_custom_post_pass
    if isinstance(current, EpilogueFusionPass):
        config.post_grad_custom_post_pass = current.inner
