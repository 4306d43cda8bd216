"""One process of tests/vllm_client/test_vllm_rocm_linear.py: vLLM's own linear layers
(``ReplicatedLinear``, ``UnquantizedLinearMethod``) with vLLM's ROCm GEMM dispatch forced,
compiled by ``VllmBackend`` on CPU for ``compile_sizes`` and the general shape; prints
``RESULT <json>``.

What a ROCm build does, forced here:
- ``dispatch_unquantized_gemm()`` returns ``rocm_unquantized_gemm`` on every ROCm build,
  which calls ``torch.ops.vllm.rocm_unquantized_gemm(x, weight, bias)`` on a GPU tensor
  (on a CPU tensor it calls ``F.linear`` instead): the layers here get a dispatch that
  calls the op, as on the GPU;
- the op's own body picks among vLLM's GPU kernels and cannot run on a CPU (it queries
  the GPU's arch and CU count): a CPU body stands in (``F.linear``, the same function),
  registered for the CPU key over vLLM's; it counts its calls, per token count, while the
  model runs (not while Inductor benchmarks).

``--rocm`` runs it on a ROCm GPU as it is (vLLM's ROCm dispatch and its real op body,
bf16, the GPU's own kernels): nothing is forced or stood in.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.vllm_client.vllm_compile_child import (
    _register_splitting_op,
    _vllm_config,
)

CALLS: dict[int, int] = {}
COUNTING = [False]


def _stand_in_body() -> torch.library.Library:
    import vllm.model_executor.layers.utils  # noqa: F401  (registers the op)

    lib = torch.library.Library("vllm", "IMPL")

    def rocm_unquantized_gemm(x: torch.Tensor, weight: torch.Tensor,
                              bias: torch.Tensor | None = None) -> torch.Tensor:
        if COUNTING[0]:
            tokens = x.numel() // x.shape[-1]
            CALLS[tokens] = CALLS.get(tokens, 0) + 1
        return torch.nn.functional.linear(x, weight, bias)

    lib.impl("rocm_unquantized_gemm", rocm_unquantized_gemm, "CPU")
    return lib


def _force_rocm_dispatch() -> None:
    import vllm.model_executor.layers.linear as linear

    def dispatch_unquantized_gemm(linear_backend: str = "auto"):
        def rocm_unquantized_gemm(layer: nn.Module, x: torch.Tensor, weight: torch.Tensor,
                                  bias: torch.Tensor | None = None) -> torch.Tensor:
            return torch.ops.vllm.rocm_unquantized_gemm(x, weight, bias)
        return rocm_unquantized_gemm

    linear.dispatch_unquantized_gemm = dispatch_unquantized_gemm


def _init_distributed(config: object) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with set_current_vllm_config(config):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        initialize_model_parallel(1, 1)


def _model_class(dtype: torch.dtype) -> type:
    from vllm.compilation.decorators import support_torch_compile
    from vllm.model_executor.layers.linear import ReplicatedLinear

    @support_torch_compile(dynamic_arg_dims={"x": 0})
    class TinyRocmModel(nn.Module):
        """Two pieces around the splitting op, four of vLLM's linear layers: qkv (bias),
        o_proj (no bias, a residual add after), up (no bias, relu after), down (bias)."""

        def __init__(self, *, vllm_config: object, prefix: str = "", **kwargs: object
                     ) -> None:
            super().__init__()
            self.hidden = 32

            def linear(i: int, o: int, bias: bool) -> ReplicatedLinear:
                return ReplicatedLinear(i, o, bias=bias, params_dtype=dtype,
                                        return_bias=False)

            self.qkv = linear(32, 96, True)
            self.o_proj = linear(32, 32, False)
            self.up = linear(32, 64, False)
            self.down = linear(64, 32, True)
            generator = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for p in self.parameters():
                    p.copy_(torch.randn(p.shape, generator=generator) * 0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).split(self.hidden, dim=-1)
            attn = torch.empty_like(q)
            torch.ops.flydsl_vllm_test.attention(q, k, v, attn)
            h = self.o_proj(attn) + x
            return self.down(torch.relu(self.up(h))) + h

    return TinyRocmModel


def _observe() -> list[dict]:
    """Per Inductor compile vLLM ran: its compile range and the vLLM op nodes in the graph
    before and after the plugin's pass (seen from inside the pass)."""
    from vllm.compilation.passes.inductor_pass import get_pass_context

    from inductor_flydsl.inductor.fusion.epilogue_pass import EpilogueFusionPass
    from inductor_flydsl.inductor.vllm.vllm_gemm_rewrite import MARKER, op_name

    seen: list[dict] = []
    call = EpilogueFusionPass.__call__

    def count(graph: torch.fx.Graph) -> int:
        return sum(op_name(n) == "vllm::rocm_unquantized_gemm" for n in graph.nodes)

    def plugin(self: object, graph: torch.fx.Graph, is_inference: bool = False) -> None:
        before = count(graph)
        call(self, graph, is_inference)
        seen.append({"range": str(get_pass_context().compile_range), "before": before,
                     "after": count(graph),
                     "marked": sorted(str(n.target) for n in graph.nodes
                                      if MARKER in n.meta)})

    EpilogueFusionPass.__call__ = plugin
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="8,5", help="token counts to run")
    parser.add_argument("--compile-sizes", default="8")
    parser.add_argument("--rocm", action="store_true",
                        help="on a ROCm GPU, vLLM's own dispatch and op body (bf16)")
    args = parser.parse_args()

    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context
    from vllm.plugins import load_general_plugins

    import inductor_flydsl

    load_general_plugins()
    lib = None if args.rocm else _stand_in_body()
    if not args.rocm:
        _force_rocm_dispatch()
    device, dtype = ("cuda", torch.bfloat16) if args.rocm else ("cpu", torch.float32)
    seen = _observe()
    splitting_op = _register_splitting_op()
    config = _vllm_config(splitting_op, [int(s) for s in args.compile_sizes.split(",")])
    _init_distributed(config)
    with set_current_vllm_config(config):
        model = _model_class(dtype)(vllm_config=config, prefix="").to(device)
    model.eval()
    outputs, calls = [], {}
    started = time.perf_counter()
    with torch.no_grad():
        for tokens in (int(s) for s in args.sizes.split(",")):
            x = torch.randn(tokens, model.hidden,
                            generator=torch.Generator().manual_seed(tokens)).to(device, dtype)
            with set_forward_context({}, vllm_config=config):
                model(x)  # the first call compiles; the calls of the second are counted
                CALLS.clear()
                COUNTING[0] = True
                got = model(x)
                COUNTING[0] = False
            calls[tokens] = CALLS.get(tokens, 0)
            want = model.forward(x)  # eager: support_torch_compile compiles in __call__
            outputs.append({"tokens": tokens,
                            "max_abs_err": float((got - want).float().abs().max())})
    elapsed = time.perf_counter() - started
    stats = inductor_flydsl.stats().as_dict()
    print("RESULT " + json.dumps({
        "plugin_on": inductor_flydsl.active_settings() is not None, "seen": seen,
        "outputs": outputs, "vllm_op_calls": calls, "compile_s": round(elapsed, 1),
        "stats": {k: stats[k] for k in ("hits", "misses", "recorded", "benchmarked",
                                        "errors", "refused")},
        "decisions": [{"problem": d["problem"], "backend": d["backend"]}
                      for d in stats["decisions"]],
        "vllm_cache_root": os.environ.get("VLLM_CACHE_ROOT")}))
    del lib


if __name__ == "__main__":
    main()
