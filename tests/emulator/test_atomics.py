"""Global atomics across lanes and workgroups, cache maintenance and the lane-counting ops
an atomic arrival compiles to (CDNA3/CDNA4 ISA guides), on hand-written kernels; and the
workgroup order of a grid run."""

import numpy as np
import pytest
from kernels import run, sgprs, vgpr

from inductor_flydsl.emulator.errors import UnknownOpcode

_BASE = """
    s_load_dwordx2 s[4:5], s[0:1], 0x0
    s_waitcnt lgkmcnt(0)
"""


def test_returning_atomic_add_chains_lanes_on_one_address_and_returns_old_values():
    buf = np.zeros(64, np.uint8)
    buf[:4] = np.frombuffer(np.uint32(100).tobytes(), np.uint8)
    report, data = run(_BASE + """
        v_mov_b32_e32 v1, 0
        v_mov_b32_e32 v2, 3
        global_atomic_add v3, v1, v2, s[4:5] sc0
        s_waitcnt vmcnt(0)
        s_endpgm""", buffer=buf)
    # 64 lanes add 3 each, lane after lane: each returns the sum before its own add
    assert int(data[:4].view(np.uint32)[0]) == 100 + 64 * 3
    assert (report.last_waves[0].v[3] == 100 + 3 * np.arange(64)).all()


def test_non_returning_atomic_writes_no_register_and_respects_exec():
    buf = np.zeros(256, np.uint8)
    report, data = run(_BASE + """
        v_lshlrev_b32_e32 v1, 2, v0
        v_mov_b32_e32 v2, 7
        v_mov_b32_e32 v3, 55
        s_mov_b64 exec, 0xff
        global_atomic_add v1, v2, s[4:5]
        global_atomic_umax v1, v0, s[4:5]
        s_waitcnt vmcnt(0)
        s_mov_b64 exec, -1
        s_endpgm""", buffer=buf)
    words = data.view(np.uint32)
    assert (words[:8] == 7).all() and (words[8:] == 0).all()
    assert (report.last_waves[0].v[3] == 55).all()


def test_atomic_return_is_counted_by_vmcnt():
    from inductor_flydsl.emulator.errors import HazardError

    with pytest.raises(HazardError):
        run(_BASE + """
            v_mov_b32_e32 v1, 0
            v_mov_b32_e32 v2, 1
            global_atomic_add v3, v1, v2, s[4:5] sc0
            v_add_u32_e32 v4, v3, v3
            s_endpgm""", buffer=np.zeros(64, np.uint8))


def test_workgroups_arrive_in_the_order_the_grid_runs():
    """Each workgroup's lane 0 takes a ticket from one counter and writes it at its own
    slot: forward order gives 0, 1, 2, 3, reverse the opposite, a seed a permutation."""
    body = _BASE + """
        v_mov_b32_e32 v1, 0
        v_mov_b32_e32 v2, 1
        s_mov_b64 exec, 1
        global_atomic_add v3, v1, v2, s[4:5] sc0
        s_waitcnt vmcnt(0)
        s_lshl_b32 s8, s2, 2
        v_mov_b32_e32 v4, s8
        global_store_dword v4, v3, s[4:5] offset:16
        s_waitcnt vmcnt(0)
        s_endpgm"""
    tickets = {}
    for order in ("forward", "reverse", 7):
        _, data = run(body, groups=4, buffer=np.zeros(64, np.uint8), order=order)
        words = data.view(np.uint32)
        assert words[0] == 4
        tickets[order] = list(words[4:8])
    assert tickets["forward"] == [0, 1, 2, 3]
    assert tickets["reverse"] == [3, 2, 1, 0]
    assert sorted(tickets[7]) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="order"):
        run(body, groups=4, buffer=np.zeros(64, np.uint8), order="sideways")


def test_cache_maintenance_waits_on_vmcnt_and_changes_no_data():
    buf = np.arange(64, dtype=np.uint8)
    _, data = run(_BASE + """
        buffer_wbl2 sc1
        s_waitcnt vmcnt(0)
        buffer_inv sc1
        s_waitcnt vmcnt(0)
        s_endpgm""", buffer=buf)
    assert (data == buf).all()


def test_mbcnt_counts_mask_bits_below_each_lane():
    mask = 0xF0F0_0000_8000_0001
    v = vgpr(f"""
        s_mov_b32 s6, {mask & 0xFFFFFFFF}
        s_mov_b32 s7, {mask >> 32}
        v_mbcnt_lo_u32_b32 v1, s6, 10
        v_mbcnt_hi_u32_b32 v1, s7, v1""", 1)
    bits = [(mask >> i) & 1 for i in range(64)]
    expected = [10 + sum(bits[:lane]) for lane in range(64)]
    assert list(v) == expected


def test_ff1_b64_and_writelane():
    s = sgprs("""
        s_mov_b64 s[6:7], 0
        s_ff1_i32_b64 s8, s[6:7]
        s_mov_b32 s6, 0
        s_mov_b32 s7, 0x10
        s_ff1_i32_b64 s9, s[6:7]""")
    assert s[8] == 0xFFFFFFFF and s[9] == 36
    v = vgpr("""
        v_mov_b32_e32 v1, 5
        s_mov_b64 exec, 0
        s_mov_b32 s6, 99
        s_mov_b32 m0, 41
        v_writelane_b32 v1, s6, m0
        s_mov_b64 exec, -1""", 1)
    assert v[41] == 99 and (np.delete(v, 41) == 5).all()


def test_bcnt1_counts_set_bits_and_sets_scc():
    """What an atomic add of one value from every lane compiles to: one lane adds the
    value times ``s_bcnt1`` of EXEC."""
    s = sgprs("""
        s_mov_b32 s6, 0x8000000F
        s_mov_b32 s7, 0x00010000
        s_bcnt1_i32_b64 s8, s[6:7]
        s_cselect_b32 s9, 1, 2
        s_bcnt1_i32_b32 s10, s6
        s_mov_b64 s[6:7], 0
        s_bcnt1_i32_b64 s11, s[6:7]
        s_cselect_b32 s12, 1, 2
        s_bcnt1_i32_b64 s13, exec""")
    assert (s[8], s[9], s[10], s[11], s[12], s[13]) == (6, 1, 5, 0, 2, 64)


def test_atomic_with_a_wrong_operand_count_is_refused():
    with pytest.raises(UnknownOpcode, match="returning atomic"):
        run(_BASE + """
            global_atomic_add v1, v2, s[4:5] sc0
            s_endpgm""", buffer=np.zeros(64, np.uint8))
