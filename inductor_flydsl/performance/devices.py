"""Public specifications of the AMD Instinct GPUs the model predicts for, each with its source.

One :class:`DeviceSpec` per product. Every figure names the source it comes from
(``SOURCES``: a URL and what it says); none was fitted to a measurement the model is
validated on (docs/performance-model.md). Figures that no source gives per product are
shared by the architecture (the CDNA3 or CDNA4 ISA guide) and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# source id -> (URL, what it gives)
SOURCES: dict[str, tuple[str, str]] = {
    "rocm-specs": ("https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html",
                   "ROCm's GPU specifications table (ROCm/ROCm docs/reference/gpu-specs.rst): "
                   "CUs and CUs per XCD (MI355X/MI350X 256 = 8 x 32, MI300X/MI325X 304 = 8 x "
                   "38), LDS per CU (160 / 64 KiB), L2 4 MiB per XCD, 256 MiB Infinity Cache, "
                   "wavefront 64, 512 KiB VGPR file per CU"),
    "blog-matrix-cores": ("https://rocm.blogs.amd.com/software-tools-optimization/"
                          "matrix-cores-cdna/README.html",
                          "AMD ROCm blog, Matrix Core Programming on CDNA3 and CDNA4 (Sep "
                          "2025): MI355X dense FP16/BF16 2.5 PF, FP8 5 PF, FP6/FP4 10 PF; "
                          "MI325X 1307.4 / 2614.9 TF at 2100 MHz; MFMA cycles: 16x16x32 "
                          "bf16 16 (gfx950), 16x16x16 bf16 16 (gfx942), 16x16x128 f8f6f4 16, "
                          "or 32 if an operand is FP8"),
    "mi300-arch": ("https://rocm.docs.amd.com/en/docs-6.2.2/conceptual/gpu-arch/mi300.html",
                   "ROCm MI300 microarchitecture page: MI300X 2100 MHz, 5.3 TB/s, matrix "
                   "BF16 2048 FLOP/clock/CU = 1307.4 TF, FP8 2614.9 TF"),
    "clock-cdna4": ("https://pudn.club/news/amd-dives-deep-on-cdna-4-architecture-and-mi350-"
                    "accelerator-at-hot-chip-2025",
                    "Hot Chips 2025 summary (secondary): MI355X peak 2.4 GHz; MI350X 2.2 GHz "
                    "(svethardware.cz); both agree with the 2.5 / 2.3 PF BF16 peaks at 4096 "
                    "FLOP per clock per CU"),
    "hbm-cdna4": ("https://chipsandcheese.com/p/amds-cdna-4-architecture-announcement",
                  "MI355X/MI350X: 288 GB HBM3E at 8 TB/s"),
    "hbm-mi325x": ("https://docs.vultr.com/inference-cookbook/rocm/getting-started/"
                   "hardware-requirements",
                   "MI325X: 256 GB HBM3E, 6.0 TB/s (secondary)"),
    "origami-waves": ("https://github.com/ROCm/rocm-libraries/blob/develop/shared/origami/data/"
                      "hardware/rocjitsu/gfx950_cdna4.json",
                      "Origami's device files (gfx950_cdna4.json, gfx942_cdna3.json): 4 SIMDs "
                      "per CU, at most 8 waves per SIMD (32 wave slots per CU), 512 VGPRs "
                      "per wave (architected + accumulation)"),
    "origami-bandwidth": ("https://github.com/ROCm/rocm-libraries/tree/develop/shared/origami",
                          "AMD's Origami GEMM model (rocm-origami 0.0.3, hardware.hpp/.cpp, "
                          "'obtained through microbenchmarking'): effective L2 17 TB/s, "
                          "Infinity Cache 8.53 (gfx950) / 7.31 (gfx942) TB/s, HBM 6 (gfx950) "
                          "/ 4 (gfx942) TB/s, i.e. 75 % of the HBM peak"),
    "maf-blog": ("https://rocm.blogs.amd.com/software-tools-optimization/measuring-max-"
                 "achievable-flops-part2/README.html",
                 "AMD ROCm blog, Measuring Max-Achievable FLOPs part 2: dense BF16 GEMM runs "
                 "at a median engine clock of 1207 MHz on MI300X and 1447 MHz on MI325X "
                 "(peak 2100); no MI350-series figure is published"),
    "llvm-sched": ("https://github.com/llvm/llvm-project/blob/main/llvm/lib/Target/AMDGPU/"
                   "SISchedule.td",
                   "LLVM's AMDGPU scheduling model (what llvm-mca runs): 'The latency values "
                   "are 1 / (operations / cycle) / 4': one model cycle is 4 clock cycles (a "
                   "wave64 instruction over a 16-lane SIMD); a 16x16x32 bf16 MFMA holds the "
                   "matrix unit 4 model cycles (16 clocks)"),
    "latency-bench": ("https://github.com/te42kyfo/gpu-benches/blob/master/gpu-latency/mi210.txt",
                      "gpu-benches (RRZE) pointer-chase latency, measured on MI210 (CDNA2) at "
                      "1700 MHz: L2 hits ~140 ns, HBM ~337 ns (570 cycles) for 14-60 MB "
                      "buffers; no MI300/MI350 figure was readable here (the SC25 paper 'The "
                      "MALL is Open', Tee et al., measures MI300X)"),
    "launch-bench": ("https://github.com/ROCm/TransferBench/pull/297",
                     "TransferBench (AMD) EmptyKernel preset, May 2026: 4.04 us minimum per "
                     "launch of an empty kernel (grid 256 x 256 threads) timed between two "
                     "hipEvents around a single launch, host launch included; the example "
                     "output does not name the GPU model"),
    "launch-kog": ("https://blog.kog.ai/building-a-single-kernel-latency-optimized-llm-"
                   "inference-engine-on-amd-mi300x-gpus",
                   "Kog AI (May 2026), measured on an 8x MI300X node: about 4.5 us of launch "
                   "and clean-up per kernel launched from the host (agrees with "
                   "TransferBench's 4.04); about 0.5 us of HBM latency per memory-load "
                   "restart"),
    "aiter-perftest": ("https://github.com/ROCm/aiter/blob/main/aiter/test_common.py",
                       "AITER's perftest (what its tuners record in aiter/configs/*tuned*"
                       ".csv): torch.profiler's device time of each kernel "
                       "(self_device_time_total, dispatch start to completion), averaged "
                       "over back-to-back launches on rotating copies of the inputs: the "
                       "kernel's own duration, no host dispatch and no gap between kernels"),
    "aiter-floor": ("https://github.com/ROCm/aiter/tree/e4048607a535ace3a2b51ded31b1c8c2d45c0"
                    "879/aiter/configs",
                    "The fastest kernel in all of AITER's published tuned GEMM tables at "
                    "commit e4048607, per arch: gfx950 (256 CUs) 2.4076 us, a CK FP8 "
                    "blockscale kernel at 4x256x512 (model_configs/a8w8_blockscale_"
                    "bpreshuffle_tuned_gemm_qwen3.5_397b.csv); gfx942 (304 CUs) 3.0108 us, a "
                    "CK FP8 blockscale kernel at 2x6144x256 (model_configs/a8w8_blockscale_"
                    "tuned_gemm_glm5_1.csv). Neither is a FlyDSL kernel, so neither is a "
                    "point the model is validated on"),
    "graph-busy": ("https://github.com/AMD-AGI/TraceLens/issues/728",
                   "vLLM decode under HIP graph replay on MI300X: torch.profiler shows the "
                   "GPU ~99 % busy (AMD-AGI/TraceLens#728); ~97 % busy over ~575 kernels per "
                   "decode step with vLLM 0.21 on ROCm 7.2 (AMD-AGI/Hyperloom#747): the gap "
                   "between graph-replayed kernels is a few % of their durations, not "
                   "isolated in microseconds by either"),
}

# What a launch costs, by timing mode (inductor_flydsl/provenance/timing_modes.py; the model's
# PREDICTED_TIMINGS):
# - kernel: the kernel's own duration as a profiler reports it (AITER's tables,
#   aiter-perftest): the model's work (its fill and drain latencies included) plus a fixed
#   dispatch and end-of-kernel cost. That cost is DERIVED, per arch, from the fastest
#   kernel in AITER's published tables (aiter-floor, a non-FlyDSL kernel, never a
#   validation point) less the two latencies the model charges any kernel (fill and
#   drain), its work taken as nil: an upper bound.
# - graph: graph replay or back-to-back launches: the kernel's duration plus the gap
#   between consecutive kernels. No public MI300/MI350 figure isolates that gap; vLLM's
#   graph-replayed decode keeps an MI300X ~97-99 % busy (graph-busy), a few % of its
#   kernels' microseconds. ASSUMED: 0.5 us.
# - eager: one call between two events, host dispatch inside them (Inductor's default GPU
#   timing): TransferBench's 4.04 us event-timed empty-kernel launch (launch-bench; Kog AI's
#   4.5 us on MI300X agrees), in place of the fixed cost above (it holds an empty kernel's
#   own duration).
EAGER_LAUNCH_US = 4.04
GRAPH_GAP_US = 0.5
# AITER's fastest published kernel per arch (aiter-floor), microseconds
AITER_FASTEST_US = {"gfx950": 2.4076, "gfx942": 3.0108}
HBM_LATENCY_NS = 337.0  # latency-bench: an HBM load on MI210 (the previous generation)


def kernel_overhead_us(arch: str) -> float:
    """A kernel's fixed dispatch and end-of-kernel cost inside its duration (``kernel``
    timing): AITER's fastest published kernel on ``arch`` less the fill and drain
    latencies the model charges every kernel."""
    return AITER_FASTEST_US[arch] - 2 * HBM_LATENCY_NS / 1e3


@dataclass(frozen=True)
class DeviceSpec:
    """A GPU as the model sees it. Rates are per second; sizes in bytes."""

    name: str
    arch: str
    compute_units: int
    xcds: int
    clock_hz: float
    lds_bytes_per_cu: int
    l2_bytes_per_xcd: int
    mall_bytes: int
    hbm_bytes_per_s: float
    # dense matrix peak FLOP/s by operand class (bf16, fp16, fp8, fp6, fp4)
    peak_flops: dict[str, float]
    # engine clock under a dense GEMM's load (the GPU slows below its peak clock)
    gemm_clock_hz: float
    # effective bandwidths (bytes/s) of HBM, the Infinity Cache and all L2s together
    hbm_effective_bytes_per_s: float
    mall_bytes_per_s: float
    l2_bytes_per_s: float
    # latency of a global load that misses L2 (ns), and the GPU-side cost of a launch (us)
    memory_latency_ns: float
    launch_us: float  # eager: one event-timed call after a cache flush (host dispatch in)
    kernel_overhead_us: float  # kernel: fixed dispatch + end-of-kernel cost in its duration
    graph_gap_us: float = GRAPH_GAP_US  # graph: + the gap between back-to-back kernels
    simds_per_cu: int = 4
    lanes_per_simd: int = 16
    wave_size: int = 64
    max_waves_per_simd: int = 8
    registers_per_lane: int = 512  # VGPRs + AGPRs, unified
    register_granule: int = 8
    sources: dict[str, str] = field(default_factory=dict)  # figure -> source id
    assumptions: tuple[str, ...] = ()  # figures no source gives for this product

    @property
    def cycles_per_us(self) -> float:
        """Clock cycles per microsecond while a GEMM runs (the sustained clock)."""
        return self.gemm_clock_hz / 1e6

    def launch_cost_us(self, timing: str) -> float:
        """What one kernel launch adds to its work under ``timing``: ``kernel`` (its own
        duration, as a profiler reports it), ``graph`` (replayed or back-to-back) or
        ``eager`` (one event-timed call, host dispatch included)."""
        if timing == "kernel":
            return self.kernel_overhead_us
        if timing == "graph":
            return self.kernel_overhead_us + self.graph_gap_us
        if timing == "eager":
            return self.launch_us
        raise ValueError(f"the model predicts the timing modes graph, eager or kernel, not "
                         f"{timing!r}")

    def peak(self, operand_class: str) -> float:
        try:
            return self.peak_flops[operand_class]
        except KeyError:
            raise ValueError(f"{self.name} has no published dense {operand_class} rate "
                             f"(known: {', '.join(sorted(self.peak_flops))})") from None

    def flops_per_simd_cycle(self, operand_class: str) -> float:
        simds = self.compute_units * self.simds_per_cu
        return self.peak(operand_class) / (simds * self.clock_hz)

    def source_rows(self) -> list[tuple[str, str, str]]:
        """(figure, source id, URL) for every figure of this device."""
        return [(figure, sid, SOURCES[sid][0]) for figure, sid in sorted(self.sources.items())]


_KIB, _MIB = 1024, 1024 * 1024
_T = 1e12
_COMMON_SOURCES = {
    "compute_units/xcds/lds/l2/mall": "rocm-specs", "simds/waves/registers": "origami-waves",
    "mfma_cycles": "blog-matrix-cores", "model_cycle": "llvm-sched",
    "effective_bandwidths": "origami-bandwidth", "gemm_clock": "maf-blog",
    "memory_latency": "latency-bench", "launch (eager)": "launch-bench",
    "launch (eager, agrees)": "launch-kog", "kernel timing (what AITER publishes)":
    "aiter-perftest", "kernel overhead (derived)": "aiter-floor", "graph gap (bound)":
    "graph-busy",
}
_GRAPH_ASSUMPTION = (f"the gap between graph-replayed kernels is ASSUMED to be {GRAPH_GAP_US} "
                     "us: no public MI300/MI350 figure isolates it (vLLM's graph-replayed "
                     "decode keeps an MI300X ~97-99 % busy)")
# The sustained clock under dense BF16 GEMM is published for MI300X (1207 MHz) and MI325X
# (1447 MHz); for the MI350 series it is not. Those are ASSUMED to hold the MI325X's
# share of their peak clock (1447 / 2100), the newest part with a published figure.
MI325X_GEMM_CLOCK_SHARE = 1447 / 2100


def _cdna3(name: str, *, hbm_tb_s: float, gemm_clock_mhz: float, hbm_source: str
           ) -> DeviceSpec:
    return DeviceSpec(
        name=name, arch="gfx942", compute_units=304, xcds=8, clock_hz=2.1e9,
        gemm_clock_hz=gemm_clock_mhz * 1e6,
        lds_bytes_per_cu=64 * _KIB, l2_bytes_per_xcd=4 * _MIB, mall_bytes=256 * _MIB,
        hbm_bytes_per_s=hbm_tb_s * _T,
        peak_flops={"bf16": 1307.4 * _T, "fp16": 1307.4 * _T, "fp8": 2614.9 * _T},
        # Origami's 4 TB/s of MI300X's 5.3 peak, the same share of MI325X's 6
        hbm_effective_bytes_per_s=hbm_tb_s * _T * 4.0 / 5.3,
        mall_bytes_per_s=7.31 * _T, l2_bytes_per_s=17.0 * _T,
        memory_latency_ns=HBM_LATENCY_NS, launch_us=EAGER_LAUNCH_US,
        kernel_overhead_us=kernel_overhead_us("gfx942"),
        sources={**_COMMON_SOURCES, "clock/peak": "mi300-arch" if name == "MI300X"
                 else "blog-matrix-cores", "hbm": hbm_source},
        assumptions=(_GRAPH_ASSUMPTION,),
    )


def _cdna4(name: str, *, clock_ghz: float) -> DeviceSpec:
    per_cu_clock = 256 * clock_ghz * 1e9  # 4096 BF16 FLOP per clock per CU (16x16x32/16)
    return DeviceSpec(
        name=name, arch="gfx950", compute_units=256, xcds=8, clock_hz=clock_ghz * 1e9,
        gemm_clock_hz=clock_ghz * 1e9 * MI325X_GEMM_CLOCK_SHARE,
        lds_bytes_per_cu=160 * _KIB, l2_bytes_per_xcd=4 * _MIB, mall_bytes=256 * _MIB,
        hbm_bytes_per_s=8.0 * _T,
        peak_flops={"bf16": 4096 * per_cu_clock, "fp16": 4096 * per_cu_clock,
                    "fp8": 8192 * per_cu_clock, "fp6": 16384 * per_cu_clock,
                    "fp4": 16384 * per_cu_clock},
        hbm_effective_bytes_per_s=6.0 * _T, mall_bytes_per_s=8.53 * _T,
        l2_bytes_per_s=17.0 * _T, memory_latency_ns=HBM_LATENCY_NS, launch_us=EAGER_LAUNCH_US,
        kernel_overhead_us=kernel_overhead_us("gfx950"),
        sources={**_COMMON_SOURCES, "clock": "clock-cdna4", "peak": "blog-matrix-cores",
                 "hbm": "hbm-cdna4",
                 "gemm_clock": "maf-blog"},
        assumptions=("the sustained GEMM clock is ASSUMED to be the MI325X's share of its "
                     "peak (1447 / 2100 MHz): no MI350-series figure is published",
                     _GRAPH_ASSUMPTION),
    )


DEVICES: dict[str, DeviceSpec] = {
    "MI355X": _cdna4("MI355X", clock_ghz=2.4),
    "MI350X": _cdna4("MI350X", clock_ghz=2.2),
    "MI300X": _cdna3("MI300X", hbm_tb_s=5.3, gemm_clock_mhz=1207, hbm_source="mi300-arch"),
    "MI325X": _cdna3("MI325X", hbm_tb_s=6.0, gemm_clock_mhz=1447, hbm_source="hbm-mi325x"),
}
DEFAULT_DEVICE = {"gfx950": "MI355X", "gfx942": "MI300X"}


def device_spec(name: str) -> DeviceSpec:
    """The spec of ``name`` (case-insensitive: ``mi355x``); a ValueError lists the known."""
    spec = DEVICES.get(name.upper())
    if spec is None:
        raise ValueError(f"unknown device {name!r} (known: {', '.join(DEVICES)})")
    return spec
