"""One process of tests/vllm_client/test_vllm_backend.py: a tiny model compiled by vLLM's
``VllmBackend`` (``@support_torch_compile``, a splitting op, ``compile_sizes`` and the
general dynamic shape, max-autotune) on CPU; prints ``RESULT <json>``.

The plugin is enabled as a vLLM user enables it: ``INDUCTOR_FLYDSL=1`` in the
environment (read at ``import torch``) and the package's ``vllm.general_plugins`` entry
point, which vLLM itself loads (``load_general_plugins``). What ran inside vLLM's compile
is observed from there: every call of vLLM's ``PostGradPassManager`` (one per piece and
compile range Inductor lowered), the compile range vLLM's pass context names, the
post-grad custom passes Inductor's config held during that compile, and every call of the
plugin's pass on the same graph.

Two things the test needs that a CPU vLLM does not do by itself:
- ``CpuPlatform.check_and_update_config`` turns ``VLLM_COMPILE`` into
  ``DYNAMO_TRACE_ONCE`` (plain ``torch.compile``, no ``VllmBackend``); the mode is set
  back to ``VLLM_COMPILE`` after it ran, as on a GPU;
- ``pass_config.fuse_rope_kvcache_cat_mla`` is turned off: its pass class is only
  imported on CUDA/ROCm.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from torch import nn

LIB_NAME = "flydsl_vllm_test"


def _register_splitting_op() -> str:
    """A stand-in for attention: a custom op that writes its output in place (as vLLM's
    attention ops do) and at which vLLM splits the graph into pieces."""
    from vllm.utils.torch_utils import direct_register_custom_op

    lib = torch.library.Library(LIB_NAME, "FRAGMENT")

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  out: torch.Tensor) -> None:
        out.copy_(q * 0.5 + k * 0.25 + v * 0.25)

    def attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       out: torch.Tensor) -> None:
        return None

    direct_register_custom_op("attention", attention, mutates_args=["out"],
                              fake_impl=attention_fake, target_lib=lib)
    _register_splitting_op.lib = lib  # type: ignore[attr-defined]  (kept alive)
    return f"{LIB_NAME}::attention"


def _model_class() -> type:
    from vllm.compilation.decorators import support_torch_compile

    @support_torch_compile(dynamic_arg_dims={"x": 0})
    class TinyModel(nn.Module):
        """Two pieces around the splitting op, each with GEMMs against parameters (vLLM
        passes them in as graph inputs): a bmm (autotuned on CPU: Inductor's C++ bmm
        template against ATen) and linears (one choice on CPU: the weight is no constant)."""

        def __init__(self, *, vllm_config: object, prefix: str = "", **kwargs: object
                     ) -> None:
            super().__init__()
            generator = torch.Generator().manual_seed(0)
            self.heads, self.hidden = 4, 32
            self.bmm_weight = nn.Parameter(torch.randn(
                self.heads, self.hidden // self.heads, self.hidden // self.heads,
                generator=generator) * 0.1)
            self.up = nn.Linear(self.hidden, 2 * self.hidden, bias=True)
            self.down = nn.Linear(2 * self.hidden, self.hidden, bias=False)
            # a bf16 GEMM with a pointwise epilogue: a region the epilogue-fusion pass
            # turns into a fused-epilogue selection where FlyDSL may fuse (--fusion-gate)
            self.proj = nn.Linear(self.hidden, self.hidden, bias=True).to(torch.bfloat16)
            with torch.no_grad():
                for p in (self.up.weight, self.up.bias, self.down.weight,
                          self.proj.weight, self.proj.bias):
                    p.copy_(torch.randn(p.shape, generator=generator) * 0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            tokens = x.shape[0]
            per_head = x.view(tokens, self.heads, -1).transpose(0, 1).contiguous()
            mixed = torch.bmm(per_head, self.bmm_weight).transpose(0, 1).reshape(tokens, -1)
            h = torch.relu(self.up(mixed + x))
            h = self.down(h) + x
            out = torch.empty_like(h)
            torch.ops.flydsl_vllm_test.attention(h, h, h, out)
            out = out + torch.relu(self.proj(out.to(torch.bfloat16)) * 0.5).float()
            return torch.sigmoid(self.up(out)) * 2.0

    return TinyModel


def _vllm_config(splitting_op: str, compile_sizes: list[int]) -> object:
    from vllm.config import CompilationConfig, CompilationMode, VllmConfig
    from vllm.config.compilation import CUDAGraphMode

    compilation = CompilationConfig(
        mode=CompilationMode.VLLM_COMPILE, splitting_ops=[splitting_op],
        compile_sizes=compile_sizes, cudagraph_mode=CUDAGraphMode.NONE,
        pass_config={"fuse_rope_kvcache_cat_mla": False},
        inductor_compile_config={"max_autotune": True})
    config = VllmConfig(compilation_config=compilation)
    # CpuPlatform.check_and_update_config made it DYNAMO_TRACE_ONCE: back to VllmBackend
    config.compilation_config.mode = CompilationMode.VLLM_COMPILE
    return config


def _observe() -> dict[str, list]:
    """Record, from inside vLLM's compile, each run of vLLM's pass manager and of the
    plugin's pass."""
    from torch._inductor import config as inductor_config
    from vllm.compilation.passes import inductor_pass
    from vllm.compilation.passes.inductor_pass import get_pass_context
    from vllm.compilation.passes.pass_manager import PostGradPassManager

    from inductor_flydsl.inductor.fusion import epilogue_lowering
    from inductor_flydsl.inductor.fusion.epilogue_pass import EpilogueFusionPass

    seen: dict[str, list] = {"manager": [], "plugin": [], "selection_inputs": []}
    manager_call = PostGradPassManager.__call__
    plugin_call = EpilogueFusionPass.__call__
    lowered_call = epilogue_lowering._lowered

    def manager(self: object, graph: torch.fx.Graph) -> None:
        configured = inductor_config.post_grad_custom_post_pass
        configured = configured if isinstance(configured, list | tuple) else [configured]
        seen["manager"].append({
            "graph": id(graph), "range": str(get_pass_context().compile_range),
            "post_grad_custom_post_pass": [type(p).__name__ for p in configured],
            "gemms": sum(n.target in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                                      torch.ops.aten.bmm.default) for n in graph.nodes)})
        manager_call(self, graph)

    def plugin(self: object, graph: torch.fx.Graph, is_inference: bool = False) -> None:
        if inductor_pass._pass_context is None:  # not vLLM's compile (the --plain one)
            plugin_call(self, graph, is_inference)
            return
        entry = {"graph": id(graph), "is_inference": is_inference,
                 "range": str(get_pass_context().compile_range),
                 "after_manager": bool(seen["manager"]) and
                 seen["manager"][-1]["graph"] == id(graph)}
        plugin_call(self, graph, is_inference)
        targets = [n.target for n in graph.nodes]
        entry["selections"] = targets.count(torch.ops.inductor_flydsl.gemm_epilogue.default)
        entry["markers"] = targets.count(torch.ops.inductor_flydsl.keep_for_selection.default)
        seen["plugin"].append(entry)

    def lowered(names: list[str]) -> object:
        found = lowered_call(names)
        seen["selection_inputs"].append("found" if found is not None else "missing")
        return found

    PostGradPassManager.__call__ = manager
    EpilogueFusionPass.__call__ = plugin
    epilogue_lowering._lowered = lowered
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="8,5", help="token counts to run")
    parser.add_argument("--compile-sizes", default="8")
    parser.add_argument("--fusion-gate", action="store_true",
                        help="let the epilogue-fusion pass take every GEMM it can fuse, as "
                             "on a device where FlyDSL fuses epilogues (none on CPU)")
    parser.add_argument("--plain", action="store_true",
                        help="then compile the model's bmm with plain torch.compile")
    args = parser.parse_args()

    from vllm.compilation.counter import compilation_counter
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context
    from vllm.plugins import load_general_plugins

    import inductor_flydsl

    load_general_plugins()  # as vLLM's engine and workers do: the entry point registers
    seen = _observe()
    if args.fusion_gate:
        _open_fusion_gate()
    splitting_op = _register_splitting_op()
    config = _vllm_config(splitting_op, [int(s) for s in args.compile_sizes.split(",")])
    with set_current_vllm_config(config):
        model = _model_class()(vllm_config=config, prefix="")
    model.eval()
    outputs = []
    started = time.perf_counter()
    with torch.no_grad():
        for tokens in (int(s) for s in args.sizes.split(",")):
            x = torch.randn(tokens, model.hidden, generator=torch.Generator().manual_seed(tokens))
            with set_forward_context({}, vllm_config=config):
                got = model(x)
            want = model.forward(x)  # support_torch_compile compiles in __call__ only
            outputs.append({"tokens": tokens, "max_abs_err": float((got - want).abs().max())})
    elapsed = time.perf_counter() - started
    stats = inductor_flydsl.stats().as_dict()
    settings = inductor_flydsl.active_settings()
    plain = _plain_compile(model) if args.plain else None
    print("RESULT " + json.dumps({
        "plugin_on": settings is not None, "seen": seen, "outputs": outputs, "plain": plain,
        "compile_s": round(elapsed, 1),
        "counter": {k: getattr(compilation_counter, k) for k in (
            "num_graphs_seen", "num_piecewise_graphs_seen",
            "num_piecewise_capturable_graphs_seen", "num_backend_compilations",
            "num_inductor_compiles", "num_compiled_artifacts_loaded",
            "num_compiled_artifacts_saved")},
        "stats": {k: stats[k] for k in ("hits", "dynamic_hits", "misses", "recorded",
                                        "benchmarked", "errors", "refused",
                                        "epilogue_fusions")},
        "decisions": [d["problem"] for d in stats["decisions"]],
        "vllm_cache_root": os.environ.get("VLLM_CACHE_ROOT")}))


def _open_fusion_gate() -> None:
    """The pass's gate says yes to every GEMM (on CPU no provider fuses epilogues, so it
    says no): each bf16 GEMM + epilogue region becomes a fused-epilogue selection, lowered
    with Inductor's own handling as its one choice (no FlyDSL candidate on CPU)."""
    from inductor_flydsl.inductor.fusion import epilogue_pass

    hooks = epilogue_pass.hooks()
    if hooks is not None:
        epilogue_pass.set_hooks(epilogue_pass.FusionHooks(
            lambda gemm: True, hooks.report, hooks.count))


def _plain_compile(model: nn.Module) -> dict:
    """The model's bmm (the same operands: an activation and the parameter, both graph
    inputs) compiled by plain ``torch.compile(mode="max-autotune")``: what the plugin's
    counters and decisions gained, to show vLLM's records are keyed as a plain compile's."""
    import inductor_flydsl

    before = inductor_flydsl.stats().as_dict()

    def bmm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, w)

    a = torch.randn(model.heads, 8, model.hidden // model.heads)
    w = model.bmm_weight.detach()
    got = torch.compile(bmm, mode="max-autotune", dynamic=False)(a, w)
    after = inductor_flydsl.stats().as_dict()
    return {"gained": {k: after[k] - before[k] for k in ("hits", "misses", "benchmarked")},
            "decisions": [d["problem"] for d in after["decisions"][len(before["decisions"]):]],
            "max_abs_err": float((got - torch.bmm(a, w)).abs().max())}


if __name__ == "__main__":
    main()
