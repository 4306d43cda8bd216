"""Bytes a GEMM launch moves at each level: CUs from L2, L2 from the Infinity Cache (MALL),
and HBM.

The grid is walked as the hardware dispatches it: linear workgroup ids (tiles fastest,
then batch, then split-K slice) go round-robin to the XCDs, ``slots`` at a time (a
*round*: every CU holding its full occupancy). Each XCD has its own L2, so an operand
panel (a ``tile_m x K`` slice of A, a ``K x tile_n`` slice of B) is fetched from the MALL
once per XCD and round that needs it; the template's ``group_m`` swizzle decides which
tiles a round's workgroups share. HBM reads each operand once when A and B together fit
in the MALL, else as often as the MALL is asked for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .devices import DeviceSpec
from .kernel_profile import OPERAND_BYTES, KernelProfile

if TYPE_CHECKING:
    from ..problems.problem import Problem

MAX_WALKED_WORKGROUPS = 1 << 16  # beyond: the first whole rounds are walked and scaled


@dataclass(frozen=True)
class GemmShape:
    """``m x n x k`` (``batch`` independent ones for bmm; ``groups`` > 0: a grouped GEMM of
    ``m`` rows in total over ``groups`` weight matrices). ``extra_read_bytes`` and
    ``extra_write_bytes`` are an epilogue's per-output-element loads and stores beyond the
    output itself (a ``tile`` operand in bf16: 2)."""

    m: int
    n: int
    k: int
    batch: int = 1
    groups: int = 0
    bias: bool = False
    extra_read_bytes: float = 0.0
    extra_write_bytes: float = 0.0

    def __post_init__(self) -> None:
        if min(self.m, self.n, self.k, self.batch) <= 0 or self.groups < 0:
            raise ValueError(f"a GEMM shape needs positive M, N, K and batch: {self}")

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch


_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def epilogue_bytes(spec: object, out_bytes: int = 2) -> tuple[float, float]:
    """(extra bytes read, extra bytes written) per output element of a fused epilogue
    (an ``epilogue_spec.EpilogueSpec``): each ``tile`` operand is read once per element
    (``col``/``row`` vectors are reused across the tile: negligible), and an output
    dtype wider than the GEMM's ``out_bytes`` writes the difference."""
    operands = getattr(spec, "operands", ())
    read = sum(_DTYPE_BYTES.get(o.dtype, 4) for o in operands if o.kind == "tile")
    written = max(_DTYPE_BYTES.get(getattr(spec, "out_dtype", ""), out_bytes) - out_bytes, 0)
    return float(read), float(written)


def model_shape(problem: Problem, epilogue: object = None) -> GemmShape:
    """A problem as the model sees it (with a fused ``epilogue``, an ``EpilogueSpec``,
    its operand loads and wider stores): the backend's offering and the comparison with
    measurements both rank with it."""
    m, n, k = problem.mnk
    read, written = epilogue_bytes(epilogue) if epilogue is not None else (0.0, 0.0)
    return GemmShape(m=max(m, 1), n=max(n, 1), k=max(k, 1), batch=max(problem.batch, 1),
                     groups=problem.groups, bias=problem.op == "addmm",
                     extra_read_bytes=read, extra_write_bytes=written)


@dataclass(frozen=True)
class Traffic:
    l2_bytes: float  # CUs <- L2 (every workgroup's operand panels) and stores
    mall_bytes: float  # L2 <- Infinity Cache (panels per XCD and round)
    hbm_bytes: float  # Infinity Cache <- HBM, and stores
    unique_bytes: float  # the least any kernel moves: operands once, output once
    workspace_bytes: float  # split-K partials written (read back by the reduction)


def tiles_m(profile: KernelProfile, shape: GemmShape) -> int:
    if shape.groups:  # the template's grid bound: every group may end in a partial tile
        return (shape.m + shape.groups * (profile.tile_m - 1)) // profile.tile_m
    return -(-shape.m // profile.tile_m)


def tiles_n(profile: KernelProfile, shape: GemmShape) -> int:
    return -(-shape.n // profile.tile_n)


def workgroups(profile: KernelProfile, shape: GemmShape) -> int:
    return tiles_m(profile, shape) * tiles_n(profile, shape) * shape.batch * profile.split_k


def _tile_of(pid: np.ndarray, num_m: int, num_n: int, group_m: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """The template's workgroup swizzle (``gemm_dense.tile_of_workgroup``), vectorised."""
    if group_m <= 1:
        return pid // num_n, pid % num_n
    width = num_n * group_m
    first_m = pid // width * group_m
    rows = np.minimum(num_m - first_m, group_m)
    return first_m + pid % width % rows, pid % width // rows


def _panel_fetches(profile: KernelProfile, shape: GemmShape, device: DeviceSpec,
                   slots: int) -> tuple[float, float]:
    """(A panels, B panels) fetched into the L2s over the launch."""
    num_m, num_n = tiles_m(profile, shape), tiles_n(profile, shape)
    tiles = num_m * num_n
    total = tiles * shape.batch * profile.split_k
    walked = min(total, max(slots, MAX_WALKED_WORKGROUPS // slots * slots))
    ids = np.arange(walked, dtype=np.int64)
    pid = ids % tiles
    rest = ids // tiles  # batch index + batch * split index
    pm, pn = _tile_of(pid, num_m, num_n, profile.group_m)
    rnd = ids // slots
    xcd = ids % device.xcds
    key_a = ((rnd * device.xcds + xcd) * (shape.batch * profile.split_k) + rest) * num_m + pm
    # a grouped GEMM's B panel is its group's weights: the group of a tile row, with the
    # tokens spread evenly over the groups (the grid's bound: ceil(rows / tile_m) each)
    group = np.zeros_like(pm)
    if shape.groups:
        rows_per_group = -(-shape.m // shape.groups)
        per_group = max(-(-rows_per_group // profile.tile_m), 1)
        group = np.minimum(pm // per_group, shape.groups - 1)
    groups = max(shape.groups, 1)
    key_b = (((rnd * device.xcds + xcd) * (shape.batch * profile.split_k) + rest) * groups
             + group) * num_n + pn
    a = float(np.unique(key_a).size)
    b = float(np.unique(key_b).size)
    scale = total / walked
    return a * scale, b * scale


def traffic(profile: KernelProfile, shape: GemmShape, device: DeviceSpec, slots: int
            ) -> Traffic:
    a_bytes = OPERAND_BYTES[profile.a_dtype]
    b_bytes = OPERAND_BYTES[profile.b_dtype]
    k_slice = shape.k / profile.split_k
    a_panel = profile.tile_m * k_slice * a_bytes
    b_panel = profile.tile_n * k_slice * b_bytes
    num_m, num_n = tiles_m(profile, shape), tiles_n(profile, shape)
    wgs = num_m * num_n * shape.batch * profile.split_k
    outputs = shape.m * shape.n * shape.batch
    split = profile.split_k > 1
    atomic = split and profile.split_k_reduction == "atomic"
    workspace = 4.0 * outputs * profile.split_k if split and not atomic else 0.0
    if atomic:  # slice 0 zeroes the tile, every slice adds its partial in the output dtype
        stores = outputs * profile.out_bytes * (profile.split_k + 1)
    else:
        stores = workspace if split else outputs * (profile.out_bytes
                                                    + shape.extra_write_bytes)
    side_reads = outputs * shape.extra_read_bytes + (shape.n * 2 * shape.batch
                                                     if shape.bias else 0)
    a_unique = shape.m * shape.k * a_bytes * shape.batch
    b_unique = shape.k * shape.n * b_bytes * max(shape.batch, shape.groups)
    if profile.a_dtype in ("e4m3", "e5m2", "e2m1", "e3m2", "e2m3"):  # MX: one scale per 32
        a_unique += shape.m * shape.k / 32 * shape.batch
        b_unique += shape.k * shape.n / 32 * max(shape.batch, shape.groups)
    l2 = wgs * (a_panel + b_panel) + stores + side_reads
    a_fetches, b_fetches = _panel_fetches(profile, shape, device, slots)
    mall = a_fetches * a_panel + b_fetches * b_panel + stores + side_reads
    operands = a_unique + b_unique
    hbm_reads = operands if operands <= device.mall_bytes else mall - stores - side_reads
    hbm = hbm_reads + stores + side_reads
    unique = operands + outputs * (profile.out_bytes + shape.extra_write_bytes) + side_reads
    return Traffic(l2_bytes=l2, mall_bytes=mall, hbm_bytes=hbm, unique_bytes=unique,
                   workspace_bytes=workspace)
