"""Compile a small MLP with torch.compile in this process and report what happened, as JSON.

Used by scripts/bench_compile.py and the end-to-end tests, always in a fresh process:

    python scripts/compile_model.py --mode max-autotune --plugin --db /tmp/t.db --out y.pt

Prints one JSON line: compile_s (compile plus first call), the plugin's stats, Inductor's
autotune and FX-graph-cache counters, and where the output tensor was saved.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import torch


def build_model(dims: list[int], seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i, (d_in, d_out) in enumerate(itertools.pairwise(dims)):
        layers.append(torch.nn.Linear(d_in, d_out))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).eval()


class LlamaBlock(torch.nn.Module):
    """One Llama-style decoder block: RMSNorm, causal self-attention (q/k/v/o
    projections, rotary embedding, SDPA), RMSNorm and a SwiGLU MLP (gate, up, down):
    seven GEMMs, on (batch, seq, hidden) activations."""

    def __init__(self, hidden: int = 256, heads: int = 4, ffn: int = 512) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(hidden, hidden, bias=False)
                                          for _ in range(4))
        self.gate = torch.nn.Linear(hidden, ffn, bias=False)
        self.up = torch.nn.Linear(hidden, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, hidden, bias=False)
        self.norm1 = torch.nn.RMSNorm(hidden)
        self.norm2 = torch.nn.RMSNorm(hidden)

    def _rotary(self, x: torch.Tensor) -> torch.Tensor:
        seq, half = x.shape[-2], self.head_dim // 2
        freqs = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
        angles = torch.arange(seq, dtype=torch.float32)[:, None] * freqs[None, :]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        y = self.norm1(x)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q(y)), heads(self.k(y)), heads(self.v(y))
        q, k = self._rotary(q), self._rotary(k)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, h))
        y = self.norm2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(y)) * self.up(y))


def _inputs(args: argparse.Namespace, model: torch.nn.Module, size: str,
            dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, ...]:
    """One input of ``size``: a batch (mlp) or BATCHxSEQ (llama-block)."""
    gen = torch.Generator().manual_seed(seed)
    if args.model == "llama-block":
        batch, seq = (int(v) for v in size.split("x"))
        x = torch.randn(batch, seq, model.q.in_features, generator=gen)
    else:
        x = torch.randn(int(size), model[0].in_features, generator=gen)
    return (x.to(args.device, dtype),)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", default="max-autotune",
                        help="torch.compile mode, or 'default'")
    parser.add_argument("--plugin", action="store_true", help="enable inductor_flydsl")
    parser.add_argument("--db", default=None, help="tuning DB path (plugin default if unset)")
    parser.add_argument("--db-mode", default=None, help="readwrite, readonly or off")
    parser.add_argument("--dims", default="256,512,384,192,64",
                        help="layer widths; each Linear is a GEMM of distinct shape")
    parser.add_argument("--batch", default="32", help="first call's batch (BATCHxSEQ for "
                        "llama-block)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--freezing", type=int, default=1,
                        help="Inductor freezing (CPU autotunes only frozen-weight GEMMs)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (ROCm GPUs are cuda)")
    parser.add_argument("--backends", default=None,
                        help="max_autotune_gemm_backends, e.g. ATEN,TRITON or ATEN,TRITON,FLYDSL")
    parser.add_argument("--out", default=None, help="save the output tensor here")
    parser.add_argument("--model", default="mlp", choices=["mlp", "gemm-suite", "llama-block"],
                        help="mlp (--dims, --batch, --dtype), llama-block (one decoder "
                        "block; --batch is BATCHxSEQ) or gemm-suite: every CPU GEMM "
                        "lowering the plugin records (scripts/gemm_suite.py; needs torchao)")
    parser.add_argument("--dynamic", action="store_true",
                        help="dynamic shapes: mlp compiles with dynamic=True; llama-block "
                        "marks its batch and sequence dims dynamic")
    parser.add_argument("--also", default="",
                        help="comma list of further input sizes to run after the first call "
                        "(batches, or BATCHxSEQ); each output is compared with eager")
    parser.add_argument("--no-inductor-caches", action="store_true",
                        help="Inductor's FX graph, AOTAutograd and autotune-timing caches "
                        "off; its code cache (builds, keyed by their source) stays: with a "
                        "TORCHINDUCTOR_CACHE_DIR shared by several processes each still "
                        "lowers and benchmarks everything itself and reuses only the builds")
    parser.add_argument("--offer-flydsl", default=None, metavar="ARCH",
                        help="benchmarks on a machine without that GPU: replace the FlyDSL "
                        "provider's runtime check so its candidates for ARCH (gfx950) are "
                        "offered; they are built and refused at launch (recorded failed), "
                        "as in the CPU integration tests")
    args = parser.parse_args()

    if args.offer_flydsl:
        from inductor_flydsl.flydsl_backend.autotune import provider

        provider.runtime_target = lambda device, arch=args.offer_flydsl: (arch, [])

    import torch._inductor.config as inductor_config

    inductor_config.freezing = bool(args.freezing)
    if args.no_inductor_caches:
        import torch._functorch.config as functorch_config

        inductor_config.fx_graph_cache = False
        inductor_config.autotune_local_cache = False  # read no timings another one wrote
        functorch_config.enable_autograd_cache = False
    if args.backends:
        inductor_config.max_autotune_gemm_backends = args.backends
    if args.plugin:
        import inductor_flydsl

        inductor_flydsl.enable(args.db, args.db_mode)
    dtype = getattr(torch, args.dtype)
    if args.model == "gemm-suite":
        from gemm_suite import build_gemm_suite  # beside this script

        model, inputs = build_gemm_suite()
    elif args.model == "llama-block":
        torch.manual_seed(0)
        model = LlamaBlock().to(args.device, dtype).eval()
        inputs = _inputs(args, model, args.batch, dtype)
    else:
        model = build_model([int(d) for d in args.dims.split(",")], seed=0).to(args.device,
                                                                             dtype)
        inputs = _inputs(args, model, args.batch, dtype)
    mode = None if args.mode == "default" else args.mode
    dynamic = None
    if args.dynamic and args.model == "llama-block":
        torch._dynamo.mark_dynamic(inputs[0], 0)  # batch
        torch._dynamo.mark_dynamic(inputs[0], 1)  # sequence
    elif args.dynamic:
        dynamic = True
    start = time.perf_counter()
    with torch.no_grad():
        compiled = torch.compile(model, mode=mode, dynamic=dynamic)
        y = compiled(*inputs)
    compile_s = time.perf_counter() - start
    also = []
    with torch.no_grad():
        for i, size in enumerate(s for s in args.also.split(",") if s):
            x = _inputs(args, model, size, dtype, seed=2 + i)
            got, want = compiled(*x), model(*x)
            tol = 2e-2 if dtype != torch.float32 else 1e-4
            also.append({"size": size, "max_abs_err": float((got - want).abs().max()),
                         "match": bool(torch.allclose(got, want, rtol=tol, atol=tol))})
    if args.out:
        torch.save(y.cpu(), args.out)
    from torch._dynamo.utils import counters

    report = {
        "compile_s": compile_s,
        "also": also,
        "frame_compiles": counters["stats"]["unique_graphs"],
        "autotune_runs": counters["inductor"]["select_algorithm_autotune"],
        "fxgraph_cache_hit": counters["inductor"]["fxgraph_cache_hit"],
        "fxgraph_cache_miss": counters["inductor"]["fxgraph_cache_miss"],
        "pid": os.getpid(),
    }
    if args.plugin:
        import inductor_flydsl

        report["stats"] = inductor_flydsl.stats()
    print("RESULT " + json.dumps(report))


if __name__ == "__main__":
    main()
