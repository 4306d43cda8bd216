"""Search space of the dense GEMM template: DEFAULT list, EXHAUSTIVE space, per-shape pruning."""

import functools
import itertools
import math
from typing import Any

from ...template_loader import load_template
from .resources import estimate

_tpl = load_template("gemm_dense")
GemmConfig = _tpl.GemmConfig

# (tile_m, tile_n, tile_k, waves_m, waves_n, stages, group_m[, split_k[, reduce_in_launch]])
_DEFAULT_TUPLES = (
    # skinny M (decode-like shapes, M <= 32)
    (16, 32, 128, 1, 1, 2, 1),
    (16, 64, 128, 1, 2, 2, 1),
    (16, 128, 128, 1, 4, 2, 1),
    (16, 256, 128, 1, 4, 2, 1),
    (32, 64, 128, 1, 2, 2, 1),
    (32, 128, 64, 1, 4, 2, 1),
    (32, 256, 128, 1, 4, 2, 8),
    # decode: deep K steps amortise the per-step wait and barrier (gfx950 direct-to-LDS)
    (16, 32, 256, 1, 1, 2, 1),
    (16, 64, 256, 1, 1, 2, 1),
    (32, 64, 256, 1, 2, 2, 1),
    # decode, split-K: K slices in separate workgroups, so a skinny problem's few output
    # tiles still put 512+ workgroups (and their loads) on the GPU
    (16, 32, 256, 1, 1, 2, 1, 2),
    (16, 32, 256, 1, 1, 2, 1, 4),
    (16, 64, 256, 1, 1, 2, 1, 2),
    (16, 64, 256, 1, 1, 2, 1, 4),
    (32, 64, 256, 1, 2, 2, 1, 2),
    (32, 64, 256, 1, 2, 2, 1, 4),
    # decode, split-K reduced inside the launch (the last-arriving wave of each sub-tile
    # adds the partials: one kernel, no workspace sum) with deep pipelines (gfx950 only):
    # small-N, large-K shapes have too few output tiles to fill 256 CUs, so up to 16
    # K slices each keep 3-6 K steps of loads in flight
    (16, 32, 256, 1, 1, 3, 1, 4, 1),
    (16, 64, 64, 1, 2, 6, 1, 8, 1),
    (16, 64, 128, 1, 2, 4, 1, 8, 1),
    (16, 64, 128, 1, 2, 4, 1, 4, 1),
    (16, 128, 128, 1, 4, 4, 1, 4, 1),
    # decode at AMD's level (issue 43, docs/decisions.md): four waves wherever the grid
    # has about one workgroup per CU, so all 4 SIMDs of a CU work (M = 64: 32x64 tiles in
    # 2 K slices, or the whole M in 64x64 tiles and 4 slices; no split-K where N alone
    # gives 192 tiles), and small-N, large-K shapes in 16 slices of tiles whose waves hold
    # one or two 16x16 blocks, so the in-launch reduction each wave runs is short
    (32, 64, 128, 2, 2, 4, 1, 2, 1),
    (64, 64, 64, 2, 2, 4, 1, 4, 1),
    (32, 64, 256, 2, 2, 2, 1),
    (16, 16, 64, 1, 1, 4, 1, 16, 1),
    (32, 32, 64, 2, 2, 4, 1, 16, 1),
    # three stages (gfx950 only: two K steps of loads in flight behind the one computed)
    (16, 32, 256, 1, 1, 3, 1, 4),
    (16, 64, 256, 1, 1, 3, 1, 2),
    (128, 128, 64, 2, 2, 3, 8),
    (128, 256, 64, 2, 4, 3, 8),
    (256, 256, 32, 2, 4, 3, 8),
    # medium tiles
    (64, 64, 64, 2, 2, 2, 8),
    (64, 128, 64, 2, 2, 2, 8),
    (64, 128, 128, 2, 2, 2, 8),
    (64, 256, 32, 1, 4, 2, 8),
    (64, 256, 64, 2, 4, 2, 8),
    (128, 64, 64, 2, 2, 2, 8),
    (128, 64, 128, 2, 2, 2, 4),
    (256, 64, 64, 4, 1, 2, 8),
    # large tiles
    (128, 128, 32, 2, 2, 2, 8),
    (128, 128, 64, 2, 2, 1, 4),
    (128, 128, 64, 2, 2, 2, 8),
    (128, 128, 128, 2, 2, 1, 8),
    (128, 256, 32, 2, 4, 2, 8),
    (128, 256, 64, 2, 4, 2, 8),
    (256, 128, 64, 4, 2, 2, 8),
    (256, 256, 32, 2, 4, 2, 8),
    (256, 256, 64, 2, 4, 2, 8),
)
_FIELDS = ("tile_m", "tile_n", "tile_k", "waves_m", "waves_n", "stages", "group_m", "split_k",
           "reduce_in_launch")

DEFAULT: tuple[Any, ...] = tuple(
    GemmConfig(**dict(zip(_FIELDS, t, strict=False))) for t in _DEFAULT_TUPLES
)
# Grouped GEMM (templates/gemm_grouped.py, the dense kernel with a group scheduler): no
# split-K. MoE groups are a few to a few hundred tokens per expert, so the list leans
# to small and medium M tiles; the large ones serve prefill with few experts.
_GROUPED_TUPLES = (
    (16, 64, 64, 1, 2, 2, 1),  # K a multiple of 64 only (e.g. 2880)
    (16, 64, 128, 1, 2, 2, 1),
    (16, 128, 128, 1, 4, 2, 1),
    (32, 64, 128, 1, 2, 2, 1),
    (32, 128, 64, 1, 4, 2, 1),
    (64, 64, 64, 2, 2, 2, 8),
    (64, 128, 64, 2, 2, 2, 8),
    (64, 256, 64, 2, 4, 2, 8),
    (128, 128, 64, 2, 2, 2, 8),
    (128, 128, 64, 2, 2, 3, 8),
    (128, 256, 64, 2, 4, 2, 8),
    (256, 128, 64, 4, 2, 2, 8),
    (256, 256, 64, 2, 4, 2, 8),
)
DEFAULT_GROUPED: tuple[Any, ...] = tuple(
    GemmConfig(**dict(zip(_FIELDS, t, strict=False))) for t in _GROUPED_TUPLES
)
SKINNY_M = 64  # at or below: a memory-bound, decode-like problem (see prune_for_shape)


def fits(config: Any, arch: str, dtype: str = "bf16") -> bool:
    """Valid and accepted by the resource model for ``arch``."""
    return estimate(config, dtype, arch)[2]


def default_configs(arch: str, dtype: str = "bf16") -> list[Any]:
    """The DEFAULT list restricted to configs that fit ``arch``."""
    return [c for c in DEFAULT if fits(c, arch, dtype)]


def valid_configs() -> list[Any]:
    """Every config of the template's ranges that the template accepts (any arch)."""
    out = []
    for values in itertools.product(
        _tpl.TILE_MN_CHOICES,
        _tpl.TILE_MN_CHOICES,
        _tpl.TILE_K_CHOICES,
        _tpl.WAVES_CHOICES,
        _tpl.WAVES_CHOICES,
        _tpl.STAGES_CHOICES,
        _tpl.GROUP_M_CHOICES,
        _tpl.SPLIT_K_CHOICES,
    ):
        config = GemmConfig(**dict(zip(_FIELDS, values, strict=False)))
        try:
            config.validate()
        except ValueError:
            continue
        out.append(config)
    return out


def exhaustive(arch: str, dtype: str = "bf16") -> list[Any]:
    """Every valid config of the template's ranges that the resource model accepts."""
    return list(_exhaustive(arch, dtype))


@functools.lru_cache(maxsize=16)
def _exhaustive(arch: str, dtype: str) -> tuple[Any, ...]:
    # 31k valid configs, about 2 s here: computed once per (arch, dtype) and process
    return tuple(c for c in valid_configs() if fits(c, arch, dtype))


def _ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def prune_for_shape(
    configs: list[Any], m: int, n: int, k: int, *, op: str = "mm", limit: int = 12,
    cu_count: int = 256,
) -> list[Any]:
    """Keep at most ``limit`` configs that suit an ``op`` problem of ``m x n x k``, best
    first.

    Drops configs the kernel cannot run (K not a multiple of ``tile_k * split_k``, or
    shorter than the pipeline; split-K for ``bmm``, or whose split-K workspace is past
    int32 offsets or its memory cap: ``workspace_reason``) and tiles much larger than the problem
    (``tile_m`` above M rounded up to a power of two, at least 16; same for N). Ranks the
    rest by padded work (wasted MACs on tails), then by how well the workgroups (output
    tiles times ``split_k``) fill the GPU, then:

    - skinny problems (M <= ``SKINNY_M``, memory-bound): the target is 4 workgroups per
      CU (``cu_count``), so the loads in flight can cover memory latency; then deeper K
      steps, fewer splits (less partial traffic), larger tiles;
    - others: the target is one workgroup per CU; then larger tiles, fewer splits,
      2+ stages, deeper K steps.
    """
    m_cap = max(16, 1 << max(0, math.ceil(math.log2(max(m, 1)))))
    n_cap = max(16, 1 << max(0, math.ceil(math.log2(max(n, 1)))))
    skinny = m <= SKINNY_M
    target = 4 * cu_count if skinny else cu_count
    kept = []
    for config in configs:
        req = _tpl.divisibility_requirements(config, op, "nt")
        if (k % req["k_multiple"] or k < req["k_min"] or _tpl.split_k_reason(config, op)
                or _tpl.workspace_reason(config, m, n) or _tpl.counters_reason(config, m, n)
                or config.tile_m > m_cap or config.tile_n > n_cap):
            continue
        padded = _ceil_to(m, config.tile_m) * _ceil_to(n, config.tile_n)
        waste = padded / (m * n)
        workgroups = (padded // config.tile_m) // config.tile_n * config.split_k
        fill = -round(min(workgroups, target) / target, 2)
        area = -(config.tile_m * config.tile_n)
        if skinny:
            key = (round(waste, 2), fill, -config.tile_k, config.split_k, area,
                   config.stages == 1)
        else:
            key = (round(waste, 2), fill, area, config.split_k, config.stages == 1,
                   -config.tile_k)  # deeper K: more MFMAs for the same per-step overhead
        kept.append((key, config))
    kept.sort(key=lambda item: item[0])
    unique: list[Any] = []
    for _, config in kept:
        if config not in unique:
            unique.append(config)
    return unique[:limit]


# Block-scaled (MX) GEMM (templates/gemm_mx.py, gfx950 only; tile_k counts K elements).
# Chosen from cross-compiles of every format pairing: none spills; the large tiles give
# the main loop the most MFMAs per load (prefill), the small ones serve decode shapes.
# 256x256x128 with 8 waves spills with FP8 operands (256 registers per lane at two
# waves per SIMD), so it is offered only when both operands are FP4.
_MX_FIELDS = ("tile_m", "tile_n", "tile_k", "waves_m", "waves_n", "stages", "group_m")
_MX_TUPLES = (
    (256, 128, 128, 2, 2, 2, 8),
    (128, 256, 128, 2, 2, 2, 8),
    (128, 128, 128, 2, 2, 3, 8),
    (128, 128, 256, 2, 2, 2, 8),
    (128, 128, 128, 2, 2, 2, 8),
    (64, 128, 256, 1, 2, 2, 8),
    (64, 64, 256, 1, 1, 2, 1),
    (32, 64, 256, 1, 1, 2, 1),
    (16, 128, 256, 1, 2, 3, 1),
    (16, 64, 128, 1, 1, 3, 1),
)
_MX_FP4_ONLY_TUPLES = ((256, 256, 128, 4, 2, 2, 8),)


def _mx_configs(tuples: tuple[tuple[int, ...], ...]) -> tuple[Any, ...]:
    from ...template_loader import load_template

    mx = load_template("gemm_mx")
    return tuple(mx.MxConfig(**dict(zip(_MX_FIELDS, t, strict=True))) for t in tuples)


DEFAULT_MX: tuple[Any, ...] = _mx_configs(_MX_TUPLES + _MX_FP4_ONLY_TUPLES)
_MX_FP4_ONLY: tuple[Any, ...] = _mx_configs(_MX_FP4_ONLY_TUPLES)


def mx_default_configs(dtype: str) -> list[Any]:
    """The MX DEFAULT list for one variant dtype (``<a>x<b>_<out>``)."""
    both_fp4 = dtype.startswith("e2m1xe2m1_")
    return [c for c in DEFAULT_MX if both_fp4 or c not in _MX_FP4_ONLY]
