"""The plugin's stand-in node for a vLLM GEMM op whose selection the plugin lowers itself.

``vllm::rocm_mxfp8_block32_gemm`` has no ATen op that computes it (a 32x32 block-scaled
weight), so ``vllm_gemm_rewrite.py`` cannot turn it into an Inductor GEMM the way it
turns ``rocm_unquantized_gemm`` into ``addmm``/``mm``. It replaces each static node with
``inductor_flydsl::vllm_mxfp8_block32_gemm`` (the same arguments), whose lowering
(``vllm_choices.lower_mxfp8_block32``, installed while the plugin is on) makes the
selection. The op exists only between the plugin's post-grad pass and Inductor's
lowering of that graph; called eagerly it calls vLLM's op (vLLM imported).
"""

from __future__ import annotations

import torch

LIBRARY = "inductor_flydsl"
MXFP8_BLOCK32 = "vllm_mxfp8_block32_gemm"
_SCHEMA = (f"{MXFP8_BLOCK32}(Tensor x, Tensor x_scale, Tensor weight, Tensor weight_scale, "
           "ScalarType out_dtype) -> Tensor")


def _impl(x: torch.Tensor, x_scale: torch.Tensor, weight: torch.Tensor,
          weight_scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    return torch.ops.vllm.rocm_mxfp8_block32_gemm.default(x, x_scale, weight, weight_scale,
                                                          out_dtype)


def _fake(x: torch.Tensor, x_scale: torch.Tensor, weight: torch.Tensor,
          weight_scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]), dtype=out_dtype)


def _define() -> torch.library.Library:
    lib = torch.library.Library(LIBRARY, "FRAGMENT")
    lib.define(_SCHEMA)
    lib.impl(MXFP8_BLOCK32, _impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{LIBRARY}::{MXFP8_BLOCK32}", _fake, lib=lib)
    return lib


_LIB = _define()


def mxfp8_block32_op() -> torch._ops.OpOverload:
    return getattr(torch.ops.inductor_flydsl, MXFP8_BLOCK32).default
