"""Resource model of the dense GEMM template: reject configs that cannot fit, before compiling.

LDS is exact (the template allocates one static buffer, see ``gemm_dense.lds_bytes``).
VGPRs are an upper-leaning estimate calibrated against FlyDSL 0.5 / LLVM output for
gfx950 and gfx942 (``tests/flydsl/test_cross_compile.py`` re-checks a sample): a
config is accepted only if the estimate is within the per-lane budget, which is 512
registers (VGPR + AGPR) divided by the number of waves each SIMD must hold for one
workgroup (4 SIMDs per CU).
"""

import math
from typing import Any

from ...template_loader import load_template

LDS_LIMIT_BYTES = {"gfx950": 160 * 1024, "gfx942": 64 * 1024}
REGISTER_FILE_PER_LANE = 512
SIMDS_PER_CU = 4
# Calibration (see module docstring), from 35 DEFAULT-list compiles on gfx950/gfx942:
# a fixed cost for addresses, indices and epilogue; operand fragments weighted by 1.25
# and capped (LLVM keeps at most about one K step of fragments live, fewer under
# pressure). The estimate was >= the compiler's count for every sampled config.
_BASE_VGPRS = 32
_FRAGMENT_FACTOR = 1.25
_FRAGMENT_CAP = 48


def vgpr_budget(config: Any) -> int:
    """Registers per lane available without spilling, given the workgroup's waves."""
    waves = config.waves_m * config.waves_n
    return REGISTER_FILE_PER_LANE // math.ceil(waves / SIMDS_PER_CU)


def estimate_vgprs(config: Any, arch: str) -> int:
    """Estimated VGPRs per lane: accumulators + operand fragments + load staging + base.

    The same formula fits gfx950 and gfx942 (``arch`` is kept for future templates).
    """
    tpl = load_template("gemm_dense")
    rep_m = config.tile_m // config.waves_m // 16
    rep_n = config.tile_n // config.waves_n // 16
    accumulators = rep_m * rep_n * 4
    # One K step of fragments: (rep_m + rep_n) fragments per MFMA k-block, tile_k / 8
    # registers each in total (8 or 4 16-bit values per lane per block).
    fragments = (rep_m + rep_n) * config.tile_k // 8
    loads_a, loads_b = tpl.loads_per_thread(config)
    staging = (loads_a + loads_b) * 4
    live_fragments = _FRAGMENT_FACTOR * min(fragments, _FRAGMENT_CAP)
    return math.ceil(accumulators + live_fragments + staging + _BASE_VGPRS)


def estimate(config: Any, dtype: str, arch: str) -> tuple[int, int, bool, list[str]]:
    """Return ``(lds_bytes, est_vgprs, ok, reasons)`` for one config on one arch.

    ``reasons`` lists every failed check (invalid config, LDS over the arch limit, a
    pipeline deeper than the arch's code path, estimated VGPRs over the budget); ``ok``
    is True when it is empty. ``dtype`` is accepted for interface stability: bf16 and
    fp16 cost the same.
    """
    tpl = load_template("gemm_dense")
    if arch not in LDS_LIMIT_BYTES:
        return 0, 0, False, [f"unsupported arch {arch!r}"]
    if dtype not in tpl.DTYPES:
        return 0, 0, False, [f"unsupported dtype {dtype!r}"]
    try:
        config.validate()
    except ValueError as exc:
        return 0, 0, False, [f"invalid config: {exc}"]
    # The padded (register-staged) layout is the larger one: a config accepted here fits
    # in every layout, including gfx950 ``nt``'s unpadded direct-to-LDS layout.
    lds = tpl.lds_bytes(config, "nn", arch)
    vgprs = estimate_vgprs(config, arch)
    reasons = []
    if lds > LDS_LIMIT_BYTES[arch]:
        reasons.append(f"LDS {lds} B > {LDS_LIMIT_BYTES[arch]} B on {arch}")
    pipeline = tpl.stages_reason(config, arch)
    if pipeline:
        reasons.append(pipeline)
    budget = vgpr_budget(config)
    if vgprs > budget:
        reasons.append(f"estimated {vgprs} VGPRs > budget {budget} per lane")
    return lds, vgprs, not reasons, reasons


def limit_violations(result: Any) -> list[str]:
    """Why a :class:`~.cross_compile.CompileResult` would not run well (empty = fits)."""
    if not result.ok:
        return [result.error or "compile failed"]
    problems = []
    if result.vgpr_spills or result.sgpr_spills:
        problems.append(f"spills: {result.vgpr_spills} VGPR, {result.sgpr_spills} SGPR")
    if result.scratch_bytes:
        problems.append(f"scratch {result.scratch_bytes} B")
    if result.lds_bytes > LDS_LIMIT_BYTES[result.arch]:
        problems.append(f"LDS {result.lds_bytes} B > {LDS_LIMIT_BYTES[result.arch]} B")
    if result.total_vgprs > REGISTER_FILE_PER_LANE:
        problems.append(f"{result.total_vgprs} VGPRs > {REGISTER_FILE_PER_LANE}")
    return problems
