"""Dense GEMM template for AMD CDNA GPUs written in FlyDSL.

Computes ``out = alpha * (A @ B) + beta * bias`` with fp32 MFMA accumulation and the
output in the input dtype (bf16 or fp16).

Operands (logical shapes; ``bmm`` adds a leading batch dimension to A, B and out):

* ``A`` is ``(M, K)``. Layout letter 0: ``n`` = row-major (``stride(K) == 1``),
  ``t`` = column-major (``stride(M) == 1``).
* ``B`` is ``(K, N)``. Layout letter 1: ``n`` = row-major (``stride(N) == 1``),
  ``t`` = column-major (``stride(K) == 1``, i.e. ``W.T`` of a row-major ``(N, K)`` W).
* ``out`` is ``(M, N)`` with ``stride(N) == 1`` (any row stride).
* ``bias`` (``addmm`` only) is a length-N row vector with unit stride, broadcast over rows.

Inputs are read in place through their strides; nothing is copied or transposed.

``alpha`` and ``beta`` are runtime fp32 kernel arguments: one compiled kernel serves
every value. ``alpha`` scales the product for all ops; ``beta`` is used only by
``addmm``.

Kernel design: a workgroup of ``waves_m * waves_n`` wave64 waves computes a
``tile_m x tile_n`` output tile. Each K step stages a ``tile_m x tile_k`` slice of A and a
``tile_n x tile_k`` slice of B in LDS, in one of two ways:

* gfx950 (every layout): buffer loads go straight from global memory into LDS
  (``buffer_load_dwordx4 ... lds``, no registers, no ``ds_write``). A K-contiguous
  operand lies unpadded with its 16-byte chunks XOR-swizzled per row; an M- or
  N-contiguous one lies as in memory and is read back transposed
  (``ds_read_b64_tr_b16``). ``stages`` (1-4) LDS buffers are in flight; each K step waits for
  its own loads (``s_waitcnt vmcnt``), meets the other waves at one barrier, issues the
  loads of step ``t + stages - 1`` and computes step ``t``; the main loop is unrolled
  by ``stages``.
* gfx942: 16-byte global loads into registers, written to K-contiguous LDS rows padded
  by 8 elements; the loads of step ``t + 1`` are issued before the MFMAs of step ``t``;
  ``stages`` is 1 (single buffer, two barriers per step) or 2 (double buffer, one
  barrier per step).

Each wave owns a ``(tile_m / waves_m) x (tile_n / waves_n)`` sub-tile made of
16x16 MFMA blocks (gfx950: ``v_mfma_f32_16x16x32_{bf16,f16}``; gfx942:
``v_mfma_f32_16x16x16{bf16_1k,f16}``). The MFMA is issued with B as the first operand so
each lane ends up holding 4 consecutive output columns, written with one 8-byte store.
``group_m`` reorders workgroups in groups of ``group_m`` tile rows for L2 reuse.

Split-K (``split_k > 1``, ``mm`` and ``addmm``; for skinny problems whose output tiles are
too few to fill the GPU): workgroup z of ``split_k`` takes one slice of K steps and
writes its fp32 partial tile (alpha and, for split 0 only, the bias already applied) to
slice z of a workspace from torch's caching allocator; one torch sum on the same stream
adds the slices into ``out`` (:func:`split_k_workspace`, :func:`reduce_split_k`). No
atomics, so the result does not depend on the order the workgroups run in.

M and N tails are handled in the kernel (clamped loads, predicated stores); K must be a
multiple of ``tile_k * split_k`` and each split at least ``stages - 1`` K steps long. See
:func:`divisibility_requirements`.

Fused epilogue (``epilogue``: the canonical JSON of an ``EpilogueSpec`` from
``inductor_flydsl/problems/epilogue_spec.py``, ``""`` = none; ``mm`` and ``addmm`` without split-K,
see :func:`epilogue_reason`): a compile-time constant of the kernel. Each lane applies it
to its 4 fp32 outputs after ``alpha * acc + beta * bias``, inside the store's bounds
check, loading the operands there (a ``col`` vector's 4 elements, a ``row`` vector's one,
a ``tile``'s 4 through its own row stride), and stores in the spec's ``out_dtype`` (fp32:
one 16-byte store). The fused kernel takes 4 operand slots and their row strides after the
plain kernel's arguments; the plain kernel is the same code traced without them, so its
ISA is unchanged, and the main K loop is the same in both. The math uses no device
library (error notes in ``fused_epilogue.py``).
"""

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, NamedTuple

from .fused_epilogue import apply_epilogue

DTYPES = ("bf16", "fp16")
LAYOUTS = ("nn", "nt", "tn", "tt")
OPS = ("mm", "addmm", "bmm")
GROUPED_OP = "grouped_mm"  # built by templates/gemm_grouped.py from this kernel
ARCHS = ("gfx950", "gfx942")

TILE_MN_CHOICES = (16, 32, 64, 128, 256)
TILE_K_CHOICES = (32, 64, 128, 256)
WAVES_CHOICES = (1, 2, 4)
STAGES_CHOICES = (1, 2, 3, 4, 5, 6, 7)
DEEP_STAGES_MAX_TILE = 64 * 64  # more than 4 stages: small tiles only (decode)
REGISTER_PATH_MAX_STAGES = 2  # gfx942: single or double buffer
GROUP_M_CHOICES = (1, 4, 8, 16)
SPLIT_K_CHOICES = (1, 2, 4, 8, 16)
VMCNT_MAX = 63  # gfx9's vmcnt field: loads a wait can leave in flight
MAX_WAVES = 8

WAVE_SIZE = 64
VEC = 8  # elements per 16-byte global load
LDS_PAD = 8  # elements of padding per LDS row
ELEM_BYTES = 2
MFMA_K = {"gfx950": 32, "gfx942": 16}
MFMA_MNEMONIC = {
    ("gfx950", "bf16"): "v_mfma_f32_16x16x32_bf16",
    ("gfx950", "fp16"): "v_mfma_f32_16x16x32_f16",
    ("gfx942", "bf16"): "v_mfma_f32_16x16x16_bf16",
    ("gfx942", "fp16"): "v_mfma_f32_16x16x16_f16",
}
MAX_SPAN_ELEMENTS = 2**31 - 1  # element offsets are computed in int32
MAX_WORKSPACE_BYTES = 256 * 2**20  # a split-K launch's fp32 partials, at most


@dataclass(frozen=True)
class TileConfig:
    """What every template's config is (dense, grouped, MX): a workgroup of ``waves_m x
    waves_n`` wave64 waves computes a ``tile_m x tile_n`` output tile, ``tile_k`` K elements
    per step with ``stages`` LDS buffers in flight, workgroups ordered in groups of
    ``group_m`` tile rows. A template's config class adds its own fields and sets
    ``CHOICES`` (the allowed values of every field) and :meth:`operand_vectors`."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    waves_m: int = 2
    waves_n: int = 2
    stages: int = 2
    group_m: int = 8

    CHOICES: ClassVar[dict[str, tuple[int, ...]]] = {}

    @property
    def num_threads(self) -> int:
        return self.waves_m * self.waves_n * WAVE_SIZE

    def operand_vectors(self, rows: int) -> tuple[int, str]:
        """16-byte vectors in a ``rows x tile_k`` operand tile, and how to name the tile."""
        return rows * self.tile_k // VEC, f"{rows}x{self.tile_k}"

    def validate(self) -> None:
        """Raise ValueError unless this config can be turned into a kernel."""
        kind = type(self).__name__
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int:
                raise ValueError(f"{kind}.{f.name} must be an int, got {value!r}")
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{kind}.{name}={getattr(self, name)} not in {allowed}")
        if self.waves_m * self.waves_n > MAX_WAVES:
            raise ValueError(f"waves_m * waves_n = {self.waves_m * self.waves_n} > {MAX_WAVES}")
        for name, tile, waves in (("m", self.tile_m, self.waves_m),
                                  ("n", self.tile_n, self.waves_n)):
            if tile % (16 * waves):
                raise ValueError(
                    f"tile_{name}={tile} is not a multiple of 16 * waves_{name}={waves}")
        for operand, rows in (("A", self.tile_m), ("B", self.tile_n)):
            vectors, tile = self.operand_vectors(rows)
            if vectors % self.num_threads:
                raise ValueError(
                    f"{operand} tile ({tile}) has {vectors} 16-byte vectors, "
                    f"not a multiple of {self.num_threads} threads"
                )

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Any:
        """Build and validate a config from a plain dict (unknown keys are rejected)."""
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__} JSON must be a dict, got {type(data).__name__}")
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown {cls.__name__} keys: {sorted(unknown)}")
        config = cls(**data)
        config.validate()
        return config


@dataclass(frozen=True)
class GemmConfig(TileConfig):
    """One point of the dense GEMM search space (all fields are compile-time).

    ``reduce_in_launch`` (split-K only): 1 = the split-K partials are added inside the
    same launch by the last-arriving wave of each output sub-tile (an arrival counter per
    sub-tile), 0 = by a torch sum after the kernel. Both are deterministic: the partials
    are added in slice order either way. Left out of the JSON when 0, so every config
    made before it keeps its key."""

    split_k: int = 1
    reduce_in_launch: int = 0

    CHOICES: ClassVar[dict[str, tuple[int, ...]]] = {
        "tile_m": TILE_MN_CHOICES, "tile_n": TILE_MN_CHOICES, "tile_k": TILE_K_CHOICES,
        "waves_m": WAVES_CHOICES, "waves_n": WAVES_CHOICES, "stages": STAGES_CHOICES,
        "group_m": GROUP_M_CHOICES, "split_k": SPLIT_K_CHOICES, "reduce_in_launch": (0, 1),
    }

    def validate(self) -> None:
        super().validate()
        if self.reduce_in_launch and self.split_k == 1:
            raise ValueError("reduce_in_launch=1 needs split_k > 1")
        if self.stages > 4 and self.tile_m * self.tile_n > DEEP_STAGES_MAX_TILE:
            raise ValueError(f"stages={self.stages}: more than 4 stages only for tiles of at "
                             f"most {DEEP_STAGES_MAX_TILE} elements (decode)")
        loads = sum(loads_per_thread(self))
        if (self.stages - 2) * loads > VMCNT_MAX:
            raise ValueError(f"stages={self.stages}: {(self.stages - 2) * loads} loads in "
                             f"flight per wait, over vmcnt's {VMCNT_MAX}")

    def to_json(self) -> dict[str, int]:
        data = asdict(self)
        if not data["reduce_in_launch"]:
            del data["reduce_in_launch"]
        return data


def tile_of_workgroup(pid, num_pid_m, num_pid_n, group_m: int):
    """``(pid_m, pid_n)``: the output tile workgroup ``pid`` computes. With ``group_m >
    1`` workgroups go down ``group_m`` tile rows before moving right (L2 reuse of B);
    every template's kernel calls this (traced values in, traced values out)."""
    if group_m > 1:
        group_width = num_pid_n * group_m
        first_m = pid // group_width * group_m
        rows_left = num_pid_m - first_m
        group_rows = (rows_left < group_m).select(rows_left, group_m)
        return first_m + pid % group_width % group_rows, pid % group_width // group_rows
    return pid // num_pid_n, pid % num_pid_n


def uses_async_lds(layout: str, arch: str) -> bool:
    """Whether the kernel loads straight into unpadded LDS (gfx950, every layout); gfx942
    stages loads through registers into padded LDS rows."""
    _check_variant(layout=layout, arch=arch)
    return arch == "gfx950"


def lds_bytes(config: GemmConfig, layout: str, arch: str) -> int:
    """Static LDS the kernel allocates for ``config`` (exact, the compiler adds nothing)."""
    pad = 0 if uses_async_lds(layout, arch) else LDS_PAD
    return config.stages * (config.tile_m + config.tile_n) * (config.tile_k + pad) * ELEM_BYTES


def loads_per_thread(config: GemmConfig) -> tuple[int, int]:
    """Number of 16-byte global loads per thread and K step for (A, B)."""
    per = config.num_threads * VEC
    return config.tile_m * config.tile_k // per, config.tile_n * config.tile_k // per


def divisibility_requirements(config: GemmConfig, op: str, layout: str) -> dict[str, Any]:
    """Shape and alignment constraints a problem must meet for this kernel.

    With ``split_k > 1`` K is cut into ``split_k`` equal slices of whole K steps, so K
    must be a multiple of ``tile_k * split_k``.

    Keys: ``m_multiple``/``n_multiple``/``k_multiple`` (the extent must be a multiple),
    ``k_min`` (smallest K), ``ld_multiple`` (every non-unit stride of A, B and out, and
    the batch strides, in elements), ``base_align_bytes`` (data pointers of A, B, out
    and bias), ``max_span_elements`` (largest element offset reachable in any operand,
    batch included), ``out_unit_stride_n`` and ``bias_unit_stride`` (bool).
    """
    _check_variant(layout=layout, op=op)
    a_col_major, b_row_major = layout[0] == "t", layout[1] == "n"
    k_slice = config.tile_k * config.split_k  # every split gets the same whole K steps
    return {
        "m_multiple": VEC if a_col_major else 1,
        "n_multiple": VEC,
        "k_multiple": k_slice,
        "k_min": k_slice * max(1, config.stages - 1),
        "ld_multiple": VEC,
        "base_align_bytes": VEC * ELEM_BYTES,
        "max_span_elements": MAX_SPAN_ELEMENTS,
        "out_unit_stride_n": True,
        "bias_unit_stride": op == "addmm",
        "vector_loads_along": {"A": "M" if a_col_major else "K", "B": "N" if b_row_major else "K"},
    }


def stages_reason(config: GemmConfig, arch: str) -> str | None:
    """Why ``config`` cannot be built for ``arch`` because of its pipeline depth: gfx942
    stages through registers with one or two LDS buffers; gfx950's direct-to-LDS
    pipeline takes any depth."""
    if arch == "gfx942" and config.stages > REGISTER_PATH_MAX_STAGES:
        return (f"stages={config.stages}: gfx942's register-staged pipeline has at most "
                f"{REGISTER_PATH_MAX_STAGES} stages")
    return None


def split_k_reason(config: GemmConfig, op: str) -> str | None:
    """Why ``config`` cannot serve ``op`` (None when it can): split-K partials are kept
    for one output matrix, so ``bmm`` takes ``split_k == 1`` only."""
    if config.split_k > 1 and op == "bmm":
        return f"split_k={config.split_k} is for mm and addmm, not bmm"
    return None


EPILOGUE_SLOTS = 4  # operand tensors a fused kernel takes (epilogue_spec.MAX_OPERANDS)


def parse_epilogue(epilogue: str):
    """The :class:`~inductor_flydsl.problems.epilogue_spec.EpilogueSpec` of an epilogue's canonical
    JSON text, None for ``""`` (no epilogue); ValueError (``InvalidEpilogue``) if invalid."""
    if not epilogue:
        return None
    from inductor_flydsl.problems.epilogue_spec import EpilogueSpec

    return EpilogueSpec.from_json(epilogue)


def epilogue_reason(config: GemmConfig, *, op: str, epilogue: str) -> str | None:
    """Why ``config`` cannot serve ``op`` with the fused ``epilogue`` (canonical JSON text
    of an ``EpilogueSpec``; ``""`` = none, always fine); None when it can.

    Refused: an invalid spec; split-K (each split holds a partial sum, and a nonlinear
    epilogue needs the whole one); ``bmm`` and grouped GEMMs (their operands would need a
    batch or group offset: not done yet). Any operand and output dtype of the spec is
    fine (fp32 loads and a 16-byte store for a float32 output)."""
    if not epilogue:
        return None
    try:
        parse_epilogue(epilogue)
    except ValueError as exc:
        return f"invalid epilogue: {exc}"
    if config.split_k > 1:
        return (f"split_k={config.split_k}: an epilogue needs the whole K sum, a split "
                "writes a partial one")
    if op not in ("mm", "addmm"):
        return f"op={op}: fused epilogues serve mm and addmm only (not yet bmm or grouped)"
    return None


def _check_variant(
    *, dtype: str = "bf16", layout: str = "nn", op: str = "mm", arch: str = "gfx950"
) -> None:
    for name, value, allowed in (
        ("dtype", dtype, DTYPES),
        ("layout", layout, LAYOUTS),
        ("op", op, OPS),
        ("arch", arch, ARCHS),
    ):
        if value not in allowed:
            raise ValueError(f"{name}={value!r} not in {allowed}")


# ---------------------------------------------------------------------------
# Kernel generation
# ---------------------------------------------------------------------------


def _load_tile(
    fx, base, extent, row0, k0, ld, k_contiguous, rows, tile_k, nthreads, tid, vec_type, count
):
    """Issue ``count`` 16-byte global loads of a ``rows x tile_k`` operand tile.

    ``base`` points at element (row 0, k 0) of the operand; ``extent`` is the number of
    valid rows (M or N). Rows past the extent are clamped to valid memory: they only
    feed output rows/columns that are never stored.
    """
    vectors = []
    for j in range(count):
        idx = tid + j * nthreads
        if k_contiguous:
            row = row0 + idx // (tile_k // VEC)
            k = k0 + idx % (tile_k // VEC) * VEC
            row = (row < extent).select(row, extent - 1)
            offset = row * ld + k
        else:
            k = k0 + idx // (rows // VEC)
            row = row0 + idx % (rows // VEC) * VEC
            row = (row < extent - VEC).select(row, extent - VEC)
            offset = k * ld + row
        vectors.append(fx.ptr_load(base + offset, vec_type))
    return vectors


def swizzle_period(tile_k: int) -> int:
    """Rows after which the XOR swizzle of a K-contiguous LDS tile repeats: the chunks per
    row, at most 16, so a lane's swizzle is the same in every 16-row MFMA block."""
    return min(tile_k // VEC, 16)


def _async_load_tile(fx, atom, src, extent, k0, ld, tile_k, nthreads, tid, wave_base, lds, count):
    """Direct-to-LDS loads (gfx950) of a K-contiguous ``rows x tile_k`` tile.

    LDS holds the tile unpadded, row after row, as 16-byte chunks whose position in the
    row is XOR-swizzled: logical chunk ``c`` of row ``r`` sits at ``c ^ (r % period)``
    (:func:`swizzle_period`).
    The hardware writes lane ``l``'s 16 bytes at the wave's LDS base (``wave_base``, wave
    uniform) plus ``16 * l``, so each lane loads the logical chunk that belongs at its
    physical position (the swizzle is its own inverse). Rows past ``extent`` are clamped:
    they only feed outputs that are never stored.
    """
    chunks = tile_k // VEC
    period = swizzle_period(tile_k)
    step_src = src + k0  # wave-uniform; the per-lane part below is loop invariant
    for j in range(count):
        p = tid + j * nthreads
        row = p // chunks
        chunk = (p % chunks) ^ (row % period)
        row = (row < extent).select(row, extent - 1)
        dst = lds + (wave_base + j * nthreads * VEC)
        fx.copy_atom_call(atom,
                          fx.make_view(step_src + (row * ld + chunk * VEC), fx.make_layout(1, 1)),
                          fx.make_view(dst, fx.make_layout(1, 1)))


def _async_load_tile_mn(fx, atom, src, extent, k0, ld, rows, nthreads, tid, wave_base, lds,
                        count):
    """Direct-to-LDS loads (gfx950) of an M- or N-contiguous ``tile_k x rows`` tile, kept
    as it lies in memory: K row after K row of ``rows`` contiguous elements. A vector
    past ``extent`` is clamped to the last full vector (its rows feed no stored output).
    """
    chunks = rows // VEC
    step_src = src + k0 * ld  # wave-uniform; the per-lane part below is loop invariant
    for j in range(count):
        p = tid + j * nthreads
        k = p // chunks
        row = p % chunks * VEC
        row = (row < extent - VEC).select(row, extent - VEC)
        dst = lds + (wave_base + j * nthreads * VEC)
        fx.copy_atom_call(atom, fx.make_view(step_src + (k * ld + row), fx.make_layout(1, 1)),
                          fx.make_view(dst, fx.make_layout(1, 1)))


def _store_tile(fx, lds, vectors, k_contiguous, rows, tile_k, nthreads, tid):
    """Write loaded vectors into an LDS tile stored as K-contiguous padded rows."""
    ldk = tile_k + LDS_PAD
    for j, vec in enumerate(vectors):
        idx = tid + j * nthreads
        if k_contiguous:
            row = idx // (tile_k // VEC)
            k = idx % (tile_k // VEC) * VEC
            fx.ptr_store(vec, lds + (row * ldk + k))
        else:
            k = idx // (rows // VEC)
            row = idx % (rows // VEC) * VEC
            for e in range(VEC):
                fx.ptr_store(vec[e], lds + ((row + e) * ldk + k))


def _make_kernel(config: GemmConfig, dtype: str, layout: str, op: str, arch: str,
                 epilogue: str = "") -> Callable:
    import flydsl.expr as fx
    from flydsl.compiler.ast_rewriter import ASTRewriter
    from flydsl.expr import const_expr, range_constexpr, rocdl

    spec = parse_epilogue(epilogue)

    tm, tn, tk = config.tile_m, config.tile_n, config.tile_k
    wm, wn = tm // config.waves_m, tn // config.waves_n
    rep_m, rep_n = wm // 16, wn // 16
    waves_n = config.waves_n
    nthreads = config.num_threads
    stages = config.stages
    group_m = config.group_m
    split_k = config.split_k
    reduce_here = split_k > 1 and bool(config.reduce_in_launch)
    waves = config.waves_m * config.waves_n
    # gfx950 NT: both operands K-contiguous -> direct-to-LDS loads into swizzled LDS.
    use_async = uses_async_lds(layout, arch)
    ldk = tk if use_async else tk + LDS_PAD
    a_stage, b_stage = tm * ldk, tn * ldk
    loads_a, loads_b = loads_per_thread(config)
    a_k_contig = layout[0] == "n"
    b_k_contig = layout[1] == "t"
    has_bias = op == "addmm"
    batched = op == "bmm"
    grouped = op == GROUPED_OP
    mfma_k = MFMA_K[arch]
    k_per_lane = mfma_k // 4
    elem = fx.BFloat16 if dtype == "bf16" else fx.Float16
    vec_type = fx.Vector[elem, VEC]
    frag_type = fx.Vector[elem, k_per_lane]
    acc_type = fx.Vector[fx.Float32, 4]
    if arch == "gfx950":
        mfma_op = rocdl.mfma_f32_16x16x32_bf16 if dtype == "bf16" else rocdl.mfma_f32_16x16x32_f16
    else:
        mfma_op = rocdl.mfma_f32_16x16x16bf16_1k if dtype == "bf16" else rocdl.mfma_f32_16x16x16f16
    bf16_as_i16 = arch == "gfx942" and dtype == "bf16"

    def mfma(acc, a_frag, b_frag):
        if bf16_as_i16:
            a_frag, b_frag = a_frag.bitcast(fx.Int16), b_frag.bitcast(fx.Int16)
        return fx.Vector(mfma_op(acc_type.ir_type, [a_frag, b_frag, acc]))

    def compute(acc, sa, sb, a_lane, b_lane):
        """MFMAs over one staged K step; returns the new accumulator list."""
        out = list(acc)
        for kk in range(tk // mfma_k):
            a_frags = [
                fx.ptr_load(sa + (a_lane + (i * 16 * ldk + kk * mfma_k)), frag_type)
                for i in range(rep_m)
            ]
            b_frags = [
                fx.ptr_load(sb + (b_lane + (j * 16 * ldk + kk * mfma_k)), frag_type)
                for j in range(rep_n)
            ]
            for i in range(rep_m):
                for j in range(rep_n):
                    out[i * rep_n + j] = mfma(out[i * rep_n + j], b_frags[j], a_frags[i])
        return out

    def async_setup(A, B, m0, n0, k_base, m_left, n_left, lda, ldb, a_batch, b_batch, tid,
                    lane, wave, wave_m, wave_n, sa0, sb0):
        """gfx950: buffer loads straight into LDS (K-contiguous operands XOR-swizzled,
        M/N-contiguous ones as they lie, read back transposed). Returns ``issue(step,
        slot)`` (the loads of one K step), ``compute_slot`` and ``schedule_hints``."""
        atom = fx.make_copy_atom(fx.rocdl.cdna4.BufferLoadAsyncLDS128b(), 128)
        a_src = fx.get_iter(fx.rocdl.make_buffer_tensor(A, max_size=True))
        b_src = fx.get_iter(fx.rocdl.make_buffer_tensor(B, max_size=True))
        if const_expr(batched or grouped):
            a_src = a_src + a_batch
            b_src = b_src + b_batch
        a_src = a_src + (m0 * lda + k_base if a_k_contig else m0 + k_base * lda)
        b_src = b_src + (n0 * ldb + k_base if b_k_contig else n0 + k_base * ldb)
        wave_base = fx.Int32(rocdl.readfirstlane(
            fx.Int64.ir_type, fx.Int64(wave * (WAVE_SIZE * VEC * ELEM_BYTES)))) // ELEM_BYTES
        lane_row = lane % 16
        group = lane // 16  # which 8-element K chunk of an MFMA step the lane holds
        tr_atom = fx.make_copy_atom(fx.rocdl.cdna4.LDSReadTrans16_64b(), elem)

        def lane_offsets(row0, k_contiguous, rows):
            """Per K sub-step kk, the lane's element offsets in a stage (loop invariant).

            K-contiguous: one offset, the lane's swizzled 8-element chunk of its row.
            M/N-contiguous: two offsets, for two transposed reads of 4 K values each: in
            each 16-lane group, lane ``4 r + q`` points at K row ``r`` (of 4), elements
            ``4 q .. 4 q + 3`` of the 16 rows; the read hands lane ``c`` row ``c``.
            """
            if k_contiguous:
                row = row0 + lane_row
                swizzle = group ^ (row % swizzle_period(tk))
                return [[row * tk + ((kk * (mfma_k // VEC)) ^ swizzle) * VEC]
                        for kk in range(tk // mfma_k)]
            col = row0 + lane_row % 4 * 4
            krow = group * VEC + lane_row // 4
            return [[(kk * mfma_k + krow + 4 * half) * rows + col for half in range(2)]
                    for kk in range(tk // mfma_k)]

        a_offs = lane_offsets(wave_m * wm, a_k_contig, tm)
        b_offs = lane_offsets(wave_n * wn, b_k_contig, tn)

        def load(lds, rows, k_contiguous, offs, block):
            """One MFMA operand fragment (8 elements) of 16-row block ``block``."""
            if k_contiguous:
                return fx.ptr_load(lds + (offs[0] + block * 16 * tk), frag_type)
            halves = []
            for half in range(2):
                regs = fx.make_rmem_tensor(4, elem)
                view = fx.make_view(lds + (offs[half] + block * 16), fx.make_layout(4, 1))
                fx.copy_atom_call(tr_atom, view, regs)
                halves.append(fx.Vector(fx.memref_load_vec(regs), 4, elem))
            return fx.Vector.from_elements([halves[h][e] for h in range(2) for e in range(4)],
                                           elem)

        def issue(step, slot):
            k0 = step * tk
            if const_expr(a_k_contig):
                _async_load_tile(fx, atom, a_src, m_left, k0, lda, tk, nthreads, tid,
                                 wave_base, sa0 + slot * a_stage, loads_a)
            else:
                _async_load_tile_mn(fx, atom, a_src, m_left, k0, lda, tm, nthreads, tid,
                                    wave_base, sa0 + slot * a_stage, loads_a)
            if const_expr(b_k_contig):
                _async_load_tile(fx, atom, b_src, n_left, k0, ldb, tk, nthreads, tid,
                                 wave_base, sb0 + slot * b_stage, loads_b)
            else:
                _async_load_tile_mn(fx, atom, b_src, n_left, k0, ldb, tn, nthreads, tid,
                                    wave_base, sb0 + slot * b_stage, loads_b)

        sub_steps = tk // mfma_k
        a_reads, b_reads = rep_m * (1 if a_k_contig else 2), rep_n * (1 if b_k_contig else 2)
        # Transposed reads of many A blocks ahead would spill (256x256 TN/TT): then A is
        # read at the start of its sub-step and only B is read ahead.
        prefetch_a = a_k_contig or a_reads <= 8

        def compute_slot(acc, slot):
            """The MFMAs of one staged K step. The fragments of sub-step ``kk + 1`` are
            read from LDS while sub-step ``kk``'s MFMAs run (two fragment sets live; A's
            only when ``prefetch_a``)."""
            out = list(acc)
            sa, sb = sa0 + slot * a_stage, sb0 + slot * b_stage

            def a_fragments(kk):
                return [load(sa, tm, a_k_contig, a_offs[kk], i) for i in range(rep_m)]

            def b_fragments(kk):
                return [load(sb, tn, b_k_contig, b_offs[kk], j) for j in range(rep_n)]

            a_next, b_next = a_fragments(0), b_fragments(0)
            for kk in range(sub_steps):
                a_frags = a_next if kk == 0 or prefetch_a else a_fragments(kk)
                b_frags = b_next
                if kk + 1 < sub_steps:
                    b_next = b_fragments(kk + 1)
                    if prefetch_a:
                        a_next = a_fragments(kk + 1)
                for i in range(rep_m):
                    for j in range(rep_n):
                        out[i * rep_n + j] = mfma(out[i * rep_n + j], b_frags[j], a_frags[i])
            return out

        def schedule_hints():
            # The buffer loads first, then sub-step 0's fragment reads; then each
            # sub-step's MFMAs with the next sub-step's reads spread between them.
            rocdl.sched_vmem(loads_a + loads_b)
            rocdl.sched_dsrd(a_reads + b_reads)
            groups = rep_m * rep_n
            ahead = b_reads + (a_reads if prefetch_a else 0)
            for kk in range(sub_steps):
                if kk > 0 and not prefetch_a:
                    rocdl.sched_dsrd(a_reads)
                reads = ahead if kk + 1 < sub_steps else 0
                for g in range(groups):
                    rocdl.sched_mfma(1)
                    share = reads * (g + 1) // groups - reads * g // groups
                    if share:
                        rocdl.sched_dsrd(share)
            rocdl.sched_barrier(0)

        return issue, compute_slot, schedule_hints

    def gemm_body(A, B, C, BIAS, M, N, K, lda, ldb, ldc, batch_a, batch_b, batch_c, alpha,
                  beta, OFFS, G, extras):
        """The kernel's code, traced inside either kernel of :func:`_launcher`; ``extras``
        holds the epilogue's ``(tensor, leading stride)`` pairs (empty: no epilogue)."""
        tid = fx.thread_idx.x
        lane = tid % WAVE_SIZE
        wave = tid // WAVE_SIZE
        wave_m = wave // waves_n
        wave_n = wave % waves_n

        pid = fx.block_idx.x
        num_pid_n = (N + (tn - 1)) // tn
        if const_expr(grouped):
            # Every group's M tiles, numbered group after group; the grid covers an upper
            # bound of their count (launch_geometry), the workgroups past it do nothing.
            num_pid_m = (M + G * (tm - 1)) // tm
        else:
            num_pid_m = (M + (tm - 1)) // tm
        pid_m, pid_n = tile_of_workgroup(pid, num_pid_m, num_pid_n, group_m)
        n0 = pid_n * tn
        # Split-K: workgroup z takes K steps [z * k_steps, (z + 1) * k_steps) and writes
        # its fp32 partial tile to slice z of the workspace C (slice stride batch_c).
        k_steps = K // (tk * split_k)
        k_base = 0
        if const_expr(split_k > 1):
            pid_k = fx.block_idx.z
            k_base = pid_k * (k_steps * tk)

        a_batch, b_batch, c_batch = 0, 0, 0
        rows = M
        m0 = pid_m * tm
        valid = True
        if const_expr(batched):
            bz = fx.block_idx.y
            a_batch, b_batch, c_batch = bz * batch_a, bz * batch_b, bz * batch_c
        if const_expr(grouped):
            # Find the group that owns M tile pid_m: scan the group end offsets (no host
            # sync), counting each group's tiles. Empty groups own no tile.
            offs_ptr = fx.get_iter(OFFS)
            tiles_before = fx.Int32(0)
            group_start = fx.Int32(0)
            sel_group = fx.Int32(0)
            sel_start = fx.Int32(0)
            sel_rows = fx.Int32(0)
            sel_tile = fx.Int32(0)
            for g in range(0, G, 1):
                # clamped to [previous end, M]: offsets past the tokens, negative or
                # decreasing ones never make a workgroup read or write outside A or out
                group_end = fx.ptr_load(offs_ptr + g, fx.Int32)
                group_end = (group_end < group_start).select(group_start, group_end)
                group_end = (group_end > M).select(M, group_end)
                group_tiles = (group_end - group_start + (tm - 1)) // tm
                local = pid_m - tiles_before
                hit = (local < group_tiles).select(local >= 0, False)
                sel_group = hit.select(g, sel_group)
                sel_start = hit.select(group_start, sel_start)
                sel_rows = hit.select(group_end - group_start, sel_rows)
                sel_tile = hit.select(local, sel_tile)
                tiles_before = tiles_before + group_tiles
                group_start = group_end
            valid = pid_m < tiles_before
            rows = sel_rows
            m0 = sel_tile * tm
            # A and out are row-major (T, K) and (T, N): the group's rows start at
            # sel_start; B's group stride is batch_b.
            a_batch = sel_start * lda
            b_batch = sel_group * batch_b
            c_batch = sel_start * ldc

        if valid:
            # Point at the tile's first row (and the split's first K) so loads only add
            # in-tile offsets; the batch or group offset joins the tile's in one sum.
            a_ptr = fx.get_iter(A) + 0
            b_ptr = fx.get_iter(B) + 0
            c_ptr = fx.get_iter(C) + c_batch
            if const_expr(split_k > 1):
                c_ptr = c_ptr + pid_k * batch_c
            if const_expr(a_k_contig):
                a_ptr = a_ptr + (a_batch + m0 * lda + k_base)
            else:
                a_ptr = a_ptr + (a_batch + m0 + k_base * lda)
            if const_expr(b_k_contig):
                b_ptr = b_ptr + (b_batch + n0 * ldb + k_base)
            else:
                b_ptr = b_ptr + (b_batch + n0 + k_base * ldb)
            m_left = rows - m0
            n_left = N - n0

            lds = (
                fx.SharedAllocator()
                .allocate(fx.Array[elem, stages * (a_stage + b_stage), 16])
                .peek()
                .ptr
            )
            sa0 = lds
            sb0 = lds + stages * a_stage

            lane_row = lane % 16
            lane_k = lane // 16 * k_per_lane
            a_lane = (wave_m * wm + lane_row) * ldk + lane_k
            b_lane = (wave_n * wn + lane_row) * ldk + lane_k

            acc = [fx.Vector.filled(4, 0.0, fx.Float32) for _ in range_constexpr(rep_m * rep_n)]

            if const_expr(use_async):
                issue, compute_slot, schedule_hints = async_setup(
                    A, B, m0, n0, k_base, m_left, n_left, lda, ldb, a_batch, b_batch, tid, lane,
                    wave, wave_m, wave_n, sa0, sb0)
                per_step = loads_a + loads_b  # buffer loads one K step issues per thread
                if const_expr(stages == 1):
                    # One buffer: everyone is done reading it, load, wait, meet, compute.
                    for step in range(0, k_steps, 1):
                        rocdl.s_barrier()
                        issue(step, 0)
                        rocdl.s_waitcnt(vmcnt=0)
                        rocdl.s_barrier()
                        acc = compute_slot(acc, 0)
                else:
                    for s in range_constexpr(stages - 1):
                        issue(s, s)
                    # The main loop is unrolled by ``stages`` so every LDS slot is a constant
                    # (LDS read addresses stay loop invariant); the leftover steps, fewer than
                    # ``stages``, run with a computed slot.
                    main_steps = k_steps - (stages - 1)
                    unrolled = main_steps // stages * stages
                    for base in range(0, unrolled, stages):
                        for u in range_constexpr(stages):
                            # Step base + u's loads are done once only later stages' are left.
                            rocdl.s_waitcnt(vmcnt=(stages - 2) * per_step)
                            rocdl.s_barrier()
                            issue(base + u + (stages - 1), (u + stages - 1) % stages)
                            acc = compute_slot(acc, u)
                            schedule_hints()
                    for step in range(unrolled, main_steps, 1):
                        rocdl.s_waitcnt(vmcnt=(stages - 2) * per_step)
                        rocdl.s_barrier()
                        issue(step + (stages - 1), (step + (stages - 1)) % stages)
                        acc = compute_slot(acc, step % stages)
                    for i in range_constexpr(stages - 1):
                        rocdl.s_waitcnt(vmcnt=(stages - 2 - i) * per_step)
                        rocdl.s_barrier()
                        acc = compute_slot(acc, (k_steps - (stages - 1) + i) % stages)

            else:
                first_a = _load_tile(fx, a_ptr, m_left, 0, 0, lda, a_k_contig, tm, tk, nthreads,
                                     tid, vec_type, loads_a)
                first_b = _load_tile(fx, b_ptr, n_left, 0, 0, ldb, b_k_contig, tn, tk, nthreads,
                                     tid, vec_type, loads_b)
                _store_tile(fx, sa0, first_a, a_k_contig, tm, tk, nthreads, tid)
                _store_tile(fx, sb0, first_b, b_k_contig, tn, tk, nthreads, tid)
                fx.gpu.barrier()

                for step in range(0, k_steps - 1, 1):
                    k_next = (step + 1) * tk
                    next_a = _load_tile(fx, a_ptr, m_left, 0, k_next, lda, a_k_contig, tm, tk,
                                        nthreads, tid, vec_type, loads_a)
                    next_b = _load_tile(fx, b_ptr, n_left, 0, k_next, ldb, b_k_contig, tn, tk,
                                        nthreads, tid, vec_type, loads_b)
                    if const_expr(stages == 2):
                        cur = step % 2
                        acc = compute(acc, sa0 + cur * a_stage, sb0 + cur * b_stage, a_lane,
                                      b_lane)
                        nxt = 1 - cur
                        _store_tile(fx, sa0 + nxt * a_stage, next_a, a_k_contig, tm, tk,
                                    nthreads, tid)
                        _store_tile(fx, sb0 + nxt * b_stage, next_b, b_k_contig, tn, tk,
                                    nthreads, tid)
                        fx.gpu.barrier()
                    else:
                        acc = compute(acc, sa0, sb0, a_lane, b_lane)
                        fx.gpu.barrier()
                        _store_tile(fx, sa0, next_a, a_k_contig, tm, tk, nthreads, tid)
                        _store_tile(fx, sb0, next_b, b_k_contig, tn, tk, nthreads, tid)
                        fx.gpu.barrier()
                last = (k_steps - 1) % stages
                acc = compute(acc, sa0 + last * a_stage, sb0 + last * b_stage, a_lane, b_lane)


            # Epilogue: lane holds out[row, col:col+4] of each 16x16 block. With split-K the
            # bias goes in once, with the first split's partial.
            bias_scale = beta
            if const_expr(split_k > 1 and has_bias):
                bias_scale = (pid_k < 1).select(beta, fx.Float32(0.0))
            row_base = wave_m * wm + lane_row
            col_base = wave_n * wn + lane // 16 * 4
            for i in range_constexpr(rep_m):
                for j in range_constexpr(rep_n):
                    row = row_base + i * 16
                    col = col_base + j * 16
                    value = acc[i * rep_n + j] * alpha
                    if const_expr(has_bias):
                        bias_col = (col < n_left).select(n0 + col, 0)
                        bias_vec = fx.ptr_load(fx.get_iter(BIAS) + bias_col, fx.Vector[elem, 4])
                        value = value + bias_vec.to(fx.Float32) * bias_scale
                    if (row < m_left) and (col < n_left):
                        if const_expr(split_k > 1):
                            fx.ptr_store(value, c_ptr + ((m0 + row) * ldc + n0 + col))
                        elif const_expr(spec is not None):
                            fused = apply_epilogue(fx, rocdl, spec, value, extras,
                                                   m0 + row, n0 + col)
                            fx.ptr_store(fused, c_ptr + ((m0 + row) * ldc + n0 + col))
                        else:
                            fx.ptr_store(value.to(elem), c_ptr + ((m0 + row) * ldc + n0 + col))

            if const_expr(reduce_here):
                # Split-K inside the launch: each wave, once its fp32 partial sub-tile is
                # stored, arrives at its sub-tile's counter (one atomic add, acquire-release at
                # agent scope: its stores are visible before, the others' after). The wave that
                # arrives last (the counter read (split_k - 1) x 64) adds the split_k partials
                # in slice order, so the result does not depend on the order the workgroups
                # ran in, writes the output in its dtype and resets the counter to 0 for the
                # next launch; the others are done. Nothing waits on another workgroup.
                # Every lane adds 1 (a wave arrives as 64): the same value in every lane
                # compiles to one atomic of s_bcnt1(EXEC) from one lane, where a value that
                # differs per lane (1 in lane 0 only) made the compiler scan the 64 lanes
                # one by one in a scalar loop before the atomic.
                out, ldo = extras[0]
                counters, _ = extras[1]
                counter = fx.get_iter(counters) + (pid * waves + wave)
                arrived = fx.atomic_add(counter, fx.Int32(1),
                                        syncscope=fx.rocdl.SyncScope.Agent,
                                        ordering=fx.AtomicOrdering.AcqRel)
                before = fx.Int32(rocdl.readfirstlane(fx.Int32.ir_type, arrived))
                if before == (split_k - 1) * WAVE_SIZE:
                    parts = fx.get_iter(C)
                    out_ptr = fx.get_iter(out)
                    for i in range_constexpr(rep_m):
                        for j in range_constexpr(rep_n):
                            row = row_base + i * 16
                            col = col_base + j * 16
                            if (row < m_left) and (col < n_left):
                                # slice after slice by a 64-bit pointer step: one add per
                                # slice, not an int32 offset sign-extended per slice
                                at = parts + ((m0 + row) * ldc + n0 + col)
                                total = fx.ptr_load(at, acc_type)
                                for _ in range_constexpr(1, split_k):
                                    at = at + fx.Int64(batch_c)
                                    total = total + fx.ptr_load(at, acc_type)
                                fx.ptr_store(total.to(elem),
                                             out_ptr + ((m0 + row) * ldo + n0 + col))
                    fx.ptr_store(fx.Int32(0), counter)

    return _launcher(config, grouped, ASTRewriter.transform(gemm_body),
                     spec is not None or reduce_here)


def _launcher(config: GemmConfig, grouped: bool, body: Callable, fused: bool) -> Callable:
    """The ``@flyc.jit`` launcher and its ``@flyc.kernel`` around the traced ``body``: with
    ``fused`` the kernel also takes the epilogue's operand tensors and leading strides
    (:data:`EPILOGUE_SLOTS` of each, unused slots bound to ``out`` and 0); without, it is
    the plain kernel, argument for argument."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    if not fused:
        @flyc.kernel
        def gemm_kernel(
            A: fx.Tensor,
            B: fx.Tensor,
            C: fx.Tensor,
            BIAS: fx.Tensor,
            M: fx.Int32,
            N: fx.Int32,
            K: fx.Int32,
            lda: fx.Int32,
            ldb: fx.Int32,
            ldc: fx.Int32,
            batch_a: fx.Int32,
            batch_b: fx.Int32,
            batch_c: fx.Int32,
            alpha: fx.Float32,
            beta: fx.Float32,
            OFFS: fx.Tensor,
            G: fx.Int32,
        ):
            body(A, B, C, BIAS, M, N, K, lda, ldb, ldc, batch_a, batch_b, batch_c, alpha, beta,
                 OFFS, G, ())

        @flyc.jit
        def gemm_launcher(
            A: fx.Tensor,
            B: fx.Tensor,
            C: fx.Tensor,
            BIAS: fx.Tensor,
            M: fx.Int32,
            N: fx.Int32,
            K: fx.Int32,
            lda: fx.Int32,
            ldb: fx.Int32,
            ldc: fx.Int32,
            batch_a: fx.Int32,
            batch_b: fx.Int32,
            batch_c: fx.Int32,
            batch: fx.Int32,
            alpha: fx.Float32,
            beta: fx.Float32,
            OFFS: fx.Tensor,
            G: fx.Int32,
            stream: fx.Stream = fx.Stream(None),  # noqa: B008 (FlyDSL's launcher convention)
        ):
            grid, block = launch_geometry(config, M, N, batch, groups=G if grouped else 0)
            gemm_kernel(
                A, B, C, BIAS, M, N, K, lda, ldb, ldc, batch_a, batch_b, batch_c, alpha, beta,
                OFFS, G
            ).launch(grid=grid, block=block, stream=stream)

        return gemm_launcher

    @flyc.kernel
    def gemm_kernel(
        A: fx.Tensor,
        B: fx.Tensor,
        C: fx.Tensor,
        BIAS: fx.Tensor,
        M: fx.Int32,
        N: fx.Int32,
        K: fx.Int32,
        lda: fx.Int32,
        ldb: fx.Int32,
        ldc: fx.Int32,
        batch_a: fx.Int32,
        batch_b: fx.Int32,
        batch_c: fx.Int32,
        alpha: fx.Float32,
        beta: fx.Float32,
        OFFS: fx.Tensor,
        G: fx.Int32,
        X0: fx.Tensor,
        X1: fx.Tensor,
        X2: fx.Tensor,
        X3: fx.Tensor,
        ldx0: fx.Int32,
        ldx1: fx.Int32,
        ldx2: fx.Int32,
        ldx3: fx.Int32,
    ):
        body(A, B, C, BIAS, M, N, K, lda, ldb, ldc, batch_a, batch_b, batch_c, alpha, beta,
             OFFS, G, ((X0, ldx0), (X1, ldx1), (X2, ldx2), (X3, ldx3)))

    @flyc.jit
    def fused_launcher(
        A: fx.Tensor,
        B: fx.Tensor,
        C: fx.Tensor,
        BIAS: fx.Tensor,
        M: fx.Int32,
        N: fx.Int32,
        K: fx.Int32,
        lda: fx.Int32,
        ldb: fx.Int32,
        ldc: fx.Int32,
        batch_a: fx.Int32,
        batch_b: fx.Int32,
        batch_c: fx.Int32,
        batch: fx.Int32,
        alpha: fx.Float32,
        beta: fx.Float32,
        OFFS: fx.Tensor,
        G: fx.Int32,
        X0: fx.Tensor,
        X1: fx.Tensor,
        X2: fx.Tensor,
        X3: fx.Tensor,
        ldx0: fx.Int32,
        ldx1: fx.Int32,
        ldx2: fx.Int32,
        ldx3: fx.Int32,
        stream: fx.Stream = fx.Stream(None),  # noqa: B008 (FlyDSL's launcher convention)
    ):
        grid, block = launch_geometry(config, M, N, batch, groups=G if grouped else 0)
        gemm_kernel(
            A, B, C, BIAS, M, N, K, lda, ldb, ldc, batch_a, batch_b, batch_c, alpha, beta,
            OFFS, G, X0, X1, X2, X3, ldx0, ldx1, ldx2, ldx3
        ).launch(grid=grid, block=block, stream=stream)

    return fused_launcher


def launch_geometry(config: GemmConfig, m, n, batch, *, groups=0) -> tuple[tuple, tuple]:
    """``(grid, block)`` of one launch; ``m``, ``n``, ``batch`` and ``groups`` are ints or
    FlyDSL values.

    Grouped (``groups`` > 0, ``m`` the total rows of all groups): the M tiles of a group
    of ``r`` rows are ``ceil(r / tile_m) <= (r + tile_m - 1) / tile_m``, so all groups
    together have at most ``(m + groups * (tile_m - 1)) // tile_m``, whatever the split;
    the grid covers that bound and the workgroups past the actual count exit at once.
    """
    tm, tn = config.tile_m, config.tile_n
    if isinstance(groups, int) and groups == 0:
        m_tiles = (m + (tm - 1)) // tm
    else:
        m_tiles = (m + groups * (tm - 1)) // tm
    tiles = m_tiles * ((n + (tn - 1)) // tn)
    return (tiles, batch, config.split_k), (config.num_threads, 1, 1)


def kernel_launch(config: GemmConfig, args: tuple) -> tuple[tuple, tuple, tuple]:
    """What the launcher passes to the kernel for :func:`launcher_args` ``args``:
    ``(kernel_args, grid, block)``. Used to run the compiled kernel in the ISA emulator."""
    m, n, batch, groups = args[4], args[5], args[13], args[17]
    grid, block = launch_geometry(config, m, n, batch, groups=groups)
    return args[:13] + args[14:], grid, block


def make_launcher(config: GemmConfig, *, dtype: str, layout: str, op: str, arch: str,
                  epilogue: str = "") -> Callable:
    """Build a fresh (uncached) ``@flyc.jit`` launcher; see :func:`build_gemm`.

    A fresh launcher has an empty in-memory FlyDSL cache, so calling it compiles again
    (cross-compiles use this to get an ISA dump on every call).
    """
    config.validate()
    _check_variant(dtype=dtype, layout=layout, op=op, arch=arch)
    reason = (split_k_reason(config, op) or stages_reason(config, arch)
              or epilogue_reason(config, op=op, epilogue=epilogue))
    if reason:
        raise ValueError(reason)
    return _make_kernel(config, dtype, layout, op, arch, epilogue)


@functools.lru_cache(maxsize=512)
def _build_cached(config: GemmConfig, dtype: str, layout: str, op: str, arch: str,
                  epilogue: str) -> Callable:
    return make_launcher(config, dtype=dtype, layout=layout, op=op, arch=arch, epilogue=epilogue)


def build_gemm(config: GemmConfig, *, dtype: str, layout: str, op: str, arch: str,
               epilogue: str = "") -> Callable:
    """Return the ``@flyc.jit`` launcher for one kernel variant (cached per arguments).

    The launcher's positional arguments are those returned by :func:`launcher_args`,
    followed by an optional ``stream=``. ``arch`` selects the MFMA instruction; the
    compile target itself is FlyDSL's (``FLYDSL_GPU_ARCH`` or the detected GPU) and
    must agree with it. ``epilogue`` is the canonical JSON text of a fused
    ``EpilogueSpec`` (``""``: none), a compile-time constant of the kernel.
    ``functools.lru_cache`` makes the lookup thread-safe.
    """
    config.validate()
    _check_variant(dtype=dtype, layout=layout, op=op, arch=arch)
    return _build_cached(config, dtype, layout, op, arch, epilogue)


def example_args(config: GemmConfig, *, dtype: str, layout: str, op: str,
                 epilogue: str = "") -> tuple:
    """Small CPU placeholder arguments with the variant's strides, for compile-only calls
    (with an epilogue: zero operands of its kinds and dtypes, ``out`` in its dtype)."""
    import torch

    spec = parse_epilogue(epilogue)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    m, n, k = config.tile_m, config.tile_n, 2 * config.tile_k
    batch = (2,) if op == "bmm" else ()

    def operand(rows: int, cols: int, col_major: bool):
        if col_major:
            return torch.zeros(*batch, cols, rows, dtype=torch_dtype).transpose(-1, -2)
        return torch.zeros(*batch, rows, cols, dtype=torch_dtype)

    k *= config.split_k
    a = operand(m, k, layout[0] == "t")
    b = operand(k, n, layout[1] == "t")
    out_dtype = torch_dtype if spec is None else getattr(torch, spec.out_dtype)
    out = torch.zeros(*batch, m, n, dtype=out_dtype)
    bias = torch.zeros(n, dtype=torch_dtype) if op == "addmm" else None
    extras = () if spec is None else epilogue_operands(spec, m, n, torch.zeros)
    counters = (torch.zeros(MAX_COUNTERS, dtype=torch.int32)
                if config.split_k > 1 and config.reduce_in_launch else None)
    return launcher_args(a, b, bias, out, 1.0, 1.0, workspace=split_k_workspace(config, out),
                         epilogue=epilogue, extras=extras, counters=counters)


def epilogue_operands(spec, m: int, n: int, make: Callable) -> tuple:
    """Tensors for ``spec``'s operands of an ``m x n`` output, in spec order: ``make(shape,
    dtype=...)`` (e.g. ``torch.zeros``) of shape ``(n,)`` (col), ``(m,)`` (row) or
    ``(m, n)`` (tile)."""
    import torch

    shapes = {"col": (n,), "row": (m,), "tile": (m, n)}
    return tuple(make(shapes[o.kind], dtype=getattr(torch, o.dtype)) for o in spec.operands)


# ---------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16"}


def dtype_name(tensor) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise ValueError(f"unsupported dtype {tensor.dtype}; expected bfloat16 or float16")
    return _TORCH_DTYPES[name]


def infer_layout(a, b) -> str:
    """Layout string of 2-D/3-D operands A (.., M, K) and B (.., K, N) from their strides."""
    letters = []
    for name, tensor in (("A", a), ("B", b)):
        if tensor.stride(-1) == 1:
            letters.append("n")
        elif tensor.stride(-2) == 1:
            letters.append("t")
        else:
            strides = tuple(tensor.stride())
            raise ValueError(f"{name} has strides {strides}: no unit stride in its last two dims")
    return "".join(letters)


def workspace_reason(config: GemmConfig, m: int, n: int) -> str | None:
    """Why a split-K launch of an ``m x n`` output cannot have its workspace: its
    ``split_k x M x N`` fp32 partials are addressed with int32 element offsets and held
    in GPU memory (at most :data:`MAX_WORKSPACE_BYTES`); None when it can (or no split)."""
    if config.split_k == 1:
        return None
    elements = config.split_k * m * n
    if elements > MAX_SPAN_ELEMENTS:
        return (f"split-K workspace {config.split_k}x{m}x{n} has {elements} elements, past "
                "the kernel's int32 offsets")
    if 4 * elements > MAX_WORKSPACE_BYTES:
        return (f"split-K workspace {config.split_k}x{m}x{n} takes {4 * elements} bytes, "
                f"over {MAX_WORKSPACE_BYTES}")
    return None


def split_k_workspace(config: GemmConfig, out):
    """The fp32 partials of a split-K launch, ``(split_k, M, N)`` on ``out``'s device and
    from torch's allocator (its caching allocator on a GPU: no host sync, and private to
    a CUDA-graph capture); None when ``config.split_k == 1``."""
    if config.split_k == 1:
        return None
    import torch

    if out.dim() != 2:
        raise ValueError(f"split_k={config.split_k} needs a 2-D out (mm or addmm)")
    reason = workspace_reason(config, out.shape[0], out.shape[1])
    if reason:
        raise ValueError(reason)
    return torch.empty((config.split_k, *out.shape), dtype=torch.float32, device=out.device)


_COUNTERS: dict = {}  # (device, raw stream handle) -> int32 arrival counters, zeroed once
MAX_COUNTERS = 1 << 16  # sub-tiles (output tiles x waves) one in-launch reduction serves


def counters_reason(config: GemmConfig, m: int, n: int) -> str | None:
    """Why an in-launch split-K reduction cannot serve an ``m x n`` output: it needs an
    arrival counter per output tile and wave, at most :data:`MAX_COUNTERS`; None when it
    can (or the config does not reduce in its launch)."""
    if not (config.split_k > 1 and config.reduce_in_launch):
        return None
    tiles = -(-m // config.tile_m) * -(-n // config.tile_n)
    needed = tiles * config.waves_m * config.waves_n
    if needed > MAX_COUNTERS:
        return (f"in-launch split-K reduction needs {needed} arrival counters, over "
                f"{MAX_COUNTERS}")
    return workspace_reason(config, m, n)


def raw_stream(stream):
    """A stream as its counters' key: the raw handle (an int, as the runner and
    Inductor's generated code pass it) or a stream object's ``cuda_stream``."""
    return stream if isinstance(stream, int) else getattr(stream, "cuda_stream", stream)


def split_k_counters(config: GemmConfig, out, stream=None, runner=None):
    """The arrival counters of an in-launch split-K reduction (:data:`MAX_COUNTERS` int32,
    zeroed when first made): one buffer per device and raw stream handle, made once and
    kept, since every launch leaves its counters at 0 again (the last-arriving wave of a
    sub-tile resets its own). A launch on one stream never overlaps another on the same
    stream, so they never share a counter in flight.

    The buffer outlives every graph, so it never comes from a graph's private memory pool
    (cudagraph trees' warm-up allocates there): the runner makes it on a stream of its
    own, zeroed there, with ``stream`` waiting for it (no host sync). Inside a graph
    capture none is made: a RuntimeError, and the op computes that call with ATen (the
    run before every capture makes it). Without a runner (a test on CPU tensors), plain
    torch. None when the config does not reduce in its launch."""
    if not (config.split_k > 1 and config.reduce_in_launch):
        return None
    import torch

    reason = counters_reason(config, out.shape[-2], out.shape[-1])
    if reason:
        raise ValueError(reason)
    key = (str(out.device), raw_stream(stream))
    buffer = _COUNTERS.get(key)
    if buffer is None:
        if runner is None:
            buffer = torch.zeros(MAX_COUNTERS, dtype=torch.int32, device=out.device)
        elif runner.is_capturing(stream):
            raise RuntimeError("the split-K arrival counters of this stream are made "
                               "outside a graph capture (the run before it), not inside")
        else:
            buffer = runner.zeros_outside_graphs(MAX_COUNTERS, torch.int32, out.device,
                                                 stream)
        _COUNTERS[key] = buffer
    return buffer


def reduce_split_k(workspace, out) -> None:
    """``out = sum of the partials`` (alpha and bias are already in them), in fp32 and
    rounded once, with torch ops on the current stream."""
    import torch

    out.copy_(torch.sum(workspace, dim=0))


def launcher_args(a, b, bias, out, alpha: float, beta: float, workspace=None, *,
                  epilogue: str = "", extras=(), counters=None) -> tuple:
    """Positional arguments of a :func:`build_gemm` launcher for these tensors.

    ``a``: (M, K) or (batch, M, K); ``b``: (K, N) or (batch, K, N); ``out``: (M, N) or
    (batch, M, N); ``bias``: None, (N,), (1, N) or an (M, N) expanded view with stride
    (0, 1).
    ``workspace`` (split-K, from :func:`split_k_workspace`) takes the kernel's output
    in ``out``'s place, its split stride in the batch-stride slot of ``out``.
    ``epilogue`` (canonical JSON, ``""``: none) with ``extras``, its operand tensors in
    spec order (checked by :func:`epilogue_args`), appends the fused kernel's operand
    slots and their leading strides; ``out`` must then have the spec's ``out_dtype``.
    ``counters`` (an in-launch split-K reduction, from :func:`split_k_counters`, with a
    ``workspace``) fills those slots with ``out`` (row stride in the first stride slot)
    and the counters: the kernel writes ``out`` itself.
    """
    layout = infer_layout(a, b)
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    lda = a.stride(-2) if layout[0] == "n" else a.stride(-1)
    ldb = b.stride(-2) if layout[1] == "n" else b.stride(-1)
    if out.stride(-1) != 1:
        raise ValueError(f"out must have unit stride along N, got strides {tuple(out.stride())}")
    batched = a.dim() == 3
    batch = a.shape[0] if batched else 1
    batch_strides = (a.stride(0), b.stride(0), out.stride(0)) if batched else (0, 0, 0)
    final = out
    if counters is not None and workspace is None:
        raise ValueError("an in-launch split-K reduction needs its workspace")
    if workspace is not None:
        if batched:
            raise ValueError("split-K serves mm and addmm, not bmm")
        out = workspace
        batch_strides = (0, 0, workspace.stride(0))
    if bias is not None and bias.dim() == 2:
        if bias.shape[0] != 1 and bias.stride(0) != 0:
            raise ValueError("a 2-D bias must be a (1, N) row or a row vector broadcast over "
                             "rows (stride (0, 1))")
        bias = bias[0]
    if bias is not None and bias.stride(-1) != 1:
        raise ValueError("bias must have unit stride")
    fused = epilogue_args(parse_epilogue(epilogue), extras, out, m, n) if epilogue else ()
    if counters is not None:
        if epilogue:
            raise ValueError("an in-launch split-K reduction takes no epilogue")
        fused = (final, counters, final, final, final.stride(-2), 0, 0, 0)
    if extras and not epilogue:
        raise ValueError(f"{len(extras)} epilogue operand(s) given without an epilogue")
    return (
        a,
        b,
        out,
        out if bias is None else bias,
        m,
        n,
        k,
        lda,
        ldb,
        out.stride(-2),
        *batch_strides,
        batch,
        float(alpha),
        float(beta),
        out,  # the group end offsets of a grouped launch (unused here)
        0,  # groups: 0 = not grouped
        *fused,
    )


def epilogue_args(spec, extras, out, m: int, n: int) -> tuple:
    """The fused kernel's epilogue arguments: :data:`EPILOGUE_SLOTS` tensors (``extras``
    in spec order, the unused slots bound to ``out``), then their leading strides (a
    tile's row stride, else 0).

    Each operand must have its spec dtype and kind's shape: ``col`` (N,) and ``row``
    (M,) with unit stride, ``tile`` (M, N) with unit stride along N and a row stride that
    is a multiple of 4 elements (0: broadcast rows); ``col`` and ``tile`` data aligned to
    4 elements (their 4-element loads: 8 bytes for bf16/fp16, 16 for fp32), ``row`` to
    one; element offsets within int32. ``out`` must have the spec's ``out_dtype``.
    """
    if str(out.dtype).removeprefix("torch.") != spec.out_dtype:
        raise ValueError(f"out is {out.dtype}, the epilogue writes {spec.out_dtype}")
    if len(extras) != len(spec.operands):
        raise ValueError(f"the epilogue has {len(spec.operands)} operand(s), got {len(extras)}")
    lds = []
    for i, (operand, tensor) in enumerate(zip(spec.operands, extras, strict=True)):
        lds.append(_check_operand(f"epilogue operand x{i} ({operand.kind})", operand, tensor,
                                  m, n))
    tensors = (*extras, *[out] * (EPILOGUE_SLOTS - len(extras)))
    return (*tensors, *lds, *[0] * (EPILOGUE_SLOTS - len(lds)))


def _check_operand(name: str, operand, tensor, m: int, n: int) -> int:
    """ValueError unless ``tensor`` can be an epilogue ``operand``; its leading stride."""
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype != operand.dtype:
        raise ValueError(f"{name} is {dtype}, the epilogue reads {operand.dtype}")
    shape = {"col": (n,), "row": (m,), "tile": (m, n)}[operand.kind]
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {shape}")
    if tensor.stride(-1) != 1 and tensor.shape[-1] > 1:
        raise ValueError(f"{name} needs unit stride along its last dim, got strides "
                         f"{tuple(tensor.stride())}")
    ld = tensor.stride(0) if operand.kind == "tile" else 0
    if ld % 4 or ld < 0:
        raise ValueError(f"{name}: row stride {ld} is not a non-negative multiple of 4")
    align = tensor.element_size() * (1 if operand.kind == "row" else 4)
    if tensor.data_ptr() % align:
        raise ValueError(f"{name}: data is not {align}-byte aligned")
    if ld * max(m - 1, 0) + n > MAX_SPAN_ELEMENTS:
        raise ValueError(f"{name} spans more than {MAX_SPAN_ELEMENTS} elements")
    return ld


class Variant(NamedTuple):
    """One compiled kernel of a template: every compile-time parameter. A launch hands it,
    with the launcher's arguments, to the launch runner (``runner``: the plugin's
    ``KernelRunner``), which builds it once and launches it through a compiled function."""

    template: str
    config: Any
    arch: str
    dtype: str
    layout: str
    op: str
    epilogue: str = ""


def launch(a, b, bias, out, alpha: float, beta: float, config: GemmConfig, stream=None, *,
           epilogue: str = "", extras=(), runner) -> None:
    """Run the kernel on GPU tensors, writing into preallocated ``out``.

    The op is ``bmm`` for 3-D operands, ``addmm`` when ``bias`` is given, else ``mm``;
    layout and dtype come from the tensors, the arch from their device (``runner.arch``).
    Launches on ``stream`` (default: the device's current stream) without host
    synchronization, through ``runner`` (the plugin's ``KernelRunner``: the variant is
    built once, in a build worker, and launched through a FlyDSL compiled function, with
    no trace per call). With ``split_k > 1`` the fp32 partials go to a workspace from
    torch's caching allocator on that stream (capture safe: a CUDA-graph capture gives it
    the graph's private pool) and one torch sum on the same stream writes ``out``. A
    fused ``epilogue`` (canonical JSON of an ``EpilogueSpec``) reads ``extras`` (its
    operands, spec order) and writes ``out`` in its ``out_dtype``; see
    :func:`epilogue_reason` for what it cannot serve.
    """
    op = "bmm" if a.dim() == 3 else ("addmm" if bias is not None else "mm")
    variant = Variant("gemm_dense", config, runner.arch(a), dtype_name(a), infer_layout(a, b),
                      op, epilogue)
    stream = runner.stream(a, stream)
    if config.split_k == 1:
        args = launcher_args(a, b, bias, out, alpha, beta, epilogue=epilogue, extras=extras)
        runner.run(variant, args, stream, a)
        return
    with runner.stream_scope(stream, out.device):  # workspace and reduction: the op's stream
        workspace = split_k_workspace(config, out)
        counters = split_k_counters(config, out, stream, runner)
        args = launcher_args(a, b, bias, out, alpha, beta, workspace=workspace,
                             epilogue=epilogue, extras=extras, counters=counters)
        runner.run(variant, args, stream, a)
        if counters is None:
            reduce_split_k(workspace, out)
