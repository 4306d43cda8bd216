"""Run a kernel: workgroups one after another, the waves of a workgroup round-robin
between barriers, with the ``s_waitcnt`` hazard model and LDS race detection.

Scheduling: each wave runs until it reaches ``s_barrier`` or ``s_endpgm``; when every live
wave of the workgroup waits at a barrier they are released together and a new LDS epoch
begins; as on the hardware, waves that have ended no longer hold a barrier. Waves waiting
at a barrier while another wave runs past the instruction budget without reaching one is
a :class:`~.errors.BarrierDeadlock`. Memory counters: ``vmcnt`` counts
global and buffer loads and stores, which complete in order; ``lgkmcnt`` counts LDS and
scalar loads, LDS in order, scalar loads in any order (so only ``lgkmcnt(0)`` is sure to
have completed a scalar load), as the ISA guides describe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import (  # noqa: F401 (register opcodes)
    ops_atomic,
    ops_matrix,
    ops_memory,
    ops_scalar,
    ops_vector,
    ops_vector_wide,
)
from .decode import Compiled, DecodeContext, codes, decode, opcode, operands
from .errors import (
    AsmError,
    BarrierDeadlock,
    BudgetExceeded,
    EmulatorError,
    HazardError,
    Race,
)
from .memory import GlobalMemory, Lds
from .operands import EXEC_LO, VCC_LO
from .program import Instruction, Program
from .wave import LANES, MemOp, Wave

DEFAULT_BUDGET = 2_000_000  # instructions per wave


@dataclass
class RunReport:
    workgroups: int = 0
    waves: int = 0
    instructions: int = 0
    races: list[Race] = field(default_factory=list)
    # With hazards="record": each distinct hazard once, in the order found.
    hazards: list[str] = field(default_factory=list)
    # The waves of the last workgroup run, in their final state (for tests and debugging).
    last_waves: list[Wave] = field(default_factory=list)


class Machine:
    def __init__(self, program: Program, memory: GlobalMemory, *,
                 budget: int = DEFAULT_BUDGET, hazards: str = "error") -> None:
        """``hazards``: "error" stops at the first hazard (HazardError); "record" lists
        each distinct one in the report and goes on, to see what else a kernel does."""
        if hazards not in ("error", "record"):
            raise ValueError(f"hazards must be 'error' or 'record', not {hazards!r}")
        self.hazard_mode = hazards
        self.hazards: list[str] = []
        self._hazard_keys: set[str] = set()
        self.program = program
        self.memory = memory
        self.budget = budget
        self._op_ids = 0
        self.lds: Lds | None = None
        _check_float_modes(program)
        ctx = DecodeContext(program, self)
        self.compiled: list[Compiled] = [decode(ins, ctx) for ins in program.instructions]

    def hazard(self, message: str) -> None:
        if self.hazard_mode == "error":
            raise HazardError(message)
        key = message.split(" (wave")[0]
        if key not in self._hazard_keys:
            self._hazard_keys.add(key)
            self.hazards.append(message)

    def next_op_id(self) -> int:
        self._op_ids += 1
        return self._op_ids

    # -- LDS access, used by the DS and buffer-to-LDS instructions ------------------------
    def _describe(self, index: int) -> str:
        return self.program.instructions[index].where()

    def lds_read(self, w: Wave, ins: Instruction, addrs: np.ndarray, size: int, fault):
        assert self.lds is not None
        return self.lds.read(addrs, size, w.wave_id, ins.index, fault, self._describe,
                             f"{ins.where()}")

    def lds_write(self, w: Wave, ins: Instruction, addrs: np.ndarray, data: np.ndarray, fault,
                  op: MemOp) -> None:
        assert self.lds is not None
        self.lds.pending_ops[op.op_id] = [w.wave_id, op.counter == "vm", ins.where(), False,
                                          False]
        self.lds.write(addrs, data, w.wave_id, ins.index, fault, self._describe, op.op_id)

    # -- dispatch -------------------------------------------------------------------------
    def run(self, kernarg_address: int, grid: Sequence[int], block: Sequence[int],
            order: str | int = "forward") -> RunReport:
        """Run every workgroup of a ``grid`` (in workgroups) of ``block``-sized workgroups,
        one after another: ``order`` "forward" (x fastest, then y, then z), "reverse", or
        an int seeding a random permutation (a kernel whose workgroups cooperate through
        global memory must be right in any order)."""
        gx, gy, gz = [*grid, 1, 1][:3]
        threads = int(np.prod(block))
        if threads <= 0 or threads > 1024:
            raise EmulatorError(f"bad workgroup size {tuple(block)}")
        ids = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
        if order == "reverse":
            ids.reverse()
        elif isinstance(order, int) and not isinstance(order, bool):
            ids = [ids[i] for i in np.random.default_rng(order).permutation(len(ids))]
        elif order != "forward":
            raise ValueError(f"order must be 'forward', 'reverse' or an int seed, not {order!r}")
        report = RunReport()
        for wg in ids:
            self._run_workgroup(wg, tuple([*block, 1, 1][:3]), kernarg_address, report)
        return report

    def _init_wave(self, index: int, wg: tuple[int, int, int], block: tuple[int, int, int],
                   kernarg_address: int) -> Wave:
        info = self.program.kernel
        w = Wave(index, wg)
        s = 0
        for flag in (".amdhsa_user_sgpr_private_segment_buffer",
                     ".amdhsa_user_sgpr_dispatch_ptr", ".amdhsa_user_sgpr_queue_ptr"):
            if info.flag(flag):
                raise AsmError(f"kernel uses {flag}, which the emulator does not provide")
        if info.flag(".amdhsa_user_sgpr_kernarg_segment_ptr"):
            w.s[s], w.s[s + 1] = kernarg_address & 0xFFFFFFFF, kernarg_address >> 32
            s += 2
        for flag in (".amdhsa_user_sgpr_dispatch_id", ".amdhsa_user_sgpr_flat_scratch_init",
                     ".amdhsa_user_sgpr_private_segment_size"):
            if info.flag(flag):
                raise AsmError(f"kernel uses {flag}, which the emulator does not provide")
        preload = info.flag(".amdhsa_user_sgpr_kernarg_preload_length")
        if preload:
            offset = info.flag(".amdhsa_user_sgpr_kernarg_preload_offset")
            words = self.memory.load(np.array([kernarg_address + 4 * offset], np.uint64),
                                     4 * preload, _no_fault).view(np.uint32).reshape(-1)
            for j in range(preload):
                w.s[s + j] = int(words[j])
            s += preload
        s = max(s, info.flag(".amdhsa_user_sgpr_count", s))
        for axis, flag in enumerate((".amdhsa_system_sgpr_workgroup_id_x",
                                     ".amdhsa_system_sgpr_workgroup_id_y",
                                     ".amdhsa_system_sgpr_workgroup_id_z")):
            if info.flag(flag, 1 if axis == 0 else 0):
                w.s[s] = wg[axis]
                s += 1
        if info.flag(".amdhsa_system_sgpr_workgroup_info") or info.flag(
                ".amdhsa_enable_private_segment"):
            raise AsmError("kernel needs workgroup info or scratch, not provided by the emulator")
        # Work-item ids: packed into v0 (x | y << 10 | z << 20) on gfx90a and later.
        lane_ids = index * LANES + np.arange(LANES)
        bx, by, _ = block
        tx, ty, tz = lane_ids % bx, lane_ids // bx % by, lane_ids // (bx * by)
        w.v[0] = (tx | (ty << 10) | (tz << 20)).astype(np.uint32)
        total = block[0] * block[1] * block[2]
        active = lane_ids < total
        if not active.all():
            from .wave import mask_to_bits

            w.set_s64(EXEC_LO, mask_to_bits(active))
        return w

    def _run_workgroup(self, wg: tuple[int, int, int], block: tuple[int, int, int],
                       kernarg_address: int, report: RunReport) -> None:
        threads = block[0] * block[1] * block[2]
        n_waves = -(-threads // LANES)
        waves = [self._init_wave(i, wg, block, kernarg_address) for i in range(n_waves)]
        self.lds = Lds(self.program.kernel.lds_bytes, wg, self.hazard)
        while True:
            for w in waves:
                if w.state == "run":
                    try:
                        self._run_wave(w)
                    except BudgetExceeded as exc:
                        self._explain_budget(w, waves, exc)
            live = [w for w in waves if w.state != "done"]
            if not live:
                break
            if all(w.state == "barrier" for w in live):
                # As on the hardware, waves that have ended no longer hold the barrier.
                self.lds.barrier()
                for w in live:
                    w.state = "run"
                    w.barriers_passed += 1
        report.workgroups += 1
        report.waves += n_waves
        report.instructions += sum(w.executed for w in waves)
        report.races.extend(self.lds.races)
        report.last_waves = waves
        report.hazards = list(self.hazards)

    def _explain_budget(self, spinning: Wave, waves: list[Wave], exc: BudgetExceeded) -> None:
        """A wave ran past the budget: if the others end up waiting at a barrier it never
        reaches, that is a deadlock; otherwise a plain runaway loop."""
        for w in waves:
            if w is not spinning and w.state == "run":
                self._run_wave(w)
        blocked = [w for w in waves if w.state == "barrier"]
        if blocked:
            at = self.program.instructions[blocked[0].barrier_pc].where()
            raise BarrierDeadlock(f"waves {[w.wave_id for w in blocked]} wait at s_barrier "
                                  f"({at}) that never releases: {exc}") from exc
        raise exc

    def _run_wave(self, w: Wave) -> None:
        compiled, budget = self.compiled, self.budget
        end = len(compiled)
        while w.state == "run":
            if w.pc >= end:
                raise EmulatorError(f"wave {w.wave_id} ran past the last instruction without "
                                    f"s_endpgm")
            c = compiled[w.pc]
            w.pc += 1
            if w.pending:
                message = _hazard(w, c)
                if message:
                    self.hazard(message)
            c.run(w)
            w.executed += 1
            if w.executed > budget:
                raise BudgetExceeded(f"wave {w.wave_id} of workgroup {w.workgroup} ran more "
                                     f"than {budget} instructions (now at {c.ins.where()})")


def _no_fault(lane: int, address: int, why: str) -> None:
    raise EmulatorError(f"kernarg preload at {address:#x}: {why}")


def _check_float_modes(program: Program) -> None:
    info = program.kernel
    expected = {".amdhsa_float_round_mode_32": 0, ".amdhsa_float_round_mode_16_64": 0,
                ".amdhsa_float_denorm_mode_32": 3, ".amdhsa_float_denorm_mode_16_64": 3}
    for key, value in expected.items():
        if info.flag(key, value) != value:
            raise AsmError(f"{key} {info.flag(key)} is not emulated (only round-to-nearest-even "
                           f"with denormals kept)")


def _hazard(w: Wave, c: Compiled) -> str | None:
    pending = w.pending
    for code in c.reads:
        op = pending.get(code)
        if op is not None:
            return _hazard_text(w, c, code, op, "reads")
    if c.kind != "mem":
        for code in c.writes:
            op = pending.get(code)
            if op is not None:
                return _hazard_text(w, c, code, op, "overwrites")
    return None


def _reg_name(code: int) -> str:
    if code < 256:
        return f"v{code}"
    if code < 512:
        return f"a{code - 256}"
    return f"s{code - 512}"


def _hazard_text(w: Wave, c: Compiled, code: int, op: MemOp, verb: str) -> str:
    counter = "vmcnt" if op.counter == "vm" else "lgkmcnt"
    return (f"{c.ins.where()} (wave {w.wave_id} of workgroup {w.workgroup}) {verb} "
            f"{_reg_name(code)} before the load that fills it ({op.where}) has been waited "
            f"for with s_waitcnt {counter}")


def _retire(w: Wave, op: MemOp, machine: Machine) -> None:
    for code in op.codes:
        if w.pending.get(code) is op:
            del w.pending[code]
    if op.lds_write and machine.lds is not None:
        machine.lds.retire(op.op_id)


# -- control-flow and synchronisation instructions ---------------------------------------
@opcode("s_waitcnt")
def _waitcnt(ins: Instruction, ctx: DecodeContext) -> Compiled:
    limits = {key: int(value) for key, value in ins.modifiers}
    vm, lgkm = limits.get("vmcnt"), limits.get("lgkmcnt")
    machine = ctx.machine

    def run(w: Wave) -> None:
        if vm is not None:
            while len(w.vm_queue) > vm:
                _retire(w, w.vm_queue.popleft(), machine)
        if lgkm is not None and len(w.lgkm_queue) > lgkm:
            queue = w.lgkm_queue
            if lgkm == 0:
                while queue:
                    _retire(w, queue.popleft(), machine)
                return
            # Scalar loads may return out of order: of the ops that must have completed,
            # only in-order LDS ops can be named, after discounting the scalar loads.
            smem = sum(1 for op in queue if op.smem)
            sure = len(queue) - lgkm - smem
            kept = []
            while queue and sure > 0:
                op = queue.popleft()
                if op.smem:
                    kept.append(op)
                    continue
                _retire(w, op, machine)
                sure -= 1
            queue.extendleft(reversed(kept))

    return Compiled(ins, run, kind="wait")


@opcode("s_barrier")
def _barrier(ins: Instruction, ctx: DecodeContext) -> Compiled:
    def run(w: Wave) -> None:
        w.state = "barrier"
        w.barrier_pc = ins.index

    return Compiled(ins, run, kind="barrier")


@opcode("s_endpgm")
def _endpgm(ins: Instruction, ctx: DecodeContext) -> Compiled:
    def run(w: Wave) -> None:
        w.state = "done"

    return Compiled(ins, run, kind="end")


@opcode("s_nop", "s_setprio", "s_sleep", "s_sched_barrier", "s_sched_group_barrier")
def _nop(ins: Instruction, ctx: DecodeContext) -> Compiled:
    return Compiled(ins, lambda w: None)


_CONDITIONS = {
    "s_branch": lambda w: True,
    "s_cbranch_scc0": lambda w: w.scc == 0,
    "s_cbranch_scc1": lambda w: w.scc == 1,
    "s_cbranch_vccz": lambda w: w.get_s64(VCC_LO) == 0,
    "s_cbranch_vccnz": lambda w: w.get_s64(VCC_LO) != 0,
    "s_cbranch_execz": lambda w: w.exec_bits == 0,
    "s_cbranch_execnz": lambda w: w.exec_bits != 0,
}


@opcode(*_CONDITIONS)
def _branch(ins: Instruction, ctx: DecodeContext) -> Compiled:
    if len(ins.operands) != 1:
        raise AsmError(f"branch needs one label ({ins.where()})")
    target = ctx.program.target(ins.operands[0], ins)
    cond = _CONDITIONS[ins.mnemonic]
    reads: tuple[int, ...] = ()
    if "vcc" in ins.mnemonic:
        reads = codes(*operands_for_vcc())

    def run(w: Wave) -> None:
        if cond(w):
            w.pc = target

    return Compiled(ins, run, reads, kind="branch")


def operands_for_vcc():
    from .operands import parse_operand

    return (parse_operand("vcc", "branch"),)


__all__ = ["Machine", "RunReport", "operands"]
