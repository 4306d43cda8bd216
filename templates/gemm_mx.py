"""Block-scaled (MX) GEMM template for AMD CDNA4 (gfx950) written in FlyDSL.

Computes ``out = (A * 2^scale_a) @ (B * 2^scale_b)^T (+ bias)`` where A is ``(M, K)`` and
B is ``(N, K)`` (both K-contiguous, i.e. torch's ``_scaled_mm(a, w.t())`` with a
row-major weight ``w``), each a micro-scaling (OCP MX) format:

* ``e4m3`` (MXFP8, ``torch.float8_e4m3fn``), ``e5m2`` (MXFP8, ``torch.float8_e5m2``):
  one byte per element;
* ``e2m1`` (MXFP4, ``torch.float4_e2m1fn_x2``): two elements per byte, the element with
  the lower K index in the low nibble;

with one E8M0 scale (``torch.float8_e8m0fnu``, the value ``2^(byte - 127)``) per block of
32 consecutive K elements of a row: ``scale_a`` is ``(M, K / 32)`` and ``scale_b`` is
``(N, K / 32)``, each with unit stride along K (torch's non-swizzled
``BlockWise1x32`` recipe). A and B may use different formats (``e4m3`` x ``e2m1`` is
a valid pairing). Accumulation is fp32 in the MFMA; ``out`` is bf16 or fp16 with unit
stride along N; ``bias`` (``addmm``) is a length-N row vector of the output dtype.

Layouts (how the scales are laid out; A and B are K-contiguous in both):

* ``"nt"``: the above, one scale row per row of A and of B.
* ``"nt_b32"``: B's scales per 32x32 block (vLLM's MXFP8 linear,
  ``rocm_mxfp8_block32_gemm``): ``scale_b`` is ``(ceil(N / 32), K / 32)``, unit stride
  along K, and weight row ``n`` uses scale row ``n // 32`` (the kernel computes the
  lane's ``(row >> 5) * ld_sb`` once, outside the main loop: the same instructions per
  step as ``"nt"``). ``scale_a`` is per row as in ``"nt"``. Served for ``e4m3 x e4m3``
  (bf16 and fp16 out; :data:`LAYOUT_DTYPES`).

Kernel design (the dense template's engineering, the same loaders): a workgroup of
``waves_m * waves_n`` wave64 waves computes a ``tile_m x tile_n`` output tile; each K
step of ``tile_k`` elements stages A's and B's bytes in LDS with direct-to-LDS buffer
loads (``buffer_load_dwordx4 ... lds``, no registers, no ``ds_write``) into unpadded
rows whose 16-byte chunks are XOR-swizzled per row, with ``stages`` buffers in flight.
Each wave issues ``v_mfma_scale_f32_16x16x128_f8f6f4`` (hardware block scaling: the
scales never touch a VALU). Operands travel through the data path as 16-bit units
(bf16 views of the bytes), so the loaders are shared with ``gemm_dense`` unchanged.

K order inside a step: with ``R = tile_k / 128`` MFMAs per 16x16 block and step, MFMA
``kk`` gives the lanes of lane group ``g`` (lanes ``16 g .. 16 g + 15``) the K block
``g * R + kk`` of the step (instead of ``4 kk + g``). The sum over K is the same, but each
lane's data over a step is one contiguous run (read with ``R`` or ``2R`` 16-byte LDS
reads) and its ``R`` scale bytes are adjacent: one global load of ``R`` bytes per 16-row
block and step, issued with that step's data loads and waited for by the same
``s_waitcnt``; MFMA ``kk`` picks byte ``kk`` with ``op_sel``. The scales of the steps in
flight are held in registers (``stages - 1`` sets).

M and N tails are handled in the kernel (clamped loads, predicated stores); K must be a
multiple of ``tile_k`` (hence of 128) with at least ``stages - 1`` steps. See
:func:`divisibility_requirements`.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from . import gemm_dense as _dense

__all__ = ["MxConfig", "build_gemm", "kernel_launch", "launcher_args", "make_launcher"]

# format -> (bits per element, the MFMA's cbsz/blgp format code)
FORMATS = {"e4m3": (8, 0), "e5m2": (8, 1), "e2m1": (4, 4)}
OUT_DTYPES = ("bf16", "fp16")
# compile-check variants: every format pairing with bf16 out, and fp16 out for the two
# main formats
DTYPES = (*(f"{a}x{b}_bf16" for a in FORMATS for b in FORMATS), "e4m3xe4m3_fp16",
          "e2m1xe2m1_fp16")
LAYOUTS = ("nt", "nt_b32")
B_SCALE_ROWS = {"nt": 1, "nt_b32": 32}  # rows of B sharing one scale row
# the dtypes compile-check enumerates per layout: "nt" builds any format pairing (DTYPES
# are its compile-check sample), "nt_b32" only these (vLLM's MXFP8 linear; others raise)
LAYOUT_DTYPES = {"nt": DTYPES, "nt_b32": ("e4m3xe4m3_bf16", "e4m3xe4m3_fp16")}
OPS = ("mm", "addmm")
ARCHS = ("gfx950",)
BLOCK = 32  # K elements per E8M0 scale
MFMA_K = 128  # K elements of one v_mfma_scale_f32_16x16x128_f8f6f4
MFMA_MNEMONIC = "v_mfma_scale_f32_16x16x128_f8f6f4"
UNIT_BYTES = 2  # the data path moves 16-bit units
VEC = _dense.VEC  # units per 16-byte load
WAVE_SIZE = _dense.WAVE_SIZE

TILE_MN_CHOICES = (16, 32, 64, 128, 256)
TILE_K_CHOICES = (128, 256, 512)
WAVES_CHOICES = (1, 2, 4)
STAGES_CHOICES = (1, 2, 3, 4)
GROUP_M_CHOICES = (1, 4, 8, 16)
MAX_WAVES = _dense.MAX_WAVES
LDS_LIMIT_BYTES = 160 * 1024  # gfx950
MAX_SPAN_UNITS = 2**31 - 1  # offsets are computed in int32, in 16-bit units


def parse_dtype(dtype: str) -> tuple[str, str, str]:
    """``"<a format>x<b format>_<out>"`` (e.g. ``e4m3xe2m1_bf16``) -> the three names."""
    try:
        formats, out = dtype.rsplit("_", 1)
        fmt_a, fmt_b = formats.split("x")
    except ValueError:
        raise ValueError(f"MX dtype {dtype!r} is not '<a format>x<b format>_<out dtype>'"
                         ) from None
    for name, value, allowed in (("A format", fmt_a, FORMATS), ("B format", fmt_b, FORMATS),
                                 ("out dtype", out, OUT_DTYPES)):
        if value not in allowed:
            raise ValueError(f"{name} {value!r} not in {tuple(allowed)} (dtype {dtype!r})")
    return fmt_a, fmt_b, out


def make_dtype(fmt_a: str, fmt_b: str, out: str = "bf16") -> str:
    dtype = f"{fmt_a}x{fmt_b}_{out}"
    parse_dtype(dtype)
    return dtype


@dataclass(frozen=True)
class MxConfig(_dense.TileConfig):
    """One point of the MX GEMM search space (all fields are compile-time). ``tile_k``
    counts K elements (not bytes)."""

    tile_k: int = 256

    CHOICES: ClassVar[dict[str, tuple[int, ...]]] = {
        "tile_m": TILE_MN_CHOICES, "tile_n": TILE_MN_CHOICES, "tile_k": TILE_K_CHOICES,
        "waves_m": WAVES_CHOICES, "waves_n": WAVES_CHOICES, "stages": STAGES_CHOICES,
        "group_m": GROUP_M_CHOICES,
    }

    @property
    def mfmas_per_step(self) -> int:
        """``R``: MFMAs per 16x16 output block and K step."""
        return self.tile_k // MFMA_K

    def operand_vectors(self, rows: int) -> tuple[int, str]:
        """The narrowest format (4-bit) must still fill whole 16-byte loads per thread."""
        return rows * self.tile_k * 4 // 8 // 16, f"{rows}x{self.tile_k} 4-bit elements"


GemmConfig = MxConfig  # the name the plugin's generic template code looks for


def tile_units(config: MxConfig, fmt: str) -> int:
    """16-bit units of one row of a K step of an operand in format ``fmt``."""
    return config.tile_k * FORMATS[fmt][0] // 16


def lds_bytes(config: MxConfig, dtype: str) -> int:
    """Static LDS the kernel allocates (exact)."""
    fmt_a, fmt_b, _ = parse_dtype(dtype)
    units = config.tile_m * tile_units(config, fmt_a) + config.tile_n * tile_units(config, fmt_b)
    return config.stages * units * UNIT_BYTES


def loads_per_thread(config: MxConfig, dtype: str) -> tuple[int, int]:
    """16-byte direct-to-LDS loads per thread and K step for (A, B)."""
    fmt_a, fmt_b, _ = parse_dtype(dtype)
    per = config.num_threads * VEC
    return (config.tile_m * tile_units(config, fmt_a) // per,
            config.tile_n * tile_units(config, fmt_b) // per)


def resource_reason(config: MxConfig, dtype: str, arch: str) -> str | None:
    """Why ``config`` cannot be built for ``dtype`` on ``arch`` (None when it can)."""
    if arch not in ARCHS:
        return (f"{arch} has no scaled MFMA (v_mfma_scale_f32_*_f8f6f4 is CDNA4, gfx950, "
                "only)")
    lds = lds_bytes(config, dtype)
    if lds > LDS_LIMIT_BYTES:
        return f"LDS {lds} bytes > {LDS_LIMIT_BYTES} on {arch}"
    return None


def divisibility_requirements(config: MxConfig, op: str, layout: str) -> dict[str, Any]:
    """Shape and alignment constraints a problem must meet for this kernel.

    Keys: ``k_multiple`` (K elements), ``k_min``, ``n_multiple``, ``ld_multiple_bytes``
    (row strides of A and B in bytes), ``scale_ld_multiple`` (row strides of the scales,
    bytes), ``base_align_bytes`` (A, B, out, bias), ``scale_base_align_bytes``,
    ``out_ld_multiple`` (elements), ``max_span_bytes``.
    """
    _check_variant(layout=layout, op=op)
    return {
        "k_multiple": config.tile_k,
        "k_min": config.tile_k * max(1, config.stages - 1),
        "n_multiple": 4,  # each lane stores 4 consecutive outputs of a row
        "ld_multiple_bytes": 16,
        "scale_ld_multiple": 4,
        "base_align_bytes": 16,
        "scale_base_align_bytes": 4,
        "out_ld_multiple": 4,
        "max_span_bytes": MAX_SPAN_UNITS * UNIT_BYTES,
    }


def _check_variant(*, dtype: str = "e4m3xe4m3_bf16", layout: str = "nt", op: str = "mm",
                   arch: str = "gfx950") -> None:
    parse_dtype(dtype)
    for name, value, allowed in (("layout", layout, LAYOUTS), ("op", op, OPS),
                                 ("arch", arch, ARCHS)):
        if value not in allowed:
            raise ValueError(f"{name}={value!r} not in {allowed}")
    if layout != "nt" and dtype not in LAYOUT_DTYPES[layout]:
        raise ValueError(f"layout {layout!r} serves dtypes {LAYOUT_DTYPES[layout]}, not "
                         f"{dtype!r}")


# ---------------------------------------------------------------------------
# Kernel generation
# ---------------------------------------------------------------------------


def _make_kernel(config: MxConfig, dtype: str, op: str, layout: str) -> Callable:
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import const_expr, range_constexpr, rocdl

    fmt_a, fmt_b, out_name = parse_dtype(dtype)
    bits_a, code_a = FORMATS[fmt_a]
    bits_b, code_b = FORMATS[fmt_b]
    tm, tn, tk = config.tile_m, config.tile_n, config.tile_k
    wm, wn = tm // config.waves_m, tn // config.waves_n
    rep_m, rep_n = wm // 16, wn // 16
    waves_n = config.waves_n
    nthreads = config.num_threads
    stages = config.stages
    group_m = config.group_m
    reps = config.mfmas_per_step  # R
    tka, tkb = tile_units(config, fmt_a), tile_units(config, fmt_b)
    a_stage, b_stage = tm * tka, tn * tkb
    loads_a, loads_b = loads_per_thread(config, dtype)
    scale_bytes = reps  # per lane, 16-row block and step
    blocks_per_step = tk // BLOCK
    has_bias = op == "addmm"
    b_block_rows = B_SCALE_ROWS[layout]  # 1 (per row) or 32 (per 32x32 block)
    b_row_shift = b_block_rows.bit_length() - 1
    unit = fx.BFloat16
    out_elem = fx.BFloat16 if out_name == "bf16" else fx.Float16
    chunk_type = fx.Vector[unit, VEC]
    acc_type = fx.Vector[fx.Float32, 4]
    scale_type = {1: fx.Uint8, 2: fx.Int16, 4: fx.Int32}[scale_bytes]

    def chunks_per_mfma(bits: int) -> int:
        return MFMA_K // 4 * bits // 8 // 16  # 16-byte chunks a lane holds per MFMA

    @flyc.kernel
    def mx_kernel(
        A: fx.Tensor,
        B: fx.Tensor,
        C: fx.Tensor,
        BIAS: fx.Tensor,
        SA: fx.Tensor,
        SB: fx.Tensor,
        M: fx.Int32,
        N: fx.Int32,
        K: fx.Int32,
        lda: fx.Int32,
        ldb: fx.Int32,
        ldc: fx.Int32,
        ld_sa: fx.Int32,
        ld_sb: fx.Int32,
    ):
        tid = fx.thread_idx.x
        lane = tid % WAVE_SIZE
        wave = tid // WAVE_SIZE
        wave_m = wave // waves_n
        wave_n = wave % waves_n
        lane_row = lane % 16
        group = lane // 16

        pid = fx.block_idx.x
        num_pid_n = (N + (tn - 1)) // tn
        num_pid_m = (M + (tm - 1)) // tm
        pid_m, pid_n = _dense.tile_of_workgroup(pid, num_pid_m, num_pid_n, group_m)
        m0 = pid_m * tm
        n0 = pid_n * tn
        m_left = M - m0
        n_left = N - n0
        k_steps = K // tk

        atom = fx.make_copy_atom(fx.rocdl.cdna4.BufferLoadAsyncLDS128b(), 128)
        a_src = fx.get_iter(fx.rocdl.make_buffer_tensor(A, max_size=True)) + m0 * lda
        b_src = fx.get_iter(fx.rocdl.make_buffer_tensor(B, max_size=True)) + n0 * ldb
        wave_base = fx.Int32(rocdl.readfirstlane(
            fx.Int64.ir_type, fx.Int64(wave * (WAVE_SIZE * VEC * UNIT_BYTES)))) // UNIT_BYTES

        lds = (
            fx.SharedAllocator()
            .allocate(fx.Array[unit, stages * (a_stage + b_stage), 16])
            .peek()
            .ptr
        )
        sa0 = lds
        sb0 = lds + stages * a_stage

        # The lane's scale bytes of each 16-row block: row (clamped into the matrix) and
        # its first byte; a step adds blocks_per_step. With B's scales per 32x32 block
        # (nt_b32) B's scale row is the clamped row >> 5 (computed once, loop invariant).
        sa_src = fx.get_iter(fx.rocdl.make_buffer_tensor(SA, max_size=True))
        sb_src = fx.get_iter(fx.rocdl.make_buffer_tensor(SB, max_size=True))

        def scale_offsets(row0, extent, ld, blocks, shift=0):
            offs = []
            for blk in range_constexpr(blocks):
                row = row0 + blk * 16 + lane_row
                row = (row < extent).select(row, extent - 1)
                if const_expr(shift > 0):
                    row = row >> shift
                offs.append(row * ld + group * scale_bytes)
            return offs

        sa_offs = scale_offsets(m0 + wave_m * wm, M, ld_sa, rep_m)
        sb_offs = scale_offsets(n0 + wave_n * wn, N, ld_sb, rep_n, b_row_shift)

        # Scale loads take the lane's (loop invariant) byte offset in a VGPR and the
        # step's (wave-uniform) one in the buffer load's scalar offset: no per-load VALU.
        sa_rsrc, sb_rsrc = fx.rocdl.get_buffer_rsrc(sa_src), fx.rocdl.get_buffer_rsrc(sb_src)

        def load_scale(rsrc, offset, k_block):
            value = scale_type(rocdl.raw_ptr_buffer_load(
                scale_type.ir_type, rsrc, fx.Int32(offset).ir_value(),
                fx.Int32(k_block).ir_value(), 0))
            if const_expr(scale_bytes == 4):
                return value
            return value.to(fx.Int32)  # zero-extended: the high bytes are not selected

        def load_scales(step):
            k_block = step * blocks_per_step
            return ([load_scale(sa_rsrc, off, k_block) for off in sa_offs]
                    + [load_scale(sb_rsrc, off, k_block) for off in sb_offs])

        def lane_offsets(row0, tku, bits):
            """Per MFMA kk of a step, the unit offsets (in a stage) of the lane's chunks
            of its first 16-row block; block ``b`` adds ``b * 16 * tku``."""
            row = row0 + lane_row
            swizzle = row % _dense.swizzle_period(tku)
            cpm = chunks_per_mfma(bits)
            return [[row * tku + (((group * reps + kk) * cpm + c) ^ swizzle) * VEC
                     for c in range(cpm)] for kk in range(reps)]

        a_offs = lane_offsets(wave_m * wm, tka, bits_a)
        b_offs = lane_offsets(wave_n * wn, tkb, bits_b)

        def fragment(base, offs, block, tku):
            parts = [fx.ptr_load(base + (off + block * 16 * tku), chunk_type).bitcast(fx.Int32)
                     for off in offs]
            if const_expr(len(parts) == 1):
                return parts[0]
            return parts[0].shuffle(parts[1], list(range(8)))

        def issue(step, slot):
            k0a, k0b = step * tka, step * tkb
            _dense._async_load_tile(fx, atom, a_src, m_left, k0a, lda, tka, nthreads, tid,
                                    wave_base, sa0 + slot * a_stage, loads_a)
            _dense._async_load_tile(fx, atom, b_src, n_left, k0b, ldb, tkb, nthreads, tid,
                                    wave_base, sb0 + slot * b_stage, loads_b)
            return load_scales(step)

        a_reads, b_reads = chunks_per_mfma(bits_a), chunks_per_mfma(bits_b)

        def compute_slot(acc, slot, scales):
            """The MFMAs of one staged K step: per MFMA kk, B's fragments and A's first,
            then A's next fragment read while a row of MFMAs runs."""
            out = list(acc)
            sa, sb = sa0 + slot * a_stage, sb0 + slot * b_stage
            for kk in range_constexpr(reps):
                a_next = fragment(sa, a_offs[kk], 0, tka)
                b_frags = [fragment(sb, b_offs[kk], j, tkb) for j in range_constexpr(rep_n)]
                for i in range_constexpr(rep_m):
                    a_frag = a_next
                    if const_expr(i + 1 < rep_m):
                        a_next = fragment(sa, a_offs[kk], i + 1, tka)
                    for j in range_constexpr(rep_n):
                        # B first: each lane ends up with 4 consecutive output columns
                        out[i * rep_n + j] = fx.Vector(rocdl.mfma_scale_f32_16x16x128_f8f6f4(
                            acc_type.ir_type,
                            [b_frags[j], a_frag, out[i * rep_n + j], code_b, code_a,
                             kk, scales[rep_m + j], kk, scales[i]]))
            return out

        def schedule_hints():
            """The step's direct-to-LDS loads first; then per MFMA kk the fragment reads
            the first MFMAs need, and between MFMAs A's next fragment and the scale loads
            of the step issued here (one per MFMA), so the matrix core is never left
            waiting for a cluster of other instructions."""
            rocdl.sched_vmem(loads_a + loads_b)
            for kk in range_constexpr(reps):
                rocdl.sched_dsrd(rep_n * b_reads + a_reads)  # B's fragments and A's first
                vmem = 0
                for i in range_constexpr(rep_m):
                    for j in range_constexpr(rep_n):
                        rocdl.sched_mfma(1)
                        if const_expr(j == 0 and i + 1 < rep_m):
                            rocdl.sched_dsrd(a_reads)  # A's next fragment
                        elif const_expr(kk == 0 and vmem < rep_m + rep_n):
                            rocdl.sched_vmem(1)  # the scale loads, one per MFMA
                            vmem += 1
            rocdl.sched_barrier(0)

        acc = [fx.Vector.filled(4, 0.0, fx.Float32) for _ in range_constexpr(rep_m * rep_n)]
        # The waits count the direct-to-LDS loads only: they stay in program order (they
        # write memory), while the compiler may move the scale loads (register results
        # it waits for itself). At least (stages - 2) * per_step data loads follow step
        # t's, so vmcnt <= that many means step t's data has landed wherever the scale
        # loads were placed.
        per_step = loads_a + loads_b
        if const_expr(stages == 1):
            for step in range(0, k_steps, 1):
                rocdl.s_barrier()
                scales = issue(step, 0)
                rocdl.s_waitcnt(vmcnt=0)
                rocdl.s_barrier()
                acc = compute_slot(acc, 0, scales)
        else:
            # Scales of the steps in flight, oldest first (a FIFO keeps every position
            # static, whatever the loop trip).
            fifo = []
            for s in range_constexpr(stages - 1):
                fifo = fifo + issue(s, s)
            width = rep_m + rep_n
            main_steps = k_steps - (stages - 1)
            unrolled = main_steps // stages * stages
            for base in range(0, unrolled, stages):
                for u in range_constexpr(stages):
                    rocdl.s_waitcnt(vmcnt=(stages - 2) * per_step)
                    rocdl.s_barrier()
                    fresh = issue(base + u + (stages - 1), (u + stages - 1) % stages)
                    acc = compute_slot(acc, u, fifo[:width])
                    fifo = fifo[width:] + fresh
                    schedule_hints()
            for step in range(unrolled, main_steps, 1):
                rocdl.s_waitcnt(vmcnt=(stages - 2) * per_step)
                rocdl.s_barrier()
                fresh = issue(step + (stages - 1), (step + (stages - 1)) % stages)
                acc = compute_slot(acc, step % stages, fifo[:width])
                fifo = fifo[width:] + fresh
            for i in range_constexpr(stages - 1):
                rocdl.s_waitcnt(vmcnt=(stages - 2 - i) * per_step)
                rocdl.s_barrier()
                acc = compute_slot(acc, (k_steps - (stages - 1) + i) % stages, fifo[:width])
                fifo = fifo[width:]

        # Epilogue: lane holds out[row, col:col+4] of each 16x16 block.
        c_ptr = fx.get_iter(C)
        row_base = wave_m * wm + lane_row
        col_base = wave_n * wn + group * 4
        for i in range_constexpr(rep_m):
            for j in range_constexpr(rep_n):
                row = row_base + i * 16
                col = col_base + j * 16
                value = acc[i * rep_n + j]
                if const_expr(has_bias):
                    bias_col = (col < n_left).select(n0 + col, 0)
                    bias_vec = fx.ptr_load(fx.get_iter(BIAS) + bias_col, fx.Vector[out_elem, 4])
                    value = value + bias_vec.to(fx.Float32)
                if (row < m_left) and (col < n_left):
                    fx.ptr_store(value.to(out_elem), c_ptr + ((m0 + row) * ldc + n0 + col))

    @flyc.jit
    def mx_launcher(
        A: fx.Tensor,
        B: fx.Tensor,
        C: fx.Tensor,
        BIAS: fx.Tensor,
        SA: fx.Tensor,
        SB: fx.Tensor,
        M: fx.Int32,
        N: fx.Int32,
        K: fx.Int32,
        lda: fx.Int32,
        ldb: fx.Int32,
        ldc: fx.Int32,
        ld_sa: fx.Int32,
        ld_sb: fx.Int32,
        stream: fx.Stream = fx.Stream(None),  # noqa: B008 (FlyDSL's launcher convention)
    ):
        grid, block = launch_geometry(config, M, N)
        mx_kernel(A, B, C, BIAS, SA, SB, M, N, K, lda, ldb, ldc, ld_sa, ld_sb).launch(
            grid=grid, block=block, stream=stream)

    return mx_launcher


def launch_geometry(config: MxConfig, m, n) -> tuple[tuple, tuple]:
    """``(grid, block)`` of one launch (``m``, ``n`` ints or FlyDSL values)."""
    tiles = ((m + (config.tile_m - 1)) // config.tile_m) * ((n + (config.tile_n - 1))
                                                            // config.tile_n)
    return (tiles, 1, 1), (config.num_threads, 1, 1)


def kernel_launch(config: MxConfig, args: tuple) -> tuple[tuple, tuple, tuple]:
    """What the launcher passes to the kernel for :func:`launcher_args` ``args``:
    ``(kernel_args, grid, block)`` (used to run the compiled kernel in the emulator)."""
    grid, block = launch_geometry(config, args[6], args[7])
    return tuple(args), grid, block


def make_launcher(config: MxConfig, *, dtype: str, layout: str, op: str, arch: str) -> Callable:
    """Build a fresh (uncached) ``@flyc.jit`` launcher; see :func:`build_gemm`."""
    config.validate()
    _check_variant(dtype=dtype, layout=layout, op=op, arch=arch)
    reason = resource_reason(config, dtype, arch)
    if reason:
        raise ValueError(reason)
    return _make_kernel(config, dtype, op, layout)


@functools.lru_cache(maxsize=256)
def _build_cached(config: MxConfig, dtype: str, layout: str, op: str, arch: str) -> Callable:
    return make_launcher(config, dtype=dtype, layout=layout, op=op, arch=arch)


def build_gemm(config: MxConfig, *, dtype: str, layout: str, op: str, arch: str) -> Callable:
    """The ``@flyc.jit`` launcher of one variant (cached); its positional arguments are
    :func:`launcher_args`'s, then an optional ``stream=``."""
    config.validate()
    _check_variant(dtype=dtype, layout=layout, op=op, arch=arch)
    return _build_cached(config, dtype, layout, op, arch)


# ---------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------

_TORCH_FORMATS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float4_e2m1fn_x2": "e2m1"}
_TORCH_OUT = {"bfloat16": "bf16", "float16": "fp16"}


def format_name(tensor) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in _TORCH_FORMATS:
        raise ValueError(f"unsupported MX operand dtype {tensor.dtype}; expected one of "
                         f"{sorted(_TORCH_FORMATS)}")
    return _TORCH_FORMATS[name]


def variant_dtype(a, b, out) -> str:
    """The variant's dtype string for tensors ``a`` (M, K), ``b`` (K, N) and ``out``."""
    name = str(out.dtype).removeprefix("torch.")
    if name not in _TORCH_OUT:
        raise ValueError(f"unsupported output dtype {out.dtype}; expected bfloat16 or float16")
    return make_dtype(format_name(a), format_name(b), _TORCH_OUT[name])


def _units(operand, rows_dim: int):
    """A K-contiguous 2-D MX operand (rows along ``rows_dim``) as a (rows, K units) bf16
    view of the same memory."""
    import torch

    t = operand if rows_dim == 0 else operand.t()
    if t.stride(1) != 1:
        raise ValueError(f"MX operands must be K-contiguous, got strides {tuple(operand.stride())}")
    if t.shape[1] * t.element_size() % 2:
        raise ValueError("an MX operand row must hold a whole number of 16-bit units")
    return t.view(torch.uint8).view(torch.bfloat16)


def _scale_rows(scale, rows: int, blocks: int, name: str, *, exact_rows: bool = False,
                what: str = ""):
    import torch

    if (scale.dim() != 2 or scale.shape[0] < rows or scale.shape[1] < blocks
            or (exact_rows and scale.shape[0] != rows)):
        raise ValueError(f"{name} must be ({rows}, {blocks}) E8M0 scales{what}, got "
                         f"{tuple(scale.shape)}")
    if scale.stride(1) != 1:
        raise ValueError(f"{name} must have unit stride along K")
    return scale.view(torch.uint8)


def logical_k(a) -> int:
    return a.shape[-1] * (2 if format_name(a) == "e2m1" else 1)


def b_scale_rows(n: int, layout: str = "nt") -> int:
    """Rows of ``scale_b`` for ``n`` weight rows: ``n`` ("nt"), ``ceil(n / 32)``
    ("nt_b32")."""
    if layout not in B_SCALE_ROWS:
        raise ValueError(f"layout={layout!r} not in {LAYOUTS}")
    per = B_SCALE_ROWS[layout]
    return (n + per - 1) // per


def launcher_args(a, b, scale_a, scale_b, bias, out, *, layout: str = "nt") -> tuple:
    """Positional arguments of a launcher: ``a`` (M, K) and ``b`` (K, N) MX operands, both
    K-contiguous (e2m1 packed in pairs along K); ``scale_a`` (M, K/32) E8M0; ``scale_b``
    (N, K/32) E8M0 for ``layout="nt"``, or exactly (ceil(N/32), K/32) (one scale per 32x32
    block of the (N, K) weight) for ``layout="nt_b32"``; ``bias`` None or (N,); ``out``
    (M, N), unit stride along N."""
    m, k = a.shape[0], logical_k(a)
    n = b.shape[1]
    if logical_k(b.t()) != k:
        raise ValueError(f"A has K={k}, B has K={logical_k(b.t())}")
    a_units, b_units = _units(a, 0), _units(b, 1)
    sa = _scale_rows(scale_a, m, k // BLOCK, "scale_a")
    blocked = B_SCALE_ROWS.get(layout) == 32
    sb = _scale_rows(scale_b, b_scale_rows(n, layout), k // BLOCK, "scale_b",
                     exact_rows=blocked,
                     what=f" (layout {layout!r}: one per 32x32 block of the ({n}, {k}) "
                          "weight)" if blocked else "")
    if out.stride(-1) != 1:
        raise ValueError(f"out must have unit stride along N, got strides {tuple(out.stride())}")
    if bias is not None and bias.stride(-1) != 1:
        raise ValueError("bias must have unit stride")
    return (a_units, b_units, out, out if bias is None else bias, sa, sb, m, n, k,
            a_units.stride(0), b_units.stride(0), out.stride(0), sa.stride(0), sb.stride(0))


def example_args(config: MxConfig, *, dtype: str, layout: str, op: str) -> tuple:
    """Small CPU placeholder arguments of the variant, for compile-only calls."""
    import torch

    fmt_a, fmt_b, out_name = parse_dtype(dtype)
    m, n, k = config.tile_m, config.tile_n, 2 * config.tile_k

    def operand(rows: int, fmt: str):
        width = k // 2 if fmt == "e2m1" else k
        raw = torch.zeros(rows, width, dtype=torch.uint8)
        return raw.view(getattr(torch, {v: k for k, v in _TORCH_FORMATS.items()}[fmt]))

    out_dtype = torch.bfloat16 if out_name == "bf16" else torch.float16
    a, b = operand(m, fmt_a), operand(n, fmt_b).t()
    scales = [torch.full((rows, k // BLOCK), 127, dtype=torch.uint8)
              for rows in (m, b_scale_rows(n, layout))]
    out = torch.zeros(m, n, dtype=out_dtype)
    bias = torch.zeros(n, dtype=out_dtype) if op == "addmm" else None
    return launcher_args(a, b, scales[0], scales[1], bias, out, layout=layout)


def launch(a, b, scale_a, scale_b, bias, out, config: MxConfig, stream=None, *,
           runner, layout: str = "nt") -> None:
    """Run the kernel on GPU tensors, writing into preallocated ``out`` on ``stream``
    (default: the device's current stream), without host synchronization, through
    ``runner`` (see ``gemm_dense.launch``). ``layout="nt_b32"``: ``scale_b`` is
    (ceil(N/32), K/32), one scale per 32x32 block of the weight (see
    :func:`launcher_args`)."""
    op = "addmm" if bias is not None else "mm"
    variant = _dense.Variant("gemm_mx", config, runner.arch(a), variant_dtype(a, b, out),
                             layout, op)
    runner.run(variant, launcher_args(a, b, scale_a, scale_b, bias, out, layout=layout),
               runner.stream(a, stream), a)


def split_k_reason(config: MxConfig, op: str) -> str | None:
    """The MX kernel has no split-K: every config serves every op."""
    return None
