"""Can FlyDSL serve a GEMM? Checked before any candidate is created.

Two layers, each returning every reason it says no (an empty list means yes):

- :func:`runtime_reasons`: a ROCm build of torch, a GPU whose arch the templates target,
  the flydsl package importable and the ROCm 7 HIP runtime loadable. Nothing is launched
  to find out (FlyDSL aborts the process when it launches without ROCm 7).
- :func:`problem_reasons`: op, dtypes, dynamic shapes (:func:`dynamic_reasons`),
  layouts, alignment and the divisibility the template needs
  (``gemm_dense.divisibility_requirements``).

:func:`explain` combines them with the configs that would be tried.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import importlib.util
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import settings
from ..performance.ranking import RankedConfig, preselect, rank, stored_first, top_k
from ..performance.short_lists import shipped_short_list
from ..performance.traffic import model_shape
from ..problems.problem import Problem, TensorSpec
from ..template_loader import load_template
from .configs import (
    DEFAULT_GROUPED,
    GemmConfig,
    default_configs,
    exhaustive,
    fits,
    prune_for_shape,
)
from .mx_eligibility import MX_OP, mx_candidate_configs, mx_problem_reasons

log = logging.getLogger("inductor_flydsl")
SUPPORTED_ARCHS = ("gfx950", "gfx942")
TORCH_TO_TEMPLATE_DTYPE = {"bfloat16": "bf16", "float16": "fp16"}
SUPPORTED_OPS = ("mm", "addmm", "bmm", "grouped_mm", "scaled_mm")
GROUPED_OP = "grouped_mm"
HIP_RUNTIME_LIBRARY = "libamdhip64.so.7"
ELEMENT_BYTES = 2
CONFIGS_PER_PROBLEM = settings.CANDIDATES.default
ENV_CANDIDATES = settings.CANDIDATES.name
MAX_CANDIDATES = settings.MAX_CANDIDATES


def configs_per_problem() -> int:
    """How many FlyDSL configs a GEMM shape gets (``INDUCTOR_FLYDSL_CANDIDATES``, 1 to
    64; default 12): more can find a faster kernel, each costs a build and a benchmark.
    A bad value is logged and the default used (it must never fail a compile)."""
    return settings.CANDIDATES.value()


@functools.cache
def hip_runtime_loadable() -> bool:
    try:
        ctypes.CDLL(HIP_RUNTIME_LIBRARY)
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
            from ..provenance.device import rocm_arch

            arch = rocm_arch(dev)
            if arch not in SUPPORTED_ARCHS:
                reasons.append(f"arch {arch} is not supported (supported: "
                               f"{', '.join(SUPPORTED_ARCHS)})")
    if not flydsl_installed():
        reasons.append("the flydsl package is not installed (pip install 'flydsl>=0.5,<0.6')")
    if not reasons and not hip_runtime_loadable():  # dlopen only in a ROCm 7 torch
        reasons.append(f"the ROCm 7 HIP runtime ({HIP_RUNTIME_LIBRARY}) cannot be loaded")
    if not reasons:
        reasons += hip_runtime_conflicts(_mapped_files())
    return reasons


def _mapped_files() -> str:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return maps.read()
    except OSError:
        return ""


def hip_runtime_conflicts(maps: str) -> list[str]:
    """Why launching is refused when more than one HIP runtime is mapped into the process
    (``maps``: ``/proc/self/maps``' text): FlyDSL's runtime binds ``libamdhip64.so.7``;
    a torch whose HIP runtime is another file uses streams and devices that are invalid in
    FlyDSL's, so its launches would fail or corrupt."""
    found = sorted({line.split()[-1] for line in maps.splitlines()
                    if "/libamdhip64.so" in line and len(line.split()) >= 6})
    real = sorted({os.path.realpath(path) for path in found})
    if len(real) <= 1:
        return []
    return [f"{len(real)} HIP runtimes are mapped ({', '.join(found)}): FlyDSL's runtime "
            f"uses {HIP_RUNTIME_LIBRARY}, torch's streams are not valid in another; make "
            "torch's ROCm runtime the one FlyDSL loads (one ROCm 7 installation)"]


def hip_major(version: str) -> int:
    try:
        return int(str(version).split(".", 1)[0])
    except ValueError:
        return 0


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
    """Why the template cannot compute ``problem`` (independent of any config).

    ``offsets`` are the storage offsets (elements) of the inputs, when known; ``arch``
    the compile target, when known (the MX template runs on gfx950 only).
    """
    reasons: list[str] = []
    if problem.op not in SUPPORTED_OPS:
        return [f"op {problem.op} is not supported (supported: {', '.join(SUPPORTED_OPS)})"]
    if problem.op == MX_OP:
        return mx_problem_reasons(problem, arch=arch, offsets=offsets)
    if problem.op == GROUPED_OP:
        return grouped_problem_reasons(problem, offsets=offsets)
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


def grouped_candidate_configs(problem: Problem, arch: str, *,
                              limit: int = CONFIGS_PER_PROBLEM) -> list[Any]:
    """The grouped DEFAULT configs that fit ``arch``, pruned for the average group's rows
    (T / G: Inductor benchmarks near-uniform groups) as a dense problem of that M."""
    dtype = TORCH_TO_TEMPLATE_DTYPE[problem.dtype]
    space = [c for c in DEFAULT_GROUPED if fits(c, arch, dtype)]
    t, n, k = problem.mnk
    rows = max(1, -(-t // max(problem.groups, 1)))
    return prune_for_shape(space, rows, n, k, op="bmm", limit=limit)


def candidate_configs(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                      limit: int = CONFIGS_PER_PROBLEM, epilogue: Any = None,
                      accept: Callable[[Any], bool] | None = None) -> list[Any]:
    """The configs FlyDSL would try for an eligible ``problem`` on ``arch``, best first
    (a grouped GEMM: from the grouped DEFAULT list, whatever the search space): see
    :func:`offered_configs`."""
    return offered_configs(problem, arch, search_space=search_space, limit=limit,
                           epilogue=epilogue, accept=accept)[0]


def offered_configs(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                    limit: int = CONFIGS_PER_PROBLEM, epilogue: Any = None,
                    accept: Callable[[Any], bool] | None = None) -> tuple[list[Any], int]:
    """``(configs, k)``: the configs offered as candidates and how many of them, first in
    the list, the performance model preselects (0: no preselection).

    The candidates are the model's ``INDUCTOR_FLYDSL_TOP_K`` best, then the rest of the
    pruned list (``INDUCTOR_FLYDSL_CANDIDATES``, ``prune_for_shape``'s order), so a record
    made before the model, or with top-k off, still finds every candidate it measured. With
    no record, only the ``k`` first are benchmarked (``inductor/lookup.py``); the others
    only when a record serves them. ``accept`` (a config's own constraint, e.g. an
    epilogue's) applies before the preselection."""
    pruned = [c for c in _pruned_configs(problem, arch, search_space=search_space,
                                         limit=limit) if accept is None or accept(c)]
    ranked = ranked_candidates(problem, arch, search_space=search_space, limit=limit,
                               epilogue=epilogue, accept=accept)
    if ranked is None:
        return pruned, 0
    best = preselect(ranked, min(top_k(), limit))
    return best + [c for c in pruned if c not in best], len(best)


def _pruned_configs(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                    limit: int = CONFIGS_PER_PROBLEM) -> list[Any]:
    """The eligible configs of the search space, at most ``limit``, in the pruned order
    (``configs.prune_for_shape``): no performance model."""
    if problem.op == GROUPED_OP:
        return grouped_candidate_configs(problem, arch, limit=limit)
    if problem.op == MX_OP:
        return mx_candidate_configs(problem, arch, limit=limit)
    dtype = TORCH_TO_TEMPLATE_DTYPE[problem.dtype]
    space = exhaustive(arch, dtype) if search_space.upper() == "EXHAUSTIVE" else \
        default_configs(arch, dtype)
    if problem.dynamic:  # no split-K: its workspace grows with an M no check bounds
        space = [c for c in space if c.split_k == 1]
    m, n, k = problem.mnk
    if search_space.upper() == "EXHAUSTIVE":
        limit = max(limit, 64)
    return prune_for_shape(space, m, n, k, op=problem.op, limit=limit)


def model_variant(problem: Problem) -> tuple[str, str, str, str]:
    """(template, op, dtype, layout) of the catalog rows that describe ``problem``'s
    kernels."""
    if problem.op == MX_OP:
        from .mx_eligibility import variant_dtype

        return "gemm_mx", "mm", variant_dtype(problem), "nt"
    dtype = TORCH_TO_TEMPLATE_DTYPE.get(problem.dtype, "bf16")
    layout = problem.layout if "-" not in problem.layout else "nt"
    if problem.op == GROUPED_OP:
        return "gemm_grouped", GROUPED_OP, dtype, layout
    return "gemm_dense", problem.op, dtype, layout


def ranked_candidates(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
                      limit: int = CONFIGS_PER_PROBLEM, epilogue: Any = None,
                      accept: Callable[[Any], bool] | None = None
                      ) -> list[RankedConfig] | None:
    """Every eligible config of the DEFAULT search space, fastest predicted first (see
    ``performance/ranking.py``); None when there is no preselection: top-k is 0, the
    search space is EXHAUSTIVE (every config is tried), the catalog has no figure of any
    of them, or the model fails."""
    if top_k() == 0 or search_space.upper() == "EXHAUSTIVE":
        return None
    eligible = [c for c in _pruned_configs(problem, arch, search_space="DEFAULT",
                                           limit=MAX_CANDIDATES)
                if accept is None or accept(c)]
    template, op, dtype, layout = model_variant(problem)
    try:
        ranked = rank(eligible, model_shape(problem, epilogue), arch=arch, template=template,
                      op=op, dtype=dtype, layout=layout)
        if not any(r.prediction is not None for r in ranked):
            return None  # no catalog figures: no basis to preselect on
        # the shipped lists rank the plain GEMM: a fused epilogue's traffic is ranked here
        stored = [] if epilogue is not None else shipped_short_list(problem.id, arch)
        return stored_first(ranked, stored) if stored else ranked
    except Exception as exc:  # the model must never cost a compile its FlyDSL choices
        log.warning("inductor_flydsl: performance model failed for %s (%s: %s); offering "
                    "the pruned configs", problem.summary(), type(exc).__name__, exc)
        return None


@dataclass
class Explanation:
    op: str
    problem: str
    arch: str
    eligible: bool
    reasons: list[str] = field(default_factory=list)
    configs: list[dict[str, int]] = field(default_factory=list)
    search_space: str = "DEFAULT"
    # with predictions in ``configs``: what they are (never measurements)
    model: dict[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


PREDICTION_KEYS = ("predicted_us", "tflops", "roofline_share", "bound", "offered",
                   "figures_from", "short_list")


def config_fields(entry: dict[str, Any]) -> dict[str, int]:
    """An explained config without its prediction: the template config itself."""
    return {k: v for k, v in entry.items() if k not in PREDICTION_KEYS}


def _explained_configs(problem: Problem, arch: str, search_space: str) -> list[dict[str, Any]]:
    """The configs a compile offers, in its order (:func:`offered_configs`): with the
    performance model, each with its prediction and ``offered`` (True: benchmarked when no
    record exists; False: offered only so that a record of it is served); without it, the
    pruned configs."""
    from ..performance.config_names import config_key

    limit = configs_per_problem()
    configs, k = offered_configs(problem, arch, search_space=search_space, limit=limit)
    ranked = ranked_candidates(problem, arch, search_space=search_space, limit=limit) \
        if k else None
    if not ranked:
        return [c.to_json() for c in configs]
    by_key = {config_key(r.config.to_json()): r for r in ranked}
    out = []
    for index, config in enumerate(configs):
        row: dict[str, Any] = config.to_json()
        entry = by_key.get(config_key(row))
        p = entry.prediction if entry is not None else None
        row.update({"predicted_us": round(p.us, 2) if p else None,
                    "tflops": round(p.tflops, 1) if p else None,
                    "roofline_share": round(p.roofline_share, 2) if p else None,
                    "bound": p.bound if p else None,
                    "offered": index < k})
        if entry is not None and entry.borrowed_from:
            row["figures_from"] = entry.borrowed_from
        if entry is not None and entry.stored:
            row["short_list"] = "shipped, predicted"
        out.append(row)
    return out


def explain(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
            check_runtime: bool = False) -> Explanation:
    reasons = runtime_reasons() if check_runtime else []
    if arch not in SUPPORTED_ARCHS:
        reasons.append(f"arch {arch} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})")
    reasons += problem_reasons(problem, arch=arch)
    configs = []
    if not reasons:
        configs = _explained_configs(problem, arch, search_space)
        if not configs:
            reasons.append("no config of the search space fits this shape "
                           "(K must be a multiple of a tile_k that is <= K)")
    model = None
    if any("predicted_us" in c for c in configs):
        from ..performance.ranking import device_for

        model = {"kind": "predicted", "device": device_for(arch).name,
                 "order": "the model's top-k (fastest predicted first), then the rest of "
                 "the pruned list", "offered": "True: benchmarked when no "
                 "record exists (top-k); False: offered only so that a record of it is "
                 "served", "doc": "docs/performance-model.md"}
    return Explanation(op=problem.op, problem=problem.summary(), arch=arch,
                       eligible=not reasons, reasons=reasons, configs=configs,
                       search_space=search_space.upper(), model=model)
