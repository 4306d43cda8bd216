"""Child process of the epilogue agreement tests (epilogue_agreement.py): compiles GEMMs
with pointwise epilogues through real ``torch.compile(mode="max-autotune")`` with
freezing, plugin off or on, and prints per case the kernels of the generated code,
Inductor's counters and the outputs.

``--prefer template`` makes every extern choice look 1e6 times slower in Inductor's
``lookup`` (as PyTorch's own CPU select-algorithm tests do), so the C++ GEMM template wins
with its epilogue fused; ``--prefer extern`` does the reverse, so the extern kernel wins
with a separate epilogue kernel. Either way Inductor's decision does not depend on timing
noise, so plugin off, on with a fresh DB and on with that DB warm must agree exactly.

    python tests/core/epilogue_cases.py --prefer template --out DIR [--plugin --db PATH]
        [--device cuda --cases linear_relu,bmm_div]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest.mock import patch

import torch
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters
from torch._inductor import select_algorithm
from torch._inductor.utils import run_and_get_code

# Counters Inductor keeps about the kernels it generated; compared across plugin modes.
# ``select_algorithm_autotune`` counts benchmarking itself (a warm DB skips it by design).
KERNEL_COUNTERS = ("cpp_templated_kernel_counter", "cpp_epilogue_fusion_counter",
                   "cpp_micro_gemm_amx_counter", "cpp_micro_brgemm_counter",
                   "decompose_mm", "decompose_addmm", "pattern_matcher_count",
                   "woq_matcher_count", "qlinear_weight_prepack_matcher_count")
AUTOTUNE_COUNTER = "select_algorithm_autotune"


def _slower(kind: str) -> Callable[..., dict]:
    """A ``lookup`` that benchmarks as Inductor's does, then makes one kind of choice
    1e6 times slower (the way upstream's tests steer the decision)."""
    def lookup(self, choices, name, key, benchmark, hint_override=None):
        if benchmark is None:
            return {}
        timings = benchmark(choices)
        for choice in list(timings):
            extern = isinstance(choice, select_algorithm.ExternKernelCaller)
            if extern == (kind == "extern"):
                timings[choice] = timings[choice] * 1e6
        return timings

    return lookup


class Linear(torch.nn.Module):
    def __init__(self, k: int, n: int, epilogue: Callable[..., torch.Tensor],
                 bias: bool = True) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(k, n, bias)
        self.epilogue = epilogue

    def forward(self, x: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
        return self.epilogue(self.linear(x), *others)


class Bmm(torch.nn.Module):
    def __init__(self, epilogue: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.epilogue = epilogue

    def forward(self, x: torch.Tensor, y: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
        return self.epilogue(torch.bmm(x, y), *others)


class WeightOnlyInt8(torch.nn.Module):
    """``linear(x, int8 weight -> x.dtype) * per-channel scales``: Inductor lowers it to
    ``_weight_int8pack_mm`` (ATen) against its C++ template."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.weight = torch.randint(-128, 127, (n, k), dtype=torch.int8)
        self.scales = torch.rand(n) + 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight.to(x.dtype)) * self.scales


def _case(name: str) -> tuple[torch.nn.Module, list[list[torch.Tensor]], dict]:
    """The module, its input lists (more than one: calls at other sizes) and how to
    compile it. Fixed seeds: every process builds the same weights and inputs."""
    torch.manual_seed(sum(map(ord, name)))
    x = torch.randn(384, 196)
    other = torch.randn(384, 384)
    if name == "linear_relu":
        return Linear(196, 384, lambda y: torch.relu(y)).eval(), [[x]], {}
    if name == "linear_gelu":  # the same GEMM as linear_relu: served within a fresh run
        return Linear(196, 384, torch.nn.functional.gelu).eval(), [[x]], {}
    if name == "linear_add":
        return Linear(196, 384, lambda y, o: y + o, bias=False).eval(), [[x, other]], {}
    if name == "linear_relu_add":  # unary then binary
        return Linear(196, 384, lambda y, o: torch.relu(y) + o).eval(), [[x, other]], {}
    if name == "linear_silu_bf16":
        mod = Linear(64, 128, torch.nn.functional.silu).to(torch.bfloat16).eval()
        return mod, [[torch.randn(32, 64, dtype=torch.bfloat16)]], {}
    if name == "bmm_div":
        a, b, o = torch.randn(4, 32, 64), torch.randn(4, 64, 48), torch.randn(4, 32, 48)
        return Bmm(lambda y, d: y / d).eval(), [[a, b, o]], {}
    if name == "bmm_mul_add":  # several epilogue ops fused into one kernel
        a, b, o = torch.randn(4, 32, 64), torch.randn(4, 64, 48), torch.randn(4, 32, 48)
        return Bmm(lambda y, d: torch.relu(y * 0.5 + d)).eval(), [[a, b, o]], {}
    if name == "woq_int8":
        return WeightOnlyInt8(128, 96).eval(), [[torch.randn(48, 128)]], {}
    if name == "linear_dynamic":  # batch marked dynamic; a second call at another size
        mod = Linear(64, 96, lambda y: torch.relu(y)).eval()
        return mod, [[torch.randn(40, 64)], [torch.randn(72, 64)]], {"dynamic": 0}
    raise ValueError(f"unknown case {name}")


CASES = ("linear_relu", "linear_gelu", "linear_add", "linear_relu_add", "linear_silu_bf16",
         "bmm_div", "bmm_mul_add", "woq_int8", "linear_dynamic")


def kernels_of(code: str) -> list[str]:
    """The kernels the generated wrapper code defines and the extern ops it calls, in
    order: what "the same final code" is compared on."""
    names = re.findall(r"^(\w+) = async_compile\.\w+\(", code, re.M)
    calls = re.findall(r"(?:extern_kernels\.\w+|torch\.ops\.\w+\.\w+)(?:\.\w+)?\(", code)
    return names + [c.rstrip("(") for c in calls]


@contextlib.contextmanager
def _settings(prefer: str, device: str) -> Iterator[None]:
    backends = "CPP,ATEN" if device == "cpu" else "TRITON,ATEN"
    with (torch.no_grad(),
          inductor_config.patch(freezing=True, max_autotune=True, epilogue_fusion=True,
                                max_autotune_gemm_backends=backends),
          patch.object(select_algorithm.AlgorithmSelectorCache, "lookup",
                       _slower("extern" if prefer == "template" else "template"))):
        yield


def run_case(name: str, prefer: str, out: Path, device: str = "cpu") -> dict:
    mod, calls, how = _case(name)
    if device != "cpu":  # a GPU: Triton templates against ATen, the same epilogues
        mod = mod.to(device)
        calls = [[a.to(device) for a in args] for args in calls]
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(mod, dynamic=False if "dynamic" not in how else None)
    kernels, outputs = [], []
    with _settings(prefer, device):
        for args in calls:
            if "dynamic" in how:
                torch._dynamo.mark_dynamic(args[0], how["dynamic"])
            y, code = run_and_get_code(compiled, *args)
            kernels.append([k for c in code for k in kernels_of(c)])
            outputs.append(y.cpu())
            expected = mod(*args)
            tol = 2e-2 if y.dtype == torch.bfloat16 else 1e-4 if device == "cpu" else 1e-3
            torch.testing.assert_close(y, expected, atol=tol, rtol=tol)
    torch.save(outputs, out / f"{name}.pt")
    inductor = counters["inductor"]
    return {"kernels": kernels,
            "counters": {k: int(inductor.get(k, 0)) for k in KERNEL_COUNTERS},
            "autotune": int(inductor.get(AUTOTUNE_COUNTER, 0))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefer", choices=("template", "extern"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plugin", action="store_true")
    parser.add_argument("--db")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.plugin:
        import inductor_flydsl

        inductor_flydsl.enable(db_path=args.db)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {}
    for name in args.cases.split(","):
        result[name] = run_case(name, args.prefer, args.out, args.device)
    if args.plugin:
        import inductor_flydsl

        result["stats"] = inductor_flydsl.stats()
    print("RESULT " + json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
