"""The torch custom ops that Inductor's generated code calls to run a FlyDSL GEMM.

``torch.ops.inductor_flydsl.{mm,addmm,bmm,grouped_mm,scaled_mm,scaled_mm_bias,
gemm_epilogue}_out`` are
out-variant ops: they write into the buffer Inductor allocated (``out``), launch on the
current stream and never synchronize the host; they allocate nothing except a split-K
config's fp32 workspace, which comes from torch's caching allocator on that stream (a
CUDA-graph capture gives it the graph's private pool). Generated code passes ``out`` by
keyword (schemas cannot have keyword-only tensors, so it is an ordinary argument). Their
fake implementations do nothing, so tracing, the FX graph cache and CUDA-graph capture
see a plain in-place op. Generated code names them as
``torch.ops.inductor_flydsl.<op>_out.default``: any process that has imported
``inductor_flydsl`` (or has the package installed, through the ``torch.backends`` entry
point) can run a cached graph that calls them.

A call whose operands reach past the kernel's int32 offsets (possible only for a
dynamic-M candidate at a size larger than any seen at compile time) is computed with
ATen into ``out`` instead; an empty ``out`` returns at once.

The config arrives as JSON text and is validated (``GemmConfig.from_json``) before it
reaches kernel generation. The real implementation refuses to launch unless the ROCm 7
runtime and a supported arch were verified (FlyDSL would abort the process otherwise).
"""

from __future__ import annotations

import functools
import json

import torch

NAMESPACE = "inductor_flydsl"


class FlydslRuntimeUnavailable(RuntimeError):
    pass


@functools.cache
def _parse_config(config: str, template: str = "gemm_dense"):  # the template's config
    from ..template_loader import load_template

    data = json.loads(config)
    return load_template(template).GemmConfig.from_json(data)


def _runner(device: torch.device):
    """The launch runner, once its device runtime accepts ``device`` (a ROCm 7 GPU of a
    supported arch; FlyDSL would abort the process otherwise)."""
    from .kernel_runner import runner

    current = runner()
    reasons = current.runtime.reasons(device)
    if reasons:
        raise FlydslRuntimeUnavailable("FlyDSL kernel not launched: " + "; ".join(reasons))
    return current


def _checked_launch(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, alpha: float, beta: float, config: str) -> None:
    runner = _runner(out.device)
    from ..template_loader import load_template

    template = load_template("gemm_dense")
    if out.numel() == 0:
        return  # M or N is 0 (a dynamic batch that came out empty): nothing to write
    if _over_int32_span(template.MAX_SPAN_ELEMENTS, a, b, out):
        _aten_into(a, b, bias, out, alpha, beta)
        return
    template.launch(a, b, bias, out, alpha, beta, _parse_config(config), runner=runner)


def _span(t: torch.Tensor) -> int:
    return sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1


def _over_int32_span(limit: int, *tensors: torch.Tensor) -> bool:
    """True when an operand reaches past the kernel's int32 offsets. Compile-time
    eligibility checks this at the problem's size; a dynamic-M candidate meets sizes
    only at run time, so every launch checks (integer arithmetic, no device work)."""
    return any(_span(t) > limit for t in tensors)


def _aten_into(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
               out: torch.Tensor, alpha: float, beta: float) -> None:
    """The same result with ATen, for a call outside the kernel's range."""
    if a.dim() == 3:
        torch.bmm(a, b, out=out)
        if alpha != 1.0:
            out.mul_(alpha)
    elif bias is not None:
        torch.addmm(bias.expand_as(out), a, b, beta=beta, alpha=alpha, out=out)
    else:
        torch.mm(a, b, out=out)
        if alpha != 1.0:
            out.mul_(alpha)


@torch.library.custom_op(f"{NAMESPACE}::mm_out", mutates_args=("out",))
def mm_out(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
           alpha: float = 1.0) -> None:
    _checked_launch(a, b, None, out, alpha, 0.0, config)


@torch.library.custom_op(f"{NAMESPACE}::addmm_out", mutates_args=("out",))
def addmm_out(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
              config: str, alpha: float = 1.0, beta: float = 1.0) -> None:
    _checked_launch(a, b, bias, out, alpha, beta, config)


@torch.library.custom_op(f"{NAMESPACE}::bmm_out", mutates_args=("out",))
def bmm_out(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
            alpha: float = 1.0) -> None:
    _checked_launch(a, b, None, out, alpha, 0.0, config)


@mm_out.register_fake
def _mm_out_fake(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
                 alpha: float = 1.0) -> None:
    return None


@addmm_out.register_fake
def _addmm_out_fake(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                    config: str, alpha: float = 1.0, beta: float = 1.0) -> None:
    return None


@bmm_out.register_fake
def _bmm_out_fake(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
                  alpha: float = 1.0) -> None:
    return None


@torch.library.custom_op(f"{NAMESPACE}::grouped_mm_out", mutates_args=("out",))
def grouped_mm_out(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, out: torch.Tensor,
                   config: str) -> None:
    """``out = torch._grouped_mm(a, b, offs)`` (2-D A, 3-D B) with the grouped template;
    rows past ``offs[-1]`` are left as they are. ``offs`` is read on the GPU only."""
    runner = _runner(out.device)
    from ..template_loader import load_template

    if out.numel() == 0:
        return
    # operands past the int32 offsets (checked at compile time for the problem's size)
    # are computed with ATen by the template's launch
    load_template("gemm_grouped").launch(a, b, offs, out, _parse_config(config), runner=runner)


@grouped_mm_out.register_fake
def _grouped_mm_out_fake(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor,
                         out: torch.Tensor, config: str) -> None:
    return None


def _mx_launch(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
               scale_b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
               config: str) -> None:
    runner = _runner(out.device)
    from ..template_loader import load_template

    if out.numel() == 0:
        return
    load_template("gemm_mx").launch(a, b, scale_a, scale_b, bias, out,
                                    _parse_config(config, "gemm_mx"), runner=runner)


@torch.library.custom_op(f"{NAMESPACE}::scaled_mm_out", mutates_args=("out",))
def scaled_mm_out(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                  scale_b: torch.Tensor, out: torch.Tensor, config: str) -> None:
    """``out = (a * 2^scale_a) @ (b * 2^scale_b)`` for MX operands (FP8/FP4 with E8M0
    scales per 32 K elements) with the MX template (gfx950)."""
    _mx_launch(a, b, scale_a, scale_b, None, out, config)


@torch.library.custom_op(f"{NAMESPACE}::scaled_mm_bias_out", mutates_args=("out",))
def scaled_mm_bias_out(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                       scale_b: torch.Tensor, bias: torch.Tensor, out: torch.Tensor,
                       config: str) -> None:
    """:func:`scaled_mm_out` plus a length-N bias."""
    _mx_launch(a, b, scale_a, scale_b, bias, out, config)


@scaled_mm_out.register_fake
def _scaled_mm_out_fake(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                        scale_b: torch.Tensor, out: torch.Tensor, config: str) -> None:
    return None


@scaled_mm_bias_out.register_fake
def _scaled_mm_bias_out_fake(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                             scale_b: torch.Tensor, bias: torch.Tensor, out: torch.Tensor,
                             config: str) -> None:
    return None


@torch.library.custom_op(f"{NAMESPACE}::gemm_epilogue_out", mutates_args=("out",))
def gemm_epilogue_out(a: torch.Tensor, b: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor,
                      x2: torch.Tensor, x3: torch.Tensor, out: torch.Tensor, config: str,
                      epilogue: str) -> None:
    """``out = epilogue(a @ b, x0..)`` with the epilogue fused into the dense template's
    store (``epilogue_spec``; the operand slots past the epilogue's are ignored). The
    epilogue arrives as JSON and is validated before it reaches kernel generation."""
    from ..epilogue_spec import EpilogueSpec, reference
    from ..template_loader import load_template

    runner = _runner(out.device)
    spec = EpilogueSpec.from_json(epilogue)
    extras = [t.reshape(-1) if o.kind in ("col", "row") else t
              for t, o in zip((x0, x1, x2, x3), spec.operands, strict=False)]
    if out.numel() == 0:
        return
    template = load_template("gemm_dense")
    if _over_int32_span(template.MAX_SPAN_ELEMENTS, a, b, out, *extras):
        out.copy_(reference(spec, a.float() @ b.float(), extras))
        return
    template.launch(a, b, None, out, 1.0, 0.0, _parse_config(config), epilogue=spec.text(),
                    extras=tuple(extras), runner=runner)


@gemm_epilogue_out.register_fake
def _gemm_epilogue_out_fake(a: torch.Tensor, b: torch.Tensor, x0: torch.Tensor,
                            x1: torch.Tensor, x2: torch.Tensor, x3: torch.Tensor,
                            out: torch.Tensor, config: str, epilogue: str) -> None:
    return None


OPS = {"mm": mm_out, "addmm": addmm_out, "bmm": bmm_out, "grouped_mm": grouped_mm_out,
       "scaled_mm": scaled_mm_out, "scaled_mm_bias": scaled_mm_bias_out,
       "gemm_epilogue": gemm_epilogue_out}


def op_call_name(op: str) -> str:
    """How generated code names the op: ``torch.ops.inductor_flydsl.<op>_out.default``."""
    return f"torch.ops.{NAMESPACE}.{op}_out.default"
