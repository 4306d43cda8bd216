"""Per-instruction tests: tiny kernels whose expected values are worked out by hand from
the pseudocode of AMD's CDNA3/CDNA4 ISA guides (and, for MFMA, AMD's documented lane
layouts), independently of the emulator's code."""

import numpy as np
import pytest

from inductor_flydsl.emulator.errors import (
    UnknownOpcode,
)
from tests.emulator.kernels import run, sgprs, vgpr


def test_scalar_arithmetic_and_scc():
    w = run("""
        s_mov_b32 s2, 0x7fffffff
        s_add_i32 s3, s2, 1
        s_cselect_b32 s4, 11, 22
        s_mov_b32 s5, 5
        s_subb_u32 s6, s5, 7
        s_cselect_b32 s7, 1, 0
        s_mov_b32 s8, 0x80000000
        s_ashr_i32 s9, s8, 4
        s_mov_b32 s10, 0xffffffff
        s_mul_hi_u32 s11, s10, s10
        s_mov_b32 s12, -9
        s_abs_i32 s13, s12
        s_min_i32 s14, s12, 3
        s_cselect_b32 s15, 1, 0
        s_bitcmp1_b32 s2, 30
        s_cselect_b32 s16, 1, 0
        s_movk_i32 s17, 0x88
        s_mulk_i32 s17, 0x1100
        s_endpgm""")[0].last_waves[0].s
    assert w[3] == 0x80000000 and w[4] == 11  # signed overflow sets SCC
    assert w[6] == (5 - 7 - 1) & 0xFFFFFFFF and w[7] == 1  # SCC=1 borrows in; borrow out
    assert w[9] == 0xF8000000  # arithmetic shift keeps the sign
    assert w[11] == 0xFFFFFFFE  # (2^32-1)^2 >> 32
    assert w[13] == 9
    assert w[14] == (-9) & 0xFFFFFFFF and w[15] == 1  # SCC = S0 < S1
    assert w[16] == 1  # bit 30 of 0x7fffffff
    assert w[17] == 0x88 * 0x1100


def test_64bit_scalar_ops_and_compare():
    s = sgprs("""
        s_mov_b64 s[2:3], -1
        s_mov_b32 s4, 0
        s_mov_b32 s5, 0
        s_and_b64 s[6:7], s[2:3], s[4:5]
        s_cselect_b64 s[8:9], -1, 0
        s_cmp_lg_u64 s[2:3], 0
        s_cselect_b32 s10, 7, 8
        s_lshr_b32 s11, s2, 27
        s_andn2_b32 s12, s2, 31""")
    assert s[6] == 0 and s[7] == 0
    assert s[8] == 0 and s[9] == 0  # s_and_b64 gave 0: SCC 0
    assert s[10] == 7
    assert s[11] == 31 and s[12] == 0xFFFFFFE0


def test_vector_integer_ops():
    body = """
        v_lshlrev_b32_e32 v1, 3, v0
        v_add_u32_e32 v2, 0xfffffff0, v1
        v_bfe_u32 v3, v0, 4, 2
        v_ashrrev_i32_e32 v4, 31, v2
        v_mad_u32_u24 v5, v0, 3, v1
        v_add3_u32 v6, v0, v1, 32
        v_and_or_b32 v7, v0, 32, v1
        v_lshl_or_b32 v8, v0, 4, 1
        v_mul_lo_u32 v9, v0, v0
        v_add_lshl_u32 v10, v0, 1, 2
        v_lshl_add_u32 v11, v0, 2, 5
        v_min_i32_e32 v12, 10, v0
        v_mul_u32_u24_e32 v13, 0x88, v0
        s_endpgm"""
    report, _ = run(body)
    v = report.last_waves[0].v
    lane = np.arange(64, dtype=np.uint64)
    assert (v[1] == lane * 8).all()
    assert (v[2] == (lane * 8 - 16) % 2**32).all()
    assert (v[3] == (lane >> 4) & 3).all()
    assert (v[4] == np.where(lane * 8 < 16, 0xFFFFFFFF, 0)).all()
    assert (v[5] == lane * 3 + lane * 8).all()
    assert (v[6] == lane + lane * 8 + 32).all()
    assert (v[7] == (lane & 32) | (lane * 8)).all()
    assert (v[8] == (lane << 4) | 1).all()
    assert (v[9] == lane * lane).all()
    assert (v[10] == (lane + 1) << 2).all()
    assert (v[11] == (lane << 2) + 5).all()
    assert (v[12] == np.minimum(lane, 10)).all()
    assert (v[13] == lane * 0x88).all()


def test_64bit_vector_ops():
    report, _ = run("""
        v_mov_b32_e32 v2, -1
        v_mov_b32_e32 v3, 0
        s_mov_b32 s4, 0x10
        s_mov_b32 s5, 0x1
        v_lshl_add_u64 v[6:7], v[2:3], 1, s[4:5]
        v_mov_b32_e32 v8, 0xffffffff
        v_mov_b32_e32 v9, 0xffffffff
        v_mad_u64_u32 v[10:11], s[12:13], v8, v0, v[8:9]
        s_endpgm""")
    w = report.last_waves[0]
    lane = np.arange(64, dtype=object)
    got6 = [int(w.v[6][i]) | int(w.v[7][i]) << 32 for i in range(64)]
    assert got6 == [((0xFFFFFFFF << 1) + 0x1_00000010)] * 64
    got10 = [int(w.v[10][i]) | int(w.v[11][i]) << 32 for i in range(64)]
    want = [(0xFFFFFFFF * int(x) + 0xFFFFFFFFFFFFFFFF) for x in lane]
    assert got10 == [x & (2**64 - 1) for x in want]
    carry = w.get_s64(12)
    assert carry == sum(1 << i for i, x in enumerate(want) if x >= 2**64)


def test_perm_b32_byte_selectors():
    # D.byte[i] = ({S0, S1} as 8 bytes, S1 the low dword)[sel.byte[i]]; 12 -> 0x00,
    # >= 13 -> 0xff, 8..11 -> sign of bytes 1, 3, 5, 7 replicated.
    v = vgpr("""
        s_mov_b32 s2, 0x0c0d0006
        v_mov_b32_e32 v1, 0x11223344
        v_mov_b32_e32 v2, 0x8899aabb
        v_perm_b32 v3, v1, v2, s2""", 3)
    # byte0 <- sel 6 -> byte 6 of {0x11223344, 0x8899aabb} = 0x22; byte1 <- sel 0 = 0xbb;
    # byte2 <- sel 13 = 0xff; byte3 <- sel 12 = 0x00
    assert (v == 0x00FFBB22).all()


def test_bf16_and_f16_conversions_round_to_nearest_even():
    # 1 + 2^-8 is exactly halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0).
    # 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
    v = vgpr("""
        v_mov_b32_e32 v1, 0x3f808000
        v_mov_b32_e32 v2, 0x3f818000
        v_cvt_pk_bf16_f32 v3, v1, v2""", 3)
    assert (v == (0x3F82 << 16 | 0x3F80)).all()
    h = vgpr("""
        v_mov_b32_e32 v1, 0x3f801000
        v_cvt_f16_f32_e32 v2, v1""", 2)
    assert (h == 0x3C00).all()  # 1 + 2^-11 ties to 1.0 in fp16
    p = vgpr("""
        v_mov_b32_e32 v1, 1.0
        v_mov_b32_e32 v2, -2.0
        v_cvt_pk_f16_f32 v3, v1, v2""", 3)
    assert (p == (0xC000 << 16 | 0x3C00)).all()


def test_packed_fp32_and_float_ops():
    report, _ = run("""
        s_mov_b32 s2, 0x40000000
        s_mov_b32 s3, 0x40400000
        v_mov_b32_e32 v4, 1.0
        v_mov_b32_e32 v5, 0.5
        v_pk_mul_f32 v[6:7], s[2:3], v[4:5]
        v_cvt_f32_u32_e32 v8, v0
        v_rcp_f32_e32 v9, 4.0
        v_mul_f32_e32 v10, 0x4f7ffffe, v9
        v_cvt_u32_f32_e32 v11, v10
        s_endpgm""")
    v = report.last_waves[0].v
    assert (v[6].view(np.float32) == 2.0).all() and (v[7].view(np.float32) == 1.5).all()
    assert (v[8].view(np.float32) == np.arange(64)).all()
    assert (v[9].view(np.float32) == 0.25).all()
    assert (v[11] == int(np.float32(0x4F7FFFFE and 4294966784.0) * np.float32(0.25))).all()


def test_compare_writes_zero_for_inactive_lanes_and_exec_masking():
    report, _ = run("""
        v_mov_b32_e32 v1, 7
        s_mov_b32 s2, 0xffff
        s_mov_b32 s3, 0
        s_and_saveexec_b64 s[4:5], s[2:3]
        v_cmp_gt_i32_e32 vcc, 32, v0
        v_mov_b32_e32 v1, 9
        v_readfirstlane_b32 s6, v0
        s_or_b64 exec, exec, s[4:5]
        v_cndmask_b32_e32 v2, 100, v0, vcc
        s_endpgm""")
    w = report.last_waves[0]
    assert w.get_s64(4) == 2**64 - 1  # the saved EXEC
    assert w.get_s64(106) == 0xFFFF  # only active lanes 0..15 compare
    assert (w.v[1][:16] == 9).all() and (w.v[1][16:] == 7).all()
    assert w.s[6] == 0
    assert (w.v[2][:16] == np.arange(16)).all() and (w.v[2][16:] == 100).all()


def _lanes_holding(matrix: np.ndarray, k_per_lane: int) -> np.ndarray:
    """Registers of a 16 x K MFMA source per AMD's layout: lane l holds row l % 16,
    columns (l // 16) * k_per_lane ...; two 16-bit values per register, low first."""
    regs = np.zeros((k_per_lane // 2, 64), np.uint32)
    for lane in range(64):
        row, k0 = lane % 16, (lane // 16) * k_per_lane
        for e in range(k_per_lane):
            regs[e // 2, lane] |= np.uint32(int(matrix[row, k0 + e]) << (16 * (e % 2)))
    return regs


@pytest.mark.parametrize(("arch", "mnemonic", "k"), [
    ("gfx950", "v_mfma_f32_16x16x32_bf16", 32),
    ("gfx942", "v_mfma_f32_16x16x16_bf16", 16),
    ("gfx950", "v_mfma_f32_16x16x32_f16", 32),
])
def test_mfma_lane_layout_and_accumulate(arch, mnemonic, k):
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (16, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, 16)).astype(np.float32)
    c = rng.integers(-8, 9, (16, 16)).astype(np.float32)
    if mnemonic.endswith("bf16"):
        bits_a = (a.view(np.uint32) >> 16).astype(np.uint32)
        bits_b = (b.T.copy().view(np.uint32) >> 16).astype(np.uint32)
    else:
        bits_a = a.astype(np.float16).view(np.uint16).astype(np.uint32)
        bits_b = b.T.astype(np.float16).view(np.uint16).astype(np.uint32)
    regs_a, regs_b = _lanes_holding(bits_a, k // 4), _lanes_holding(bits_b, k // 4)
    n = k // 8
    # C: register r of lane l is element (4 * (l // 16) + r, l % 16).
    regs_c = np.zeros((4, 64), np.uint32)
    for lane in range(64):
        for r in range(4):
            regs_c[r, lane] = np.float32(c[4 * (lane // 16) + r, lane % 16]).view(np.uint32)
    from inductor_flydsl.emulator.machine import Machine
    from inductor_flydsl.emulator.memory import GlobalMemory
    from inductor_flydsl.emulator.program import parse_program
    from tests.emulator.kernels import kernel

    text = kernel(f"{mnemonic} v[20:23], v[0:{n - 1}], v[8:{7 + n}], v[12:15]\ns_endpgm",
                  arch=arch)
    machine = Machine(parse_program(text), GlobalMemory())
    wave = machine._init_wave(0, (0, 0, 0), (64, 1, 1), 0)
    wave.v[0:n], wave.v[8:8 + n], wave.v[12:16] = regs_a, regs_b, regs_c
    machine.lds = None
    machine._run_wave(wave)
    d = a.astype(np.float64) @ b + c
    got = np.zeros((16, 16))
    for lane in range(64):
        for r in range(4):
            got[4 * (lane // 16) + r, lane % 16] = wave.v[20 + r, lane].view(np.float32)
    assert (got == d).all()


def test_carry_chain_and_bitset():
    # A 64-bit add done as add_co + addc: 0x1_ffffffff + lane.
    report, _ = run("""
        v_mov_b32_e32 v1, -1
        v_mov_b32_e32 v2, 1
        v_add_co_u32_e32 v3, vcc, v1, v0
        v_addc_co_u32_e32 v4, vcc, 0, v2, vcc
        v_sub_co_u32_e64 v5, s[6:7], v0, 1
        s_mov_b32 s8, 0x100
        s_bitset1_b32 s8, 3
        s_mov_b32 s9, 0xf0
        s_bfe_i32 s10, s9, 0x40004
        s_bfe_u32 s11, s9, 0x40004
        s_endpgm""")
    w = report.last_waves[0]
    total = [int(w.v[3][i]) | int(w.v[4][i]) << 32 for i in range(64)]
    assert total == [0x1FFFFFFFF + i for i in range(64)]
    assert w.get_s64(6) == 1  # only lane 0 borrows
    assert w.s[8] == 0x108
    # S1 = offset 4, width 4 (bits [22:16]): the field 0xf sign-extends to -1.
    assert w.s[10] == 0xFFFFFFFF and w.s[11] == 0xF


@pytest.mark.parametrize(("table", "expected"),
                         [(0x80, 0b1000), (0xFE, 0b1111), (0x48, None)])
def test_bitop3_truth_table(table, expected):
    # Bit i of D is table[(S0_i << 2) | (S1_i << 1) | S2_i].
    v = vgpr(f"""
        v_mov_b32_e32 v1, 0b1100
        v_mov_b32_e32 v2, 0b1010
        v_mov_b32_e32 v3, 0b1001
        v_bitop3_b32 v4, v1, v2, v3 bitop3:{table:#x}""", 4)
    if expected is None:
        bits = [(0b1100 >> i & 1) << 2 | (0b1010 >> i & 1) << 1 | (0b1001 >> i & 1)
                for i in range(32)]
        expected = sum((table >> b & 1) << i for i, b in enumerate(bits))
    assert (v == expected).all()


def test_transposed_lds_read_gives_each_lane_a_column():
    # LDS holds 16-bit values 0, 1, 2, ...; lane L points at its own 4 elements (8 bytes
    # at 8 * L). In each group of 16 lanes, lane 4r + q holds row r, columns 4q..4q+3 of a
    # 4 x 16 tile; after the read lane c of the group holds column c, rows 0..3.
    report, _ = run("""
        v_lshlrev_b32_e32 v1, 2, v0
        v_add_u32_e32 v2, 1, v1
        v_lshl_or_b32 v3, v2, 16, v1
        v_add_u32_e32 v4, 2, v1
        v_add_u32_e32 v5, 3, v1
        v_lshl_or_b32 v6, v5, 16, v4
        v_lshlrev_b32_e32 v7, 3, v0
        ds_write_b64 v7, v[3:4]
        s_waitcnt lgkmcnt(0)
        ds_write_b32 v7, v3
        ds_write_b32 v7, v6 offset:4
        s_waitcnt lgkmcnt(0)
        ds_read_b64_tr_b16 v[8:9], v7
        s_waitcnt lgkmcnt(0)
        s_endpgm""", lds=512)
    w = report.last_waves[0]
    got = np.stack([w.v[8] & 0xFFFF, w.v[8] >> 16, w.v[9] & 0xFFFF, w.v[9] >> 16], axis=1)
    for lane in range(64):
        group, c = divmod(lane, 16)
        want = [4 * (group * 16 + 4 * r + c // 4) + c % 4 for r in range(4)]
        assert got[lane].tolist() == want


@pytest.mark.parametrize(("mnemonic", "width"), [("v_permlane16_swap_b32", 16),
                                                 ("v_permlane32_swap_b32", 32)])
def test_permlane_swaps_trade_rows_between_two_registers(mnemonic, width):
    """CDNA4: VDST's odd rows (of 16 or 32 lanes) trade places with SRC0's even rows."""
    report, _ = run(f"""
        v_add_u32_e32 v1, 100, v0
        s_nop 1
        {mnemonic}_e32 v0, v1
        s_endpgm""")
    w = report.last_waves[0]
    lanes = np.arange(64)
    odd = (lanes // width) % 2 == 1
    want_d = np.where(odd, lanes - width + 100, lanes)  # odd rows now hold SRC0's even rows
    want_s = np.where(~odd, lanes + width, lanes + 100)  # even rows now hold VDST's odd rows
    assert np.array_equal(w.v[0], want_d) and np.array_equal(w.v[1], want_s)
    with pytest.raises(UnknownOpcode, match="does not exist on gfx942"):
        run(f"{mnemonic}_e32 v0, v1\ns_endpgm", arch="gfx942")


_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # OCP MX FP4 magnitudes of codes 0-7


@pytest.mark.parametrize(("fmt_a", "fmt_b", "byte_a", "byte_b"), [
    ("fp8", "fp8", 0, 0), ("fp4", "fp4", 1, 3), ("fp8", "fp4", 2, 1)])
def test_scaled_mfma_layout_scales_and_op_sel(fmt_a, fmt_b, byte_a, byte_b):
    """v_mfma_scale_f32_16x16x128_f8f6f4 per the CDNA4 guide: lane l holds row (A) or
    column (B) l % 16, K elements 32 * (l // 16) .. + 31 packed little-endian (FP8 a
    byte each, FP4 a nibble, low first), and its scale VGPR's byte op_sel + 2 *
    op_sel_hi is the E8M0 scale of exactly those 32 elements. Operands are packed here
    from the documented layout, independently of the emulator's code."""
    import torch

    rng = np.random.default_rng(7)

    def operand(fmt):  # (16, 128) values and the per-lane register words
        if fmt == "fp8":
            values = rng.integers(-8, 9, (16, 128)).astype(np.float32)
            codes = torch.from_numpy(values).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
            per_word, bits = 4, 8
        else:
            codes = rng.integers(0, 16, (16, 128)).astype(np.uint8)
            values = np.array([(-1 if c & 8 else 1) * _E2M1[c & 7] for c in codes.ravel()],
                              np.float32).reshape(16, 128)
            per_word, bits = 8, 4
        regs = np.zeros((32 // per_word, 64), np.uint32)
        for lane in range(64):
            row, k0 = lane % 16, 32 * (lane // 16)
            for e in range(32):
                regs[e // per_word, lane] |= np.uint32(int(codes[row, k0 + e])
                                                       << (bits * (e % per_word)))
        return values.astype(np.float64), regs

    a, regs_a = operand(fmt_a)
    bt, regs_b = operand(fmt_b)  # rows of bt are columns of B
    exps_a = rng.integers(-3, 4, (4, 16))  # block g, row i -> lane 16 g + i
    exps_b = rng.integers(-3, 4, (4, 16))

    def scale_words(exps, byte):
        words = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)  # noise
        for lane in range(64):
            value = np.uint32(127 + exps[lane // 16, lane % 16])
            words[lane] = (words[lane] & ~np.uint32(0xFF << (8 * byte))) | (value << (8 * byte))
        return words

    sa, sb = scale_words(exps_a, byte_a), scale_words(exps_b, byte_b)
    c = rng.integers(-8, 9, (16, 16)).astype(np.float32)
    regs_c = np.zeros((4, 64), np.uint32)
    for lane in range(64):
        for r in range(4):
            regs_c[r, lane] = np.float32(c[4 * (lane // 16) + r, lane % 16]).view(np.uint32)
    na, nb = regs_a.shape[0], regs_b.shape[0]
    formats = {"fp8": 0, "fp4": 4}
    op_sel = f"op_sel:[{byte_a & 1},{byte_b & 1},0] op_sel_hi:[{byte_a >> 1},{byte_b >> 1},0]"
    from inductor_flydsl.emulator.machine import Machine
    from inductor_flydsl.emulator.memory import GlobalMemory
    from inductor_flydsl.emulator.program import parse_program
    from tests.emulator.kernels import kernel

    text = kernel(f"v_mfma_scale_f32_16x16x128_f8f6f4 v[40:43], v[0:{na - 1}], "
                  f"v[8:{7 + nb}], v[16:19], v20, v21 {op_sel} cbsz:{formats[fmt_a]} "
                  f"blgp:{formats[fmt_b]}\ns_endpgm")
    machine = Machine(parse_program(text), GlobalMemory())
    wave = machine._init_wave(0, (0, 0, 0), (64, 1, 1), 0)
    wave.v[0:na], wave.v[8:8 + nb], wave.v[16:20] = regs_a, regs_b, regs_c
    wave.v[20], wave.v[21] = sa, sb
    machine.lds = None
    machine._run_wave(wave)
    scale_a = np.repeat(2.0 ** exps_a.T, 32, axis=1)  # (16 rows, 128 K)
    scale_b = np.repeat(2.0 ** exps_b.T, 32, axis=1)
    want = (a * scale_a) @ (bt * scale_b).T + c
    got = np.zeros((16, 16))
    for lane in range(64):
        for r in range(4):
            got[4 * (lane // 16) + r, lane % 16] = wave.v[40 + r, lane].view(np.float32)
    assert np.allclose(got, want, rtol=1e-6, atol=1e-3)
    assert not np.allclose(got, a @ bt.T + c)  # the scales mattered


def _f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint32).view(np.float32)


def test_maximum3_and_minimum3_follow_ieee_2019():
    """CDNA4 v_maximum3_f32 / v_minimum3_f32: v_maximum_f32(v_maximum_f32(S0, S1), S2),
    IEEE 754-2019 maximum: a NaN source wins (a signaling one quieted, S0 before S1), +0
    is greater than -0 (AMD's pseudocode; the same as torch.maximum/minimum)."""
    qnan, snan = 0x7FC00001, 0x7F800001  # quiet and signaling NaNs with a payload
    report, _ = run(f"""
        v_mov_b32_e32 v1, -2.0
        v_mov_b32_e32 v2, 0.5
        v_mov_b32_e32 v3, 0x80000000
        v_mov_b32_e32 v4, {qnan:#x}
        v_mov_b32_e32 v5, {snan:#x}
        v_maximum3_f32 v10, v1, v2, 0
        v_minimum3_f32 v11, v1, v2, 0
        v_maximum3_f32 v12, v3, 0, v3
        v_minimum3_f32 v13, 0, v3, 0
        v_maximum3_f32 v14, v2, v4, v1
        v_minimum3_f32 v15, v4, v5, v1
        v_maximum3_f32 v16, -v1, |v3|, v2
        s_endpgm""")
    v = report.last_waves[0].v
    assert (_f32(v[10]) == 0.5).all() and (_f32(v[11]) == -2.0).all()
    assert (v[12] == 0).all()  # max(-0, +0, -0) = +0
    assert (v[13] == 0x80000000).all()  # min(+0, -0, +0) = -0
    assert (v[14] == qnan).all()  # the quiet NaN itself, payload kept
    assert (v[15] == snan | 0x00400000).all()  # S1's signaling NaN, quieted, beats S0's quiet
    assert (_f32(v[16]) == 2.0).all()  # source modifiers apply first


def test_fmaak_and_fmamk_take_the_literal_in_its_operand_place():
    # v_fmamk_f32 vdst, src0, K, vsrc1 = src0 * K + vsrc1; v_fmaak_f32 vdst, src0, vsrc1,
    # K = src0 * vsrc1 + K (the operand order llvm-mc-22 prints for gfx950).
    report, _ = run("""
        v_cvt_f32_u32_e32 v1, v0
        v_mov_b32_e32 v2, 0.5
        v_fmamk_f32 v3, v1, 0x40400000, v2
        v_fmaak_f32 v4, v1, v2, 0x41200000
        s_endpgm""")
    v = report.last_waves[0].v
    lanes = np.arange(64, dtype=np.float32)
    assert (_f32(v[3]) == lanes * 3 + 0.5).all() and (_f32(v[4]) == lanes * 0.5 + 10).all()


def test_packed_fp32_negation_and_inline_constants():
    """VOP3P: neg_lo/neg_hi negate a source's value for the low/high result; an inline
    constant is a 32-bit float (LLVM encodes it so and always reads its low half with
    op_sel_hi 0). Reading a constant's undocumented high half is refused."""
    report, _ = run("""
        v_mov_b32_e32 v2, 1.5
        v_mov_b32_e32 v3, -4.0
        v_mov_b32_e32 v4, 0.5
        v_mov_b32_e32 v5, 2.0
        v_pk_add_f32 v[6:7], v[2:3], 1.0 op_sel_hi:[1,0]
        v_pk_add_f32 v[8:9], v[2:3], 2.0 op_sel_hi:[1,0] neg_lo:[1,0] neg_hi:[1,0]
        v_pk_mul_f32 v[10:11], v[2:3], v[4:5] neg_lo:[0,1]
        v_pk_fma_f32 v[12:13], v[2:3], v[4:5], 0.5 op_sel_hi:[1,1,0] neg_hi:[0,0,1]
        s_endpgm""")
    v = report.last_waves[0].v
    pairs = [(6, 2.5, -3.0), (8, 0.5, 6.0), (10, -0.75, -8.0), (12, 1.25, -8.5)]
    for reg, lo, hi in pairs:
        assert (_f32(v[reg]) == lo).all() and (_f32(v[reg + 1]) == hi).all(), reg
    with pytest.raises(UnknownOpcode, match="high half of the constant"):
        run("v_pk_add_f32 v[6:7], v[2:3], 1.0\ns_endpgm")
    run("v_pk_add_f32 v[6:7], v[2:3], 0\ns_endpgm")  # 0 reads as 0 in either half
