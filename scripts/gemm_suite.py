"""Models whose compile makes Inductor autotune every kind of CPU GEMM lowering the plugin
records: int8 quantized linear (per-tensor activation scale and zero-point, per-channel
weight scales, post-ops none and relu, a binary add, a uint8 output with its own scale and
zero-point), weight-only int8 and int4 linear, linear with bias, bmm with bias, and a
bf16 linear at a static and at a dynamic batch.

Used by ``scripts/compile_model.py --model gemm-suite`` (tests/core/test_problem_roundtrip.py).
Quantized linears come from PT2E quantization with torchao's X86InductorQuantizer
(torch 2.13 no longer ships ``torch.ao.quantization.quantize_pt2e``), exactly as a user
gets them: export, prepare, calibrate, convert; Inductor's freezing passes then fuse the
quantize/dequantize pattern into ``onednn.qlinear_pointwise`` and lower it to
``qlinear_unary``/``qlinear_binary``.
"""

from __future__ import annotations

import torch

IN, OUT, BATCH = 64, 48, 16


class QuantBody(torch.nn.Module):
    """Four quantized linears of one input; l1 and l2 have the same shape and differ
    only in the post-op (none vs relu), the collision case of the problem key."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(IN, OUT)
        self.l2 = torch.nn.Linear(IN, OUT)
        self.l3 = torch.nn.Linear(IN, OUT)
        self.l4 = torch.nn.Linear(IN, IN)
        self.l5 = torch.nn.Linear(IN, OUT)

    def forward(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        none = self.l1(x)  # qlinear_unary, post-op none, float32 out
        relu = torch.relu(self.l2(x))  # qlinear_unary, post-op relu, float32 out
        added = self.l3(x) + other  # qlinear_binary, binary post-op add
        chained = self.l5(self.l4(x))  # l4: uint8 out (output scale and zero-point)
        return torch.cat([none, relu, added, chained], dim=1)


def _quantize(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> torch.nn.Module:
    """Static PT2E quantization: per-tensor activation scale and zero-point (0-D tensors),
    per-channel weight scales. (Inductor 2.13 lowers a linear to qlinear only with
    per-channel weights; a per-tensor weight stays dequantize + one-choice addmm.)"""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

    quantizer = xiq.X86InductorQuantizer()
    # reduce_range: 7-bit activations, as the quantizer advises for CPUs without VNNI
    # (this project's AVX2 machines); with 8 bits oneDNN's u8s8 kernel saturates there and
    # its qlinear differs from the reference and from Inductor's C++ template by up to 0.7
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config(reduce_range=True))
    exported = torch.export.export(module.eval(), args).module()
    prepared = prepare_pt2e(exported, quantizer)
    prepared(*args)  # calibration
    return convert_pt2e(prepared)


class FloatBody(torch.nn.Module):
    """Linear with bias (mm/addmm on a frozen weight lower to mkldnn ``packed_linear``),
    bmm with a bias, weight-only int8 and int4 linear, and bf16 linears of one shape at a
    static and at a dynamic batch."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(IN, 40)
        self.wb = torch.nn.Parameter(torch.randn(2, IN, 24))
        self.bb = torch.nn.Parameter(torch.randn(2, 1, 24))
        self.register_buffer("w8", torch.randint(-128, 127, (32, IN), dtype=torch.int8))
        self.register_buffer("s8", torch.rand(32) + 0.5)
        w4 = torch.randint(0, 16, (32, IN), dtype=torch.int32)
        self.register_buffer("w4", torch.ops.aten._convert_weight_to_int4pack_for_cpu(w4, 2))
        self.register_buffer("sz4", torch.rand(IN // 32, 32, 2))
        self.bf16 = torch.nn.Linear(IN, 56).to(torch.bfloat16)

    def forward(self, x: torch.Tensor, xd: torch.Tensor) -> torch.Tensor:
        x3 = x.view(2, -1, IN)
        outs = [
            self.linear(x),
            torch.bmm(x3, self.wb) + self.bb,
            torch.ops.aten._weight_int8pack_mm(x, self.w8, self.s8),
            torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.w4, 32, self.sz4),
            self.bf16(x.to(torch.bfloat16)).float(),
        ]
        dynamic = self.bf16(xd.to(torch.bfloat16)).float()  # xd's batch is dynamic
        return torch.cat([o.flatten() for o in outs] + [dynamic.flatten()])


class Suite(torch.nn.Module):
    def __init__(self, quant: torch.nn.Module, floats: torch.nn.Module) -> None:
        super().__init__()
        self.quant, self.floats = quant, floats

    def forward(self, x: torch.Tensor, other: torch.Tensor, xd: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.quant(x, other).flatten(), self.floats(x, xd)])


def build_gemm_suite(seed: int = 0) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The suite and its inputs (the last one's batch is marked dynamic)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(BATCH, IN, generator=gen)
    other = torch.randn(BATCH, OUT, generator=gen)
    xd = torch.randn(BATCH, IN, generator=gen)
    with torch.no_grad():
        quant = _quantize(QuantBody(), (x, other))
    model = Suite(quant, FloatBody().eval())  # the exported part refuses .eval()
    torch._dynamo.mark_dynamic(xd, 0)
    return model, (x, other, xd)
