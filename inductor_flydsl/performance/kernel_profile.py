"""What the model reads from one compiled GEMM kernel: its tile, its main loop, its resources.

A :class:`KernelProfile` comes from a compile catalog row (the shipped catalog holds
every DEFAULT config's figures, so a compile needs no cross-compile to rank configs) or
from any FlyDSL GEMM ISA file given its tile parameters (:func:`profile_from_isa`, so
AMD's own kernels can be predicted too).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..isa.loop_analysis import analyze_isa
from ..isa.stats import parse_isa

# v_mfma_f32_16x16x32_bf16, v_mfma_scale_f32_16x16x128_f8f6f4, v_mfma_f32_32x32x16_bf16
_MFMA_SHAPE_RE = re.compile(r"v_(?:mfma|smfmac)_\w*?_(\d+)x(\d+)x(\d+)")

OPERAND_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "e4m3": 1.0, "e5m2": 1.0,
                 "e2m1": 0.5, "e3m2": 0.75, "e2m3": 0.75}


def mfma_flops(mnemonic: str) -> int:
    """Floating-point operations of one MFMA (2 * M * N * K of its block)."""
    match = _MFMA_SHAPE_RE.match(mnemonic)
    if match is None:
        raise ValueError(f"not an MFMA mnemonic with an MxNxK block: {mnemonic!r}")
    m, n, k = (int(g) for g in match.groups())
    return 2 * m * n * k


@dataclass(frozen=True)
class KernelProfile:
    """A compiled GEMM kernel's figures.

    ``loop_cycles`` is llvm-mca-22's cycles per trip of the main loop for one wave and
    ``mca_cycles_per_mfma`` its cycles per MFMA alone (both None without llvm-mca);
    ``loop_mfma`` the MFMAs of one trip of one wave; ``outside_instructions`` the kernel's
    instructions outside the main loop (None when unknown: a catalog made before the
    ``loop_outside`` column).
    ``a_dtype``/``b_dtype`` are the operand element types (``bf16``, ``e4m3``, ...).
    """

    tile_m: int
    tile_n: int
    tile_k: int
    waves: int
    stages: int
    group_m: int
    split_k: int
    mfma: str
    loop_mfma: int
    loop_cycles: float | None
    mca_cycles_per_mfma: float | None
    vgprs: int
    agprs: int
    lds_bytes: int
    a_dtype: str = "bf16"
    b_dtype: str = "bf16"
    out_bytes: int = 2
    outside_instructions: int | None = None
    # "workspace" (+ a sum kernel), "atomic" (AMD's: added in the output with atomics) or
    # "counter" (this project's: the last-arriving workgroup of a tile adds the partials)
    split_k_reduction: str = "workspace"
    source: str = ""
    register_prefetch: bool = False  # the next K step's loads go to registers first

    @property
    def prefetch_depth(self) -> int:
        """K steps whose loads are in flight while one is computed."""
        return max(self.stages - 1, 0) + (1 if self.register_prefetch else 0)

    @property
    def flops_per_mfma(self) -> int:
        return mfma_flops(self.mfma)

    @property
    def operand_class(self) -> str:
        """The dense rate class that bounds the MFMA: bf16/fp16, fp8, fp6 or fp4 (a mixed
        pair runs at the wider format's rate)."""
        widths = (OPERAND_BYTES[self.a_dtype], OPERAND_BYTES[self.b_dtype])
        widest = max(widths)
        if widest >= 2:
            return "fp16" if "fp16" in (self.a_dtype, self.b_dtype) else "bf16"
        return {1.0: "fp8", 0.75: "fp6", 0.5: "fp4"}[widest]

    @property
    def mfma_per_k_step(self) -> float:
        """MFMAs one wave issues per K step (``tile_k`` of K)."""
        return self.tile_m * self.tile_n * self.tile_k * 2 / self.flops_per_mfma / self.waves

    @property
    def k_steps_per_trip(self) -> float:
        """K steps one trip of the main loop covers (it is unrolled by the stages)."""
        return max(self.loop_mfma / self.mfma_per_k_step, 1.0) if self.loop_mfma else 1.0

    @property
    def registers_per_lane(self) -> int:
        return self.vgprs + self.agprs

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _mnemonic_of(mfma_counts: dict[str, int]) -> str:
    if not mfma_counts:
        raise ValueError("the kernel has no MFMA instruction")
    return max(mfma_counts.items(), key=lambda kv: kv[1])[0]


def _operand_dtypes(dtype: str) -> tuple[str, str, int]:
    """(A, B, output bytes) of a catalog dtype: ``bf16``, ``fp16``, ``e4m3xe2m1_bf16``."""
    if dtype in ("bf16", "fp16"):
        return dtype, dtype, 2
    pair, _, out = dtype.partition("_")
    a, _, b = pair.partition("x")
    if a not in OPERAND_BYTES or b not in OPERAND_BYTES:
        raise ValueError(f"unknown operand dtypes in {dtype!r}")
    return a, b, 4 if out == "fp32" else 2


def profile_from_catalog_row(row: dict[str, Any]) -> KernelProfile:
    """The profile of a ``compile_catalog`` row (ok and with its main loop found)."""
    if not row.get("ok") or not row.get("loop_found"):
        raise ValueError("the catalog row has no compiled main loop")
    config = json.loads(row["config"])
    a, b, out_bytes = _operand_dtypes(row["dtype"])
    mfma_counts = json.loads(row["mfma"] or "{}")
    return KernelProfile(
        tile_m=config["tile_m"], tile_n=config["tile_n"], tile_k=config["tile_k"],
        waves=config["waves_m"] * config["waves_n"], stages=config["stages"],
        group_m=config.get("group_m", 1), split_k=config.get("split_k", 1),
        mfma=_mnemonic_of(mfma_counts), loop_mfma=int(row["loop_mfma"]),
        loop_cycles=row.get("loop_cycles"), mca_cycles_per_mfma=row.get("mfma_model_cycles"),
        vgprs=int(row["vgprs"]), agprs=int(row["agprs"] or 0), lds_bytes=int(row["lds_bytes"]),
        a_dtype=a, b_dtype=b, out_bytes=out_bytes,
        outside_instructions=row.get("loop_outside"),
        split_k_reduction="counter" if config.get("reduce_in_launch") else "workspace",
        register_prefetch=row["arch"] == "gfx942",  # its register-staged loads run ahead
        source=f"catalog {row['arch']} {row['template']} {row['op']} {row['dtype']} "
               f"{row['layout']} {row['config_id']}",
    )


def _whole_kernel_analysis(text: str, arch: str) -> Any:
    """The loop analysis of a kernel without a K loop (the compiler unrolled every K step):
    its whole instruction stream as one trip. Raises a ValueError without MFMAs."""
    from ..isa.loop_analysis import (
        LoopAnalysis,
        MainLoop,
        McaUnavailable,
        _statements,
        instruction_mix,
        mca_estimate,
    )

    body = tuple(s for s in _statements(text) if not s.endswith(":")
                 and not s.startswith("s_endpgm"))
    loop = MainLoop("(no loop: the whole kernel)", body)
    if loop.mfma_count == 0:
        raise ValueError("the kernel has no MFMA instruction")
    result = LoopAnalysis(main_loop=True, label=loop.label, instructions=len(body),
                          mix=instruction_mix(body))
    try:
        result.mca = mca_estimate(loop, arch)
    except McaUnavailable as exc:
        result.mca_unavailable = str(exc)
    return result


def profile_from_isa(text: str, arch: str, *, tile_m: int, tile_n: int, tile_k: int,
                     waves: int | None = None, stages: int = 2, group_m: int = 1,
                     split_k: int = 1, a_dtype: str = "bf16", b_dtype: str | None = None,
                     out_bytes: int = 2, split_k_reduction: str = "workspace",
                     source: str = "", register_prefetch: bool = False) -> KernelProfile:
    """The profile of a GEMM kernel's final ISA (any FlyDSL GEMM: this project's or AMD's).

    ``waves`` defaults to the kernel's ``.max_flat_workgroup_size`` / 64. Raises a
    ValueError when the ISA has no kernel metadata, no MFMA or no main loop.
    """
    stats = parse_isa(text)
    analysis = analyze_isa(text, arch)
    outside = analysis.outside_instructions
    if not analysis.main_loop:  # K fully unrolled: the whole kernel is one "trip"
        analysis = _whole_kernel_analysis(text, arch)
        outside = 0
    mca = analysis.mca or {}
    return KernelProfile(
        tile_m=tile_m, tile_n=tile_n, tile_k=tile_k,
        waves=waves or max(stats.max_workgroup_size // 64, 1), stages=stages,
        group_m=group_m, split_k=split_k, mfma=_mnemonic_of(stats.mfma_counts),
        loop_mfma=int(analysis.mix.get("mfma_total", 0)),
        loop_cycles=mca.get("cycles_per_trip"),
        mca_cycles_per_mfma=mca.get("model_cycles_per_mfma"),
        vgprs=stats.vgprs, agprs=stats.total_vgprs - stats.vgprs if stats.agprs else 0,
        lds_bytes=stats.lds_bytes, a_dtype=a_dtype, b_dtype=b_dtype or a_dtype,
        out_bytes=out_bytes, outside_instructions=outside,
        split_k_reduction=split_k_reduction, source=source or f"ISA of {stats.kernel}",
        register_prefetch=register_prefetch,
    )
