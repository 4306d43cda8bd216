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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", default="max-autotune",
                        help="torch.compile mode, or 'default'")
    parser.add_argument("--plugin", action="store_true", help="enable inductor_flydsl")
    parser.add_argument("--db", default=None, help="tuning DB path (plugin default if unset)")
    parser.add_argument("--db-mode", default=None, help="readwrite, readonly or off")
    parser.add_argument("--dims", default="256,512,384,192,64",
                        help="layer widths; each Linear is a GEMM of distinct shape")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--freezing", type=int, default=1,
                        help="Inductor freezing (CPU autotunes only frozen-weight GEMMs)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (ROCm GPUs are cuda)")
    parser.add_argument("--backends", default=None,
                        help="max_autotune_gemm_backends, e.g. ATEN,TRITON or ATEN,TRITON,FLYDSL")
    parser.add_argument("--out", default=None, help="save the output tensor here")
    parser.add_argument("--model", default="mlp", choices=["mlp", "gemm-suite"],
                        help="mlp (--dims, --batch, --dtype) or gemm-suite: every CPU GEMM "
                        "lowering the plugin records (scripts/gemm_suite.py; needs torchao)")
    args = parser.parse_args()

    import torch._inductor.config as inductor_config

    inductor_config.freezing = bool(args.freezing)
    if args.backends:
        inductor_config.max_autotune_gemm_backends = args.backends
    if args.plugin:
        import inductor_flydsl

        inductor_flydsl.enable(args.db, args.db_mode)
    dtype = getattr(torch, args.dtype)
    if args.model == "gemm-suite":
        from gemm_suite import build_gemm_suite  # beside this script

        model, inputs = build_gemm_suite()
    else:
        model = build_model([int(d) for d in args.dims.split(",")], seed=0).to(args.device,
                                                                             dtype)
        x = torch.randn(args.batch, model[0].in_features,
                        generator=torch.Generator().manual_seed(1))
        inputs = (x.to(args.device, dtype),)
    mode = None if args.mode == "default" else args.mode
    start = time.perf_counter()
    with torch.no_grad():
        compiled = torch.compile(model, mode=mode)
        y = compiled(*inputs)
    compile_s = time.perf_counter() - start
    if args.out:
        torch.save(y.cpu(), args.out)
    from torch._dynamo.utils import counters

    report = {
        "compile_s": compile_s,
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
