"""The performance model: microseconds of one compiled FlyDSL GEMM kernel on one device.

Every number is a *prediction*. The model (docs/performance-model.md has the derivation
and its validation against published MI355X measurements):

1. **Occupancy** (``occupancy.py``): workgroups per CU from the kernel's registers
   (unified VGPR+AGPR file, granule 8), LDS and the wave slots; ``slots`` = CUs x that.
2. **Rounds**: the grid's workgroups run ``slots`` at a time; the last round may be
   partial (fewer workgroups on the busiest CU: the *tail*).
3. **Main loop** (from the ISA): a trip of one wave issues ``loop_mfma`` MFMAs. An MFMA
   occupies its SIMD for ``flops / (device peak per SIMD and cycle)`` cycles (the
   published peak rate, not llvm-mca's figure). One wave alone takes llvm-mca's cycles per
   trip (4 clocks each) with each MFMA corrected to that real length; ``o`` waves sharing
   a SIMD overlap, so ``o`` trips take ``max(o x MFMA cycles, one wave's trip)``.
4. **Memory latency and the pipeline**: a K step's loads are issued ``depth`` steps
   ahead (``prefetch_depth``: ``stages - 1`` for the gfx950 direct-to-LDS pipeline, one
   more for a kernel that also loads the next step into registers ahead). A workgroup
   pays one latency to fill its pipeline; then, with ``depth`` >= 1, its steps run at
   ``max(compute, latency / depth)`` except the last ``depth``, whose loads are already
   in flight (compute only: a kernel with no more K steps than its depth waits on memory
   once); with ``depth`` 0 (one LDS stage, the next step's loads issued after this step's
   MFMAs) every step after the first waits a whole latency, which the other waves on the
   SIMD fill with their own MFMAs (``max(o x compute, one wave's step + latency)``). One
   more latency drains the stores; a split-K kernel that reduces in the same launch pays
   its protocol's round trips (``REDUCTION_LATENCIES``); the instructions outside the loop
   are issued once.
5. **Memory bandwidth** (``traffic.py``): bytes at L2, Infinity Cache and HBM over the
   launch, each at its bandwidth (HBM at the measured fraction of peak), plus the
   stream's fill and drain (one latency each: the first bytes arrive a latency after the
   start, the last stores land a latency after they leave).
6. The kernel takes ``max(compute, memory)``, plus per launch what its timing mode adds
   (``timing``, ``MODEL_TIMINGS``; ``devices.py`` gives each figure its source):
   ``kernel``: the kernel's own duration as a profiler reports it (AITER's published
   tables): its fixed dispatch and end-of-kernel cost; ``graph`` (the default: graph
   replay or back-to-back launches, as max-autotune runs under CUDA/HIP graphs): that
   plus the gap between consecutive kernels; ``eager`` (one event-timed call, host
   dispatch inside the events): the event-timed cost of an empty kernel's launch.
   Split-K with a workspace adds the reduction (``torch.sum`` then the copy to the
   output dtype: two more kernels, each at least a read and a write latency long, each
   launched).

What bounds the kernel is the largest of: launch (over half the time), memory (bandwidth),
tail (a partial last round costing a quarter of the compute time or more), latency (K
steps waiting on memory), issue (the loop's own instructions) and compute (the MFMA pipe).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .devices import DeviceSpec
from .kernel_profile import KernelProfile
from .occupancy import occupancy, waves_per_simd
from .traffic import GemmShape, traffic, workgroups

_MODEL_FILES = ("devices.py", "kernel_profile.py", "model.py", "occupancy.py", "traffic.py")


def _model_version() -> str:
    """A hash of the model's own source files: stored predictions name the model that
    made them, and any change to it makes them stale."""
    digest = hashlib.sha256()
    for name in _MODEL_FILES:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:12]


MODEL_VERSION = _model_version()
VALU_ISSUE_CYCLES = 4  # a wave64 instruction on a 16-lane SIMD (CDNA3/CDNA4 ISA guides)
MODEL_CYCLE_CLOCKS = 4  # one cycle of LLVM's AMDGPU scheduling model (llvm-mca) in clocks
# What a compile's timings mean (predict --timing): graph, replay or back-to-back launches;
# eager, one event-timed call after a cache flush
PREDICTED_TIMINGS = ("graph", "eager")
# A kernel's own duration as a profiler reports it: what AITER's published tables hold,
# so what the model is validated against (scripts/validate_performance_model.py)
KERNEL_TIMING = "kernel"
MODEL_TIMINGS = (*PREDICTED_TIMINGS, KERNEL_TIMING)
# Memory round trips a split-K kernel that reduces in its own launch adds per round:
# "atomic" (AMD's: slice 0 zeroes the tile and raises a flag the others poll before adding
# with atomics): the poll; "counter" (the last-arriving workgroup of a tile adds the fp32
# partials): the release of its partial before the arrival atomic, the atomic's return,
# and the read of the other partials.
REDUCTION_LATENCIES = {"workspace": 0, "atomic": 1, "counter": 3}


@dataclass(frozen=True)
class Prediction:
    """A predicted time (never a measurement) and what it is made of."""

    us: float
    tflops: float
    roofline_share: float
    bound: str
    device: str
    parts: dict[str, Any] = field(default_factory=dict)
    kind: str = "predicted"
    timing: str = "graph"  # the timing mode the time is predicted for

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "device": self.device, "timing": self.timing,
                "predicted_us": round(self.us, 3),
                "tflops": round(self.tflops, 1), "roofline_share": round(self.roofline_share, 3),
                "bound": self.bound, "parts": self.parts}


def mfma_cycles(profile: KernelProfile, device: DeviceSpec) -> float:
    """Cycles one MFMA of the kernel holds its SIMD, from the device's published peak."""
    return profile.flops_per_mfma / device.flops_per_simd_cycle(profile.operand_class)


def _trip_cycles(profile: KernelProfile, device: DeviceSpec, waves_on_simd: int
                 ) -> tuple[float, float]:
    """(cycles for ``waves_on_simd`` waves to each run one trip, one wave's trip alone).

    llvm-mca counts in the AMDGPU scheduling model's cycles, each 4 clocks (a wave64
    instruction over a 16-lane SIMD): a wave's trip alone is llvm-mca's cycles x 4, each
    MFMA then corrected by what it really holds the matrix unit beyond llvm-mca's figure
    (none for a bf16 16x16x32, 16 clocks both ways; 16 more for a 16x16x128 with an FP8
    operand, 32 clocks where the model says 4 cycles)."""
    real = mfma_cycles(profile, device)
    mfma_busy = profile.loop_mfma * real
    if profile.loop_cycles is None or not profile.mca_cycles_per_mfma:
        alone = mfma_busy  # no llvm-mca: MFMA-bound (the estimate says so in its parts)
    else:
        per_mfma = real - MODEL_CYCLE_CLOCKS * profile.mca_cycles_per_mfma
        alone = max(profile.loop_cycles * MODEL_CYCLE_CLOCKS + profile.loop_mfma * per_mfma,
                    mfma_busy)
    return max(waves_on_simd * mfma_busy, alone), alone


def _k_loop_cycles(profile: KernelProfile, device: DeviceSpec, waves_on_simd: int,
                   latency: float, k_steps: int) -> tuple[float, str]:
    """Cycles from a workgroup's first load to its last MFMA (``k_steps`` K steps, the
    pipeline's fill included), and what sets them: the pipeline of ``prefetch_depth``
    steps of loads in flight (module docstring, 4)."""
    trip, alone = _trip_cycles(profile, device, waves_on_simd)
    compute = trip / profile.k_steps_per_trip  # one step with the SIMD's other waves
    alone_step = alone / profile.k_steps_per_trip
    depth = profile.prefetch_depth
    if depth <= 0:  # each step's loads wait until the previous step's MFMAs are issued
        waiting = max(compute, alone_step + latency)
        cycles = latency + (k_steps - 1) * waiting + compute
    else:
        waiting = max(compute, latency / depth)
        cycles = latency + max(k_steps - depth, 0) * waiting + min(k_steps, depth) * compute
    if cycles - k_steps * compute > k_steps * compute:
        return cycles, "latency"
    if trip > waves_on_simd * profile.loop_mfma * mfma_cycles(profile, device) * 1.0001:
        return cycles, "issue"
    return cycles, "compute"


def _round_cycles(profile: KernelProfile, device: DeviceSpec, k_steps: int, on_cu: int,
                  latency: float) -> tuple[float, str]:
    """One round of workgroups: the K loop with its fill, one latency to drain the
    stores, an in-launch reduction's round trips, the instructions outside the loop."""
    loop, limit = _k_loop_cycles(profile, device, waves_per_simd(on_cu, profile, device),
                                 latency, k_steps)
    reduction = REDUCTION_LATENCIES.get(profile.split_k_reduction, 0) \
        if profile.split_k > 1 else 0
    fixed = (1 + reduction) * latency + VALU_ISSUE_CYCLES * (profile.outside_instructions or 0)
    return fixed + loop, limit


def predict(profile: KernelProfile, shape: GemmShape, device: DeviceSpec,
            timing: str = "graph") -> Prediction:
    """The predicted time of one launch of ``profile``'s kernel on ``shape``, as
    ``timing`` (``graph``: replayed or back-to-back; ``eager``: one event-timed call;
    ``kernel``: the kernel's own duration, as a profiler reports it) measures it."""
    if timing not in MODEL_TIMINGS:
        raise ValueError(f"the model predicts the timing modes {MODEL_TIMINGS}, not "
                         f"{timing!r}")
    if shape.k % profile.split_k:
        raise ValueError(f"K={shape.k} is not a multiple of split_k={profile.split_k}")
    occ = occupancy(profile, device)
    slots = device.compute_units * occ.workgroups_per_cu
    wgs = workgroups(profile, shape)
    k_steps = math.ceil(shape.k / profile.split_k / profile.tile_k)
    latency = device.memory_latency_ns * device.cycles_per_us / 1e3
    full_rounds, rest = divmod(wgs, slots)
    full, limit = _round_cycles(profile, device, k_steps, occ.workgroups_per_cu, latency)
    compute_cycles = full_rounds * full
    if rest:
        partial, partial_limit = _round_cycles(profile, device, k_steps,
                                               -(-rest // device.compute_units), latency)
        compute_cycles += partial
        if not full_rounds:
            limit = partial_limit
    compute_us = compute_cycles / device.cycles_per_us
    even_us = (wgs / slots) * full / device.cycles_per_us  # the same work in full rounds
    moved = traffic(profile, shape, device, slots)
    hbm_us = moved.hbm_bytes / device.hbm_effective_bytes_per_s * 1e6
    mall_us = moved.mall_bytes / device.mall_bytes_per_s * 1e6
    l2_us = moved.l2_bytes / device.l2_bytes_per_s * 1e6
    # the stream's own fill and drain: its first bytes arrive a latency after the launch
    # starts, its last stores land a latency after they leave (the compute path charges
    # each round of workgroups the same two)
    ramp_us = 2 * device.memory_latency_ns / 1e3
    memory_us = max(hbm_us, mall_us, l2_us) + ramp_us
    launches = 1
    reduce_us = 0.0
    if profile.split_k > 1 and profile.split_k_reduction == "workspace":
        outputs = shape.m * shape.n * shape.batch
        # torch.sum reads the slices and writes fp32; the copy reads that, writes the output
        reduce_bytes = moved.workspace_bytes + outputs * (4 + 4 + profile.out_bytes)
        # two small kernels: each at least a read and a write latency, plus their bytes
        reduce_us = (reduce_bytes / device.hbm_effective_bytes_per_s * 1e6
                     + 2 * 2 * device.memory_latency_ns / 1e3)
        launches += 2
    launch_us = launches * device.launch_cost_us(timing)
    us = max(compute_us, memory_us) + reduce_us + launch_us
    peak_us = shape.flops / device.peak(profile.operand_class) * 1e6
    roofline_us = max(peak_us, moved.unique_bytes / device.hbm_bytes_per_s * 1e6)
    if launch_us >= us / 2:
        bound = "launch"
    elif memory_us >= compute_us:
        bound = "memory"
    elif compute_us - even_us >= 0.25 * compute_us:
        bound = "tail"
    else:
        bound = limit
    parts = {
        "workgroups": wgs, "slots": slots, "workgroups_per_cu": occ.workgroups_per_cu,
        "occupancy_limited_by": occ.limited_by, "rounds": round(wgs / slots, 3),
        "k_steps": k_steps, "mfma_cycles": round(mfma_cycles(profile, device), 2),
        "compute_us": round(compute_us, 3), "mfma_bound_us": round(peak_us, 3),
        "memory_us": round(memory_us, 3), "hbm_us": round(hbm_us, 3),
        "mall_us": round(mall_us, 3), "l2_us": round(l2_us, 3),
        "reduce_us": round(reduce_us, 3), "launch_us": round(launch_us, 3),
        "hbm_mb": round(moved.hbm_bytes / 1e6, 3), "loop_from_mca": profile.loop_cycles
        is not None, "timing": timing, "prefetch_depth": profile.prefetch_depth,
    }
    return Prediction(us=us, tflops=shape.flops / us / 1e6, roofline_share=roofline_us / us,
                      bound=bound, device=device.name, parts=parts, timing=timing)
