"""Hand-written gfx950/gfx942 kernels in assembly text, for per-instruction tests."""

from __future__ import annotations

import numpy as np

from inductor_flydsl.emulator.machine import Machine, RunReport
from inductor_flydsl.emulator.memory import GlobalMemory
from inductor_flydsl.emulator.program import parse_program

_TEMPLATE = """\t.amdgcn_target "amdgcn-amd-amdhsa--{arch}"
\t.text
test_kernel:
{body}
.Lfunc_end0:
\t.amdhsa_kernel test_kernel
\t\t.amdhsa_group_segment_fixed_size {lds}
\t\t.amdhsa_user_sgpr_count 2
\t\t.amdhsa_user_sgpr_kernarg_segment_ptr 1
\t\t.amdhsa_system_sgpr_workgroup_id_x 1
\t\t.amdhsa_float_round_mode_32 0
\t\t.amdhsa_float_round_mode_16_64 0
\t\t.amdhsa_float_denorm_mode_32 3
\t\t.amdhsa_float_denorm_mode_16_64 3
\t.end_amdhsa_kernel
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .args:
      - .offset: 0
        .size: 8
        .value_kind: global_buffer
    .group_segment_fixed_size: {lds}
    .kernarg_segment_size: 8
    .name: test_kernel
    .wavefront_size: 64
...
\t.end_amdgpu_metadata
"""


def kernel(body: str, *, arch: str = "gfx950", lds: int = 0) -> str:
    lines = "\n".join(f"\t{line.strip()}" for line in body.strip().splitlines())
    return _TEMPLATE.format(arch=arch, body=lines, lds=lds)


def run(body: str, *, arch: str = "gfx950", lds: int = 0, threads: int = 64, groups: int = 1,
        buffer: np.ndarray | None = None, budget: int = 10_000,
        hazards: str = "error", order: str | int = "forward") -> tuple[RunReport, np.ndarray]:
    """Run a kernel whose only argument (s[0:1] after the kernarg load) is ``buffer``.

    Returns the run report (its ``last_waves`` hold the final registers) and the buffer
    contents afterwards.
    """
    program = parse_program(kernel(body, arch=arch, lds=lds))
    memory = GlobalMemory()
    data = (buffer if buffer is not None else np.zeros(1024, np.uint8)).copy()
    base = memory.add("buf", data, writable=True)
    kernarg = np.frombuffer(np.uint64(base).tobytes(), np.uint8).copy()
    address = memory.add("kernarg", kernarg, writable=False)
    machine = Machine(program, memory, budget=budget, hazards=hazards)
    report = machine.run(address, (groups, 1, 1), (threads, 1, 1), order)
    return report, data


def sgprs(body: str, **kw) -> list[int]:
    """The scalar registers of the last wave after ``body``."""
    report, _ = run(body + "\ns_endpgm", **kw)
    return report.last_waves[0].s


def vgpr(body: str, reg: int, **kw) -> np.ndarray:
    """Vector register ``reg`` of the last wave after ``body``, per lane."""
    report, _ = run(body + "\ns_endpgm", **kw)
    return report.last_waves[0].v[reg].copy()
