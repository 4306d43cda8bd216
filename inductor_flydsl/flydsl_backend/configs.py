"""Search space of the dense GEMM template: DEFAULT list, EXHAUSTIVE space, per-shape pruning."""

import itertools
import math
from typing import Any

from .cross_compile import load_template
from .resources import estimate

_tpl = load_template("gemm_dense")
GemmConfig = _tpl.GemmConfig

# (tile_m, tile_n, tile_k, waves_m, waves_n, stages, group_m)
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
_FIELDS = ("tile_m", "tile_n", "tile_k", "waves_m", "waves_n", "stages", "group_m")

DEFAULT: tuple[Any, ...] = tuple(
    GemmConfig(**dict(zip(_FIELDS, t, strict=True))) for t in _DEFAULT_TUPLES
)


def fits(config: Any, arch: str, dtype: str = "bf16") -> bool:
    """Valid and accepted by the resource model for ``arch``."""
    return estimate(config, dtype, arch)[2]


def default_configs(arch: str, dtype: str = "bf16") -> list[Any]:
    """The DEFAULT list restricted to configs that fit ``arch``."""
    return [c for c in DEFAULT if fits(c, arch, dtype)]


def exhaustive(arch: str, dtype: str = "bf16") -> list[Any]:
    """Every valid config of the template's ranges that the resource model accepts."""
    out = []
    for values in itertools.product(
        _tpl.TILE_MN_CHOICES,
        _tpl.TILE_MN_CHOICES,
        _tpl.TILE_K_CHOICES,
        _tpl.WAVES_CHOICES,
        _tpl.WAVES_CHOICES,
        _tpl.STAGES_CHOICES,
        _tpl.GROUP_M_CHOICES,
    ):
        config = GemmConfig(**dict(zip(_FIELDS, values, strict=True)))
        if fits(config, arch, dtype):
            out.append(config)
    return out


def _ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def prune_for_shape(
    configs: list[Any], m: int, n: int, k: int, *, limit: int = 12, cu_count: int = 256
) -> list[Any]:
    """Keep at most ``limit`` configs that suit an ``m x n x k`` problem, best first.

    Drops configs whose ``tile_k`` does not divide K (a kernel requirement) and tiles
    much larger than the problem (``tile_m`` above M rounded up to a power of two, at
    least 16; same for N). Ranks the rest by padded work (wasted MACs on tails), then
    by how well the tile count fills ``cu_count`` CUs, then by larger tiles, then by deeper
    K steps.
    """
    m_cap = max(16, 1 << max(0, math.ceil(math.log2(max(m, 1)))))
    n_cap = max(16, 1 << max(0, math.ceil(math.log2(max(n, 1)))))
    kept = []
    for config in configs:
        if k < config.tile_k or k % config.tile_k or config.tile_m > m_cap or config.tile_n > n_cap:
            continue
        padded = _ceil_to(m, config.tile_m) * _ceil_to(n, config.tile_n)
        waste = padded / (m * n)
        tiles = (padded // config.tile_m) // config.tile_n
        fill = min(tiles, cu_count) / cu_count
        key = (
            round(waste, 2),
            -round(fill, 2),
            -(config.tile_m * config.tile_n),
            config.stages == 1,
            -config.tile_k,  # more MFMAs per K step for the same per-step overhead
        )
        kept.append((key, config))
    kept.sort(key=lambda item: item[0])
    unique: list[Any] = []
    for _, config in kept:
        if config not in unique:
            unique.append(config)
    return unique[:limit]
