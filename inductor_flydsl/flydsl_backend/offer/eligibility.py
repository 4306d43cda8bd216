"""Can FlyDSL serve a GEMM? Checked before any candidate is created.

Each check returns every reason it says no (an empty list means yes):

- :func:`runtime_reasons`: a ROCm build of torch, a GPU whose arch the templates target,
  the flydsl package importable and the ROCm 7 HIP runtime loadable. Nothing is launched
  to find out (FlyDSL aborts the process when it launches without ROCm 7).
- :func:`arch_reasons`: a compile target the templates support.
- :func:`problem_reasons`: op, dtypes, dynamic shapes (:func:`dynamic_reasons`),
  layouts, alignment and the divisibility the template needs
  (``gemm_dense.divisibility_requirements``).

Which configs an eligible problem is offered is ``offering.py``'s job.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import importlib.util
from typing import Any

from ...problems.problem import Problem, TensorSpec
from ...template_loader import load_template
from ..specs import registry
from .configs import DEFAULT_GROUPED, GemmConfig
from .hip_library import HIP_LIBRARY, hip_runtime_reasons, process_maps

SUPPORTED_ARCHS = ("gfx950", "gfx942")
TORCH_TO_TEMPLATE_DTYPE = {"bfloat16": "bf16", "float16": "fp16"}
GROUPED_OP = "grouped_mm"
ELEMENT_BYTES = 2


@functools.cache
def hip_runtime_loadable() -> bool:
    try:
        ctypes.CDLL(HIP_LIBRARY)
    except OSError:
        return False
    return True


@functools.cache
def flydsl_installed() -> bool:
    return importlib.util.find_spec("flydsl") is not None


def runtime_reasons(device: Any = None) -> list[str]:
    """Why FlyDSL kernels cannot run on ``device`` (default: the current GPU) here."""
    import torch

    reasons = []
    if torch.version.hip is None:
        reasons.append("torch is not a ROCm build (FlyDSL kernels run only on AMD GPUs)")
    elif hip_major(torch.version.hip) < 7:
        reasons.append(f"torch is built for ROCm {torch.version.hip}; FlyDSL needs ROCm 7")
    elif not torch.cuda.is_available():
        reasons.append("no ROCm GPU is visible")
    else:
        dev = torch.device(device) if device is not None else torch.device("cuda")
        if dev.type != "cuda":
            reasons.append(f"device {dev} is not a GPU")
        else:
            from ...provenance.device import rocm_arch

            reasons += arch_reasons(rocm_arch(dev))
    if not flydsl_installed():
        reasons.append("the flydsl package is not installed (pip install 'flydsl>=0.5,<0.6')")
    if not reasons:  # before anything is loaded: torch's runtime must be the one
        reasons += hip_runtime_reasons(process_maps())  # (hip_library.py: which is whose)
    if not reasons and not hip_runtime_loadable():  # dlopen only in a ROCm 7 torch
        reasons.append(f"the ROCm 7 HIP runtime ({HIP_LIBRARY}) cannot be loaded")
    if not reasons:  # and still one after the dlopen
        reasons += hip_runtime_reasons(process_maps())
    return reasons


def hip_major(version: str) -> int:
    try:
        return int(str(version).split(".", 1)[0])
    except ValueError:
        return 0


def arch_reasons(arch: str) -> list[str]:
    """Why the templates cannot be compiled for ``arch`` (empty: they can)."""
    if arch in SUPPORTED_ARCHS:
        return []
    return [f"arch {arch} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})"]


def _layout_letter(t: TensorSpec) -> str | None:
    if t.stride[-1] == 1 and t.size[-1] >= 1:
        return "n"
    if t.stride[-2] == 1:
        return "t"
    return None


def _leading_stride(t: TensorSpec, letter: str) -> int:
    return t.stride[-2] if letter == "n" else t.stride[-1]


def dynamic_reasons(problem: Problem) -> list[str]:
    """Why a dynamic-shape problem cannot take FlyDSL candidates (empty: it can).

    A FlyDSL launcher is built per (config, dtype, layout, op, arch) and takes M, N, K
    and the strides at launch, so one candidate serves every M, tails included, when
    M is the only symbolic dim, A is row-major (its leading stride is K, not M) and the
    op is mm or addmm (bmm's batch strides would vary with M). The custom op checks the
    one remaining size limit (int32 offsets) at each launch and computes an out-of-range
    call with ATen instead (``ops.py``)."""
    if problem.op not in ("mm", "addmm"):
        return [f"dynamic shapes: FlyDSL takes dynamic M for mm and addmm only, not "
                f"{problem.op}"]
    start = 1 if problem.op == "addmm" else 0
    allowed = [(0,) if i in (0, start) else () for i in range(len(problem.inputs))]
    if start:  # addmm's bias: a row vector, or its (M, N) expanded view
        allowed[0] = (0,) if len(problem.inputs[0].size) == 2 else ()
    symbolic = problem.symbolic
    only_m = all(set(dims) <= set(ok) for dims, ok in
                 zip(symbolic[:-1], allowed, strict=True)) and set(symbolic[-1]) <= {0}
    reasons = []
    if not only_m:
        reasons.append(f"dynamic shapes: symbolic {problem.symbolic_text()}; FlyDSL is "
                       "offered when M is the only symbolic dim")
    a = problem.inputs[start]
    if len(a.size) == 2 and a.stride[-1] != 1:
        reasons.append("dynamic M with a column-major A: its leading stride is M, which "
                       "must be a multiple of 8 at every size")
    return reasons


def problem_reasons(problem: Problem, *, offsets: tuple[int, ...] = (),
                    arch: str | None = None) -> list[str]:
    """Why FlyDSL cannot compute ``problem`` (independent of any config): the reasons of
    the first template that computes its op (the template registry).

    ``offsets`` are the storage offsets (elements) of the inputs, when known; ``arch``
    the compile target, when known (the MX template runs on gfx950 only).
    """
    specs = registry.serving(problem)
    if not specs:
        return [f"op {problem.op} is not supported (supported: "
                f"{', '.join(registry.selections())})"]
    return specs[0].reasons(problem, offsets=offsets, arch=arch)


def dense_problem_reasons(problem: Problem, *, offsets: tuple[int, ...] = (),
                          arch: str | None = None) -> list[str]:
    """Why the dense template (``gemm_dense``) cannot compute an ``mm``, ``addmm`` or
    ``bmm`` problem: dtypes, dynamic shapes, ranks, layouts, alignment and the
    divisibility the template needs."""
    reasons: list[str] = []
    if problem.dynamic:
        reasons += dynamic_reasons(problem)
    dtypes = {t.dtype for t in problem.inputs} | {problem.output.dtype}
    if len(dtypes) != 1 or next(iter(dtypes)) not in TORCH_TO_TEMPLATE_DTYPE:
        reasons.append(f"dtypes {sorted(dtypes)} are not all bfloat16 or all float16")
    start = 1 if problem.op == "addmm" else 0
    a, b = problem.inputs[start], problem.inputs[start + 1]
    rank = 3 if problem.op == "bmm" else 2
    if len(a.size) != rank or len(b.size) != rank:
        return [*reasons, f"{problem.op} operands must be {rank}-D"]
    m, n, k = problem.mnk
    if min(m, n, k) == 0:
        return [*reasons, "an empty dimension (M, N or K is 0)"]
    letters = (_layout_letter(a), _layout_letter(b))
    if None in letters:
        reasons.append("an operand has no unit stride in its last two dims (strided view)")
        return reasons
    layout = "".join(letters)  # type: ignore[arg-type]
    tpl = load_template("gemm_dense")
    req = tpl.divisibility_requirements(GemmConfig(), problem.op, layout)
    ld = req["ld_multiple"]
    for name, t, letter in (("A", a, letters[0]), ("B", b, letters[1])):
        if _leading_stride(t, letter) % ld:
            reasons.append(f"{name}'s leading stride {_leading_stride(t, letter)} is not a "
                           f"multiple of {ld} elements (16 bytes)")
        if rank == 3 and t.size[0] > 1 and t.stride[0] % ld:
            reasons.append(f"{name}'s batch stride {t.stride[0]} is not a multiple of {ld}")
        span = sum((s - 1) * st for s, st in zip(t.size, t.stride, strict=True)) + 1
        if span > req["max_span_elements"]:
            reasons.append(f"{name} spans {span} elements, over the kernel's int32 offsets")
    if n % req["n_multiple"]:
        reasons.append(f"N={n} is not a multiple of {req['n_multiple']}")
    if m % req["m_multiple"]:
        reasons.append(f"M={m} is not a multiple of {req['m_multiple']} (layout {layout})")
    min_tile_k = min(tpl.TILE_K_CHOICES)
    if k % min_tile_k:
        reasons.append(f"K={k} is not a multiple of {min_tile_k} (smallest tile_k)")
    if problem.op == "addmm":
        bias = problem.inputs[0]
        row_vector = (len(bias.size) == 1 and bias.stride[-1] == 1) or (
            len(bias.size) == 2 and bias.stride[-1] == 1
            and (bias.stride[0] == 0 or bias.size[0] == 1))  # expanded, or a (1, N) row
        if not row_vector or bias.size[-1] != n:
            reasons.append("addmm bias is not a length-N row vector broadcast over rows")
    for i, offset in enumerate(offsets):
        if (offset * ELEMENT_BYTES) % req["base_align_bytes"]:
            reasons.append(f"input {i} starts {offset} elements into its storage: not "
                           f"{req['base_align_bytes']}-byte aligned")
    return reasons


def _span(spec: TensorSpec) -> int:
    return sum((s - 1) * st for s, st in zip(spec.size, spec.stride, strict=True)) + 1


def grouped_problem_reasons(problem: Problem, *, offsets: tuple[int, ...] = ()) -> list[str]:
    """Why the grouped template (``gemm_grouped``) cannot compute a ``grouped_mm``
    problem: it takes a 2-D row-major A ``(T, K)``, 3-D weights ``(G, K, N)`` in either
    memory order of their last two dims and int32 group end offsets, bf16 or fp16,
    static shapes; K a multiple of 64 (the grouped configs' smallest tile_k) and N of 8;
    16-byte aligned rows and bases; A, B and out within int32 element offsets."""
    reasons: list[str] = []
    if problem.dynamic:
        reasons.append(f"dynamic shapes: symbolic {problem.symbolic_text()}; the grouped "
                       "template is offered for static shapes")
    if len(problem.inputs) == 2 and all(len(t.size) == 3 for t in problem.inputs):
        # 3-D x 3-D without offs: a bmm (the provider offers the dense template's bmm)
        return problem_reasons(dataclasses.replace(problem, op="bmm"), offsets=offsets)
    if len(problem.inputs) != 3:
        return [*reasons, f"grouped_mm with {len(problem.inputs)} inputs: the template takes "
                "A, B and offs, or 3-D A and B without offs (no bias: torch's _grouped_mm "
                "has none)"]
    a, b, offs = problem.inputs
    if len(a.size) != 2 or len(b.size) != 3:
        return [*reasons, f"grouped_mm of a {len(a.size)}-D A and a {len(b.size)}-D B: the "
                "template takes 2-D ragged activations and 3-D weights (G, K, N)"]
    dtypes = {a.dtype, b.dtype, problem.output.dtype}
    if len(dtypes) != 1 or next(iter(dtypes)) not in TORCH_TO_TEMPLATE_DTYPE:
        reasons.append(f"dtypes {sorted(dtypes)} are not all bfloat16 or all float16")
    if offs.dtype != "int32" or len(offs.size) != 1 or offs.stride != (1,):
        reasons.append("offs is not a contiguous int32 vector")
    tpl = load_template("gemm_grouped")
    groups = b.size[0]
    t, k = a.size
    n = b.size[2]
    if len(offs.size) == 1 and offs.size[0] != groups:
        reasons.append(f"offs has {offs.size[0]} entries for {groups} groups")
    if groups > tpl.MAX_GROUPS:
        reasons.append(f"G={groups} groups: each workgroup scans the offsets, at most "
                       f"{tpl.MAX_GROUPS}")
    if min(t, n, k, groups) == 0:
        return [*reasons, "an empty dimension (T, N, K or G is 0)"]
    if a.stride[-1] != 1:
        reasons.append("A is not row-major (the template reads each group's rows as "
                       "K-contiguous rows)")
    b_letter = _layout_letter(b)
    if b_letter is None:
        reasons.append("B has no unit stride in its last two dims (strided view)")
        return reasons
    req = tpl.divisibility_requirements(GemmConfig(), GROUPED_OP, "n" + b_letter)
    ld = req["ld_multiple"]
    if a.stride[-1] == 1 and a.stride[0] % ld:
        reasons.append(f"A's row stride {a.stride[0]} is not a multiple of {ld} elements")
    if _leading_stride(b, b_letter) % ld:
        reasons.append(f"B's leading stride {_leading_stride(b, b_letter)} is not a multiple "
                       f"of {ld} elements (16 bytes)")
    if groups > 1 and b.stride[0] % ld:
        reasons.append(f"B's group stride {b.stride[0]} is not a multiple of {ld}")
    # out: Inductor's grouped layout is row-major with its row stride padded to 16 bytes
    # (the problem key leaves the output's strides to Inductor)
    out_span = (t - 1) * (-(-n // ld) * ld) + n
    for name, span in (("A", _span(a)), ("B", _span(b)), ("out", out_span)):
        if span > req["max_span_elements"]:
            reasons.append(f"{name} spans {span} elements, over the kernel's int32 offsets")
    if n % req["n_multiple"]:
        reasons.append(f"N={n} is not a multiple of {req['n_multiple']}")
    min_tile_k = min(c.tile_k for c in DEFAULT_GROUPED)
    if k % min_tile_k:
        reasons.append(f"K={k} is not a multiple of {min_tile_k} (the grouped configs' "
                       "smallest tile_k)")
    for i, offset in enumerate(offsets[:2]):
        if (offset * ELEMENT_BYTES) % req["base_align_bytes"]:
            reasons.append(f"input {i} starts {offset} elements into its storage: not "
                           f"{req['base_align_bytes']}-byte aligned")
    return reasons
