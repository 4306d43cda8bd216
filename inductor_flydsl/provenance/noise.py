"""How trustworthy a timing is: the spread of repeated measurements and the machine's load.

Inductor's benchmarkers return one number per candidate (on CPU the median of the calls
made in 100 ms, on GPU a median/min of many runs) and expose no spread. The plugin
therefore re-measures the *finalists* (the winner and the runner-up) a few more rounds
through Inductor's own in-process benchmark path (``AlgorithmSelectorCache.
benchmark_in_current_process``), so each finalist has ``repeats`` independent samples:
Inductor's own plus the re-measured ones. From them: median, quartiles, IQR and CV.

A selection is **confident** when both hold:

- *separated*: the winner's upper quartile lies below the runner-up's lower quartile
  (their interquartile ranges do not overlap), and
- *quiet*: while the finalists were re-measured, other processes used less than
  ``INDUCTOR_FLYDSL_BUSY_CPU`` (default 0.25) of the machine's CPUs, and no other process
  held the GPU (where the driver can tell).

Spread alone is not enough: under a CPU hog the measurements quantize to scheduler time
slices (4, 8, 16 ms) and can be consistently, tightly wrong. Busyness alone is not enough
either: two candidates within each other's noise are a coin toss on a quiet machine too.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import settings

CONFIDENT = "high"
LOW = "low"
# Set by the sweep runner for an item it ran on a machine it found busy (--on-busy record):
# the item's selection is recorded low-confidence whatever its own measurement says.
ENV_BUSY_NOTE = settings.BUSY_NOTE.name
TOP_OTHERS = 3


@dataclass(frozen=True)
class Spread:
    """Summary of one candidate's repeated timings (milliseconds)."""

    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread | None:
        finite = tuple(float(s) for s in samples if isinstance(s, int | float)
                       and math.isfinite(s))
        return cls(finite) if finite else None

    @property
    def repeats(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def quartiles(self) -> tuple[float, float]:
        if len(self.samples) < 2:
            return self.samples[0], self.samples[0]
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return float(q1), float(q3)

    @property
    def iqr(self) -> float:
        q1, q3 = self.quartiles
        return q3 - q1

    @property
    def cv(self) -> float:
        if len(self.samples) < 2 or self.median == 0:
            return 0.0
        return float(statistics.stdev(self.samples) / statistics.fmean(self.samples))


# ---- machine load ---------------------------------------------------------------------
def allowed_cpus() -> set[int] | None:
    """The CPUs this process (and the workers it starts) may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _cpu_total_busy(cpus: set[int] | None) -> tuple[int, int] | None:
    """(busy, total) jiffies of ``cpus`` (all when None) from /proc/stat; None off Linux."""
    busy = total = 0
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if not name.startswith("cpu") or name == "cpu":
                    continue
                if cpus is not None and int(name[3:]) not in cpus:
                    continue
                fields = [int(x) for x in rest.split()]
                idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
                busy += sum(fields[:8]) - idle
                total += sum(fields[:8])
    except (OSError, ValueError, IndexError):
        return None
    return (busy, total) if total else None


def _proc_cpu(pid: str) -> tuple[str, int, int] | None:
    """(command name, utime + stime jiffies of every thread, session id) of a process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    name = text[text.find("(") + 1:text.rfind(")")]
    rest = text[text.rfind(")") + 2:].split()
    try:
        return name, int(rest[11]) + int(rest[12]), int(rest[3])
    except (IndexError, ValueError):
        return None


def _all_procs() -> dict[str, tuple[str, int, int]]:
    found: dict[str, tuple[str, int, int]] = {}
    with contextlib.suppress(OSError):
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                info = _proc_cpu(pid)
                if info is not None:
                    found[pid] = info
    return found


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_threshold() -> float:
    return settings.BUSY_CPU.value()


def repeats_setting() -> int:
    return settings.REPEATS.value()


@dataclass
class MachineLoad:
    """What the machine looked like during a measurement window."""

    window_s: float = 0.0
    cpus: int = 1
    loadavg_1m: float | None = None
    others_cpu: float | None = None  # CPUs' worth used by other processes in the window
    top_others: list[dict[str, Any]] = field(default_factory=list)  # pid, name, cpu
    gpu: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # set when the sweep found the machine busy before the item

    @property
    def busy_reasons(self) -> list[str]:
        reasons = []
        limit = busy_threshold() * self.cpus
        if self.others_cpu is not None and self.others_cpu > limit:
            names = ", ".join(f"{p['name']} ({p['cpu']:.2f})" for p in self.top_others)
            reasons.append(f"other processes used {self.others_cpu:.2f} of {self.cpus} CPUs "
                           f"(limit {limit:.2f})" + (f": {names}" if names else ""))
        if self.gpu.get("other_processes"):
            reasons.append(f"{self.gpu['other_processes']} other process(es) on the GPU")
        if self.note:
            reasons.append(self.note)
        return reasons

    @property
    def busy(self) -> bool:
        return bool(self.busy_reasons)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["busy"] = self.busy
        return data

    def to_text(self) -> str:
        return json.dumps(self.as_json(), sort_keys=True, default=str)


@contextlib.contextmanager
def watch_machine(gpu_index: int | None = None,
                  exclude_sessions: set[int] | None = None) -> Iterator[MachineLoad]:
    """Measure what other processes (not this one, nor its threads, nor processes of
    ``exclude_sessions``) use of the CPUs this process may run on (its affinity: a sweep
    pinned with ``taskset`` cares only about its own cores) while the body runs. Linux
    only; elsewhere ``others_cpu`` stays None (unknown)."""
    load = MachineLoad(cpus=cpu_count(), note=settings.BUSY_NOTE.value())
    with contextlib.suppress(OSError, AttributeError):
        load.loadavg_1m = round(os.getloadavg()[0], 2)
    me = str(os.getpid())
    cpus = allowed_cpus()
    before, procs_before = _cpu_total_busy(cpus), _all_procs()
    start = time.monotonic()
    try:
        yield load
    finally:
        load.window_s = round(time.monotonic() - start, 3)
        after, procs_after = _cpu_total_busy(cpus), _all_procs()
        _fill_cpu(load, before, after, procs_before, procs_after, me,
                  exclude_sessions or set())
        if gpu_index is not None:
            load.gpu = gpu_state(gpu_index)


def _fill_cpu(load: MachineLoad, before: tuple[int, int] | None,
              after: tuple[int, int] | None,
              procs_before: dict[str, tuple[str, int, int]],
              procs_after: dict[str, tuple[str, int, int]], me: str,
              exclude_sessions: set[int]) -> None:
    if before is None or after is None or after[1] <= before[1]:
        return
    wall_ticks = (after[1] - before[1]) / load.cpus  # jiffies per CPU in the window

    def used(pid: str) -> int:
        return procs_after[pid][1] - procs_before.get(pid, ("", 0, 0))[1]

    ours = [pid for pid, info in procs_after.items()
            if pid == me or info[2] in exclude_sessions]
    others = max(0, (after[0] - before[0]) - sum(used(pid) for pid in ours))
    load.others_cpu = round(others / wall_ticks, 3) if wall_ticks else None
    deltas = []
    for pid, (name, _, _) in procs_after.items():
        if pid in ours:
            continue
        delta = used(pid)
        if delta > 0 and wall_ticks:
            deltas.append({"pid": int(pid), "name": name, "cpu": round(delta / wall_ticks, 3)})
    deltas.sort(key=lambda p: -p["cpu"])
    load.top_others = deltas[:TOP_OTHERS]


def probe_machine(window_s: float = 1.0, gpu_index: int | None = None,
                  exclude_sessions: set[int] | None = None) -> MachineLoad:
    """Watch the machine for ``window_s`` seconds while this process sleeps."""
    with watch_machine(gpu_index, exclude_sessions) as load:
        time.sleep(window_s)
    return load


def gpu_state(index: int) -> dict[str, Any]:
    """What the driver tells about GPU ``index`` (best effort; empty when it tells
    nothing): other processes holding it (NVML), utilization, memory others use."""
    state: dict[str, Any] = {}
    try:
        import torch

        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return state
        free, total = torch.cuda.mem_get_info(index)
        mine = torch.cuda.memory_reserved(index)
        state["mem_others_mib"] = max(0, (total - free - mine)) // (1 << 20)
        with contextlib.suppress(Exception):
            state["utilization"] = int(torch.cuda.utilization(index))
    except Exception:  # no driver query available: say nothing rather than guess
        return state
    with contextlib.suppress(Exception):
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        state["other_processes"] = sum(1 for p in procs if p.pid != os.getpid())
    return state


# ---- the decision -----------------------------------------------------------------------
@dataclass(frozen=True)
class Confidence:
    """The verdict on one autotune selection, recorded with its winner."""

    level: str  # CONFIDENT or LOW
    reason: str
    machine: MachineLoad | None = None
    runner_up_ms: float | None = None

    @property
    def confident(self) -> bool:
        return self.level == CONFIDENT


def separated(winner: Spread, runner_up: Spread) -> bool:
    """The winner's upper quartile is below the runner-up's lower quartile."""
    return winner.quartiles[1] < runner_up.quartiles[0]


def decide(winner: Spread | None, runner_up: Spread | None,
           machine: MachineLoad | None) -> Confidence:
    """Confident only when the machine was quiet and the winner stands clear of the
    runner-up beyond both candidates' spread."""
    runner_ms = runner_up.median if runner_up is not None else None
    busy = machine.busy_reasons if machine is not None else []
    if busy:
        return Confidence(LOW, "machine busy: " + "; ".join(busy), machine, runner_ms)
    if winner is None:
        return Confidence(LOW, "no usable winner timing", machine, runner_ms)
    if runner_up is None:
        return Confidence(CONFIDENT, "only one candidate measured ok; quiet machine",
                          machine, runner_ms)
    if winner.repeats < 2 or runner_up.repeats < 2:
        return Confidence(LOW, "a single sample per finalist: no spread to compare",
                          machine, runner_ms)
    w_q3, r_q1 = winner.quartiles[1], runner_up.quartiles[0]
    if separated(winner, runner_up):
        return Confidence(CONFIDENT, f"winner Q3 {w_q3:.4g} ms < runner-up Q1 {r_q1:.4g} ms "
                          f"over {winner.repeats} repeats", machine, runner_ms)
    return Confidence(LOW, f"not separated from the runner-up beyond the noise: winner Q3 "
                      f"{w_q3:.4g} ms >= runner-up Q1 {r_q1:.4g} ms", machine, runner_ms)
