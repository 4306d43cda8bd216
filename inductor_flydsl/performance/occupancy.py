"""How many workgroups of a kernel one CU holds at once, and how a grid fills the GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .devices import DeviceSpec
from .kernel_profile import KernelProfile


@dataclass(frozen=True)
class Occupancy:
    workgroups_per_cu: int
    limited_by: str  # "registers", "lds", "waves"
    waves_per_simd: float  # at full occupancy


def _ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def occupancy(profile: KernelProfile, device: DeviceSpec) -> Occupancy:
    """Workgroups per CU (at least 1) from registers, LDS and the wave slots."""
    regs = max(_ceil_to(max(profile.registers_per_lane, 1), device.register_granule),
               device.register_granule)
    waves_per_simd_by_regs = min(device.max_waves_per_simd, device.registers_per_lane // regs)
    simds = device.simds_per_cu
    wave_slots = waves_per_simd_by_regs * simds
    by_regs = max(wave_slots // profile.waves, 0)
    by_lds = device.lds_bytes_per_cu // profile.lds_bytes if profile.lds_bytes else 10**6
    by_waves = device.max_waves_per_simd * simds // profile.waves
    limits = {"registers": by_regs, "lds": by_lds, "waves": by_waves}
    limited_by = min(limits, key=lambda k: limits[k])
    per_cu = max(limits[limited_by], 1)
    return Occupancy(per_cu, limited_by, per_cu * profile.waves / simds)


def waves_per_simd(workgroups_on_cu: int, profile: KernelProfile, device: DeviceSpec) -> int:
    """Waves the busiest SIMD of a CU holding ``workgroups_on_cu`` workgroups runs."""
    return max(math.ceil(workgroups_on_cu * profile.waves / device.simds_per_cu), 1)
