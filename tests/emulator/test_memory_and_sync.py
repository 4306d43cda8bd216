"""Memory and synchronisation: buffer and global bounds, scalar-load and LDS waits, barriers,
hazards the emulator reports, and the limits of a run. Tiny kernels whose expected
behaviour is worked out by hand from AMD's CDNA3/CDNA4 ISA guides."""

import numpy as np
import pytest

from inductor_flydsl.emulator.errors import (
    BarrierDeadlock,
    BudgetExceeded,
    HazardError,
    MemoryFault,
    UnknownOpcode,
)
from tests.emulator.kernels import run


def test_buffer_loads_out_of_range_return_zero_and_stores_are_dropped():
    buf = np.arange(256, dtype=np.uint8)
    report, data = run("""
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        s_waitcnt lgkmcnt(0)
        s_mov_b32 s6, 20
        s_mov_b32 s7, 0x00020000
        v_lshlrev_b32_e32 v1, 2, v0
        buffer_load_dword v2, v1, s[4:7], 0 offen
        s_waitcnt vmcnt(0)
        v_mov_b32_e32 v3, -1
        buffer_store_dword v3, v1, s[4:7], 0 offen offset:64
        s_waitcnt vmcnt(0)
        s_endpgm""", buffer=buf)
    v2 = report.last_waves[0].v[2]
    words = buf.view(np.uint32)
    # num_records 20 bytes: lanes 0..4 read words 0..4, the rest read 0.
    assert (v2[:5] == words[:5]).all() and (v2[5:] == 0).all()
    # Stores at byte 64 + 4*lane: none is within 20 bytes: memory unchanged.
    assert (data == buf).all()


def test_global_access_outside_every_buffer_names_lane_and_address():
    where = r"line \d+: global_load_dword v2, v\[4:5\], off.*lane 63"
    with pytest.raises(MemoryFault, match=where):
        run("""
            s_load_dwordx2 s[4:5], s[0:1], 0x0
            s_waitcnt lgkmcnt(0)
            v_lshlrev_b32_e32 v1, 4, v0
            v_mov_b32_e32 v5, s5
            v_add_u32_e32 v4, s4, v1
            global_load_dword v2, v[4:5], off
            s_waitcnt vmcnt(0)
            s_endpgm""", buffer=np.zeros(1000, np.uint8))


def test_reading_a_load_destination_before_waitcnt_is_a_hazard():
    with pytest.raises(HazardError, match=r"reads v2 before the load .*vmcnt"):
        run("""
            s_load_dwordx2 s[4:5], s[0:1], 0x0
            s_waitcnt lgkmcnt(0)
            v_mov_b32_e32 v5, s5
            v_mov_b32_e32 v4, s4
            global_load_dword v2, v[4:5], off
            v_add_u32_e32 v3, 1, v2
            s_endpgm""")
    with pytest.raises(HazardError, match="reads s4 before"):
        run("""
            s_load_dwordx2 s[4:5], s[0:1], 0x0
            s_add_i32 s6, s4, 1
            s_endpgm""")


def test_scalar_loads_complete_only_with_lgkmcnt_zero():
    # An LDS read and a scalar load in flight: lgkmcnt(1) guarantees neither the scalar
    # load (out of order) ...
    with pytest.raises(HazardError, match="reads s4"):
        run("""
            v_mov_b32_e32 v1, 0
            s_load_dwordx2 s[4:5], s[0:1], 0x0
            ds_read_b32 v2, v1
            s_waitcnt lgkmcnt(1)
            s_add_i32 s6, s4, 1
            s_endpgm""", lds=256)
    # ... nor the LDS read issued after it.
    with pytest.raises(HazardError, match="reads v2"):
        run("""
            v_mov_b32_e32 v1, 0
            s_load_dwordx2 s[4:5], s[0:1], 0x0
            ds_read_b32 v2, v1
            s_waitcnt lgkmcnt(1)
            v_add_u32_e32 v3, 1, v2
            s_endpgm""", lds=256)


LDS_EXCHANGE = """
    v_lshrrev_b32_e32 v1, 6, v0
    v_and_b32_e32 v2, 63, v0
    v_lshlrev_b32_e32 v3, 2, v2
    v_cmp_eq_u32_e32 vcc, 0, v1
    s_and_saveexec_b64 s[4:5], vcc
    ds_write_b32 v3, v0
    s_or_b64 exec, exec, s[4:5]
    s_waitcnt lgkmcnt(0)
    {barrier}
    ds_read_b32 v4, v3
    s_waitcnt lgkmcnt(0)
    s_endpgm"""


def test_lds_exchange_with_barrier_has_no_race():
    report, _ = run(LDS_EXCHANGE.format(barrier="s_barrier"), lds=256, threads=128)
    assert report.races == []
    assert (report.last_waves[1].v[4] == np.arange(64)).all()


def test_missing_barrier_is_reported_as_a_race_with_both_instructions():
    report, _ = run(LDS_EXCHANGE.format(barrier=""), lds=256, threads=128)
    assert len(report.races) == 1
    race = report.races[0]
    assert race.kind == "read-after-write" and (race.first_wave, race.second_wave) == (0, 1)
    assert "ds_write_b32 v3, v0" in race.first and "ds_read_b32 v4, v3" in race.second


def test_lds_write_not_waited_for_before_the_barrier_is_a_hazard():
    body = LDS_EXCHANGE.replace("    s_waitcnt lgkmcnt(0)\n    {barrier}", "    s_barrier")
    with pytest.raises(HazardError, match="outstanding write of wave 0"):
        run(body, lds=256, threads=128)


def test_hazards_can_be_recorded_and_the_run_goes_on():
    body = LDS_EXCHANGE.replace("    s_waitcnt lgkmcnt(0)\n    {barrier}", "    s_barrier")
    report, _ = run(body, lds=256, threads=128, hazards="record")
    assert len(report.hazards) == 1 and "outstanding write of wave 0" in report.hazards[0]
    assert (report.last_waves[1].v[4] == np.arange(64)).all()


def test_barrier_deadlock_and_instruction_budget():
    # Wave 0 spins forever while wave 1 waits at the barrier.
    stuck = r"waves \[1\] wait at s_barrier .*never releases: wave 0"
    with pytest.raises(BarrierDeadlock, match=stuck):
        run("""
            v_readfirstlane_b32 s2, v0
            s_cmp_eq_u32 s2, 0
            s_cbranch_scc1 .LBB0_1
            s_barrier
            s_endpgm
        .LBB0_1:
            s_add_i32 s3, s3, 1
            s_branch .LBB0_1""", threads=128, budget=1000)
    with pytest.raises(BudgetExceeded, match="ran more than 1000 instructions"):
        run("""
        .LBB0_1:
            s_add_i32 s2, s2, 1
            s_branch .LBB0_1""", budget=1000)


def test_waves_that_ended_do_not_hold_a_barrier():
    # As on the hardware: wave 0 ends early; wave 1's barrier is released without it.
    report, _ = run("""
        v_readfirstlane_b32 s2, v0
        s_cmp_eq_u32 s2, 0
        s_cbranch_scc1 .LBB0_1
        s_barrier
        v_mov_b32_e32 v1, 5
    .LBB0_1:
        s_endpgm""", threads=128)
    assert (report.last_waves[1].v[1] == 5).all()


def test_unknown_opcode_is_named():
    with pytest.raises(UnknownOpcode, match="v_frobnicate_b32"):
        run("v_frobnicate_b32 v1, v2\ns_endpgm")
