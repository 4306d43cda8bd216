"""Persistent sweep workers: one long-lived worker process per device tunes batch after
batch of items (``python -m inductor_flydsl.sweep.worker --serve``).

A fresh process per item pays Python, torch and Inductor's first-compile set-up (imports,
the CPU ISA probe, pattern-matcher initialisation, the precompiled C++ header) every
time; a persistent worker pays it once and resets Dynamo and the plugin between batches
(worker.reset_between_items). Workers are started as the sweep starts, so their start-up
overlaps the runner's first busy check, and on CPU their set-up runs in the background
while the first batch is traced (warm_up.warm_up; nothing runs beside a benchmark).
Batches group up to ``batch_items`` items into one compiled graph (sweep/batch.py); the
busy note travels with each batch. At the end the idle workers are killed: each has
reported, and its plugin committed and closed, everything.

Faults cost one item, as with a process per item:
- the worker exits (crash, abort, kill) or a batch passes its timeout (``timeout_s`` per
  item in it): the worker is killed and replaced; the batch's items that reported no
  result go back to the front of the queue one per batch; an item that fails alone is
  recorded ``failed`` with the exit status or timeout and the worker's stderr since the
  batch began;
- a batch whose compile raises is retried item by item inside the worker.

Results are committed one item at a time as their lines arrive, so a ``kill -9`` of the
runner loses nothing committed (the worker dies with it: PR_SET_PDEATHSIG), and resume,
budget and SIGINT/SIGTERM behave as in per-item mode.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .batch import plan_batches
from .busy import DEFER, RUN, BusyGate
from .items import SweepItem
from .outcomes import (
    INTERRUPTED,
    POLL_S,
    Identity,
    ItemOutcome,
    Slot,
    SweepSummary,
    file_tail,
    outcome_of,
    stop_on_signals,
)
from .worker import BATCH_PREFIX, RESULT_PREFIX

STARTUP_S = 300.0  # a worker that is not ready by then (and its batch's timeout) is hung


@dataclass
class WorkerPlan:
    """All the persistent workers use of the sweep runner (``runner.SweepRunner`` builds
    one): where to run, what to run, the limits, and where results go."""

    slots: list[Slot]
    identity: Identity
    gate: BusyGate  # whether the machine is quiet enough to start a batch
    batch_items: int  # items per compiled graph
    budget_s: float | None  # no batch starts after this (None: no limit)
    timeout_s: float  # per item of a batch
    handle_signals: bool  # SIGINT/SIGTERM stop the sweep cleanly
    worker_command: Callable[..., list[str]]  # (slot, workdir, *args) -> argv
    worker_env: Callable[[Slot, Path], dict[str, str]]
    record: Callable[[ItemOutcome], None]  # commit an item's outcome to the DB
    on_event: Callable[[str, ItemOutcome], None]  # "started" / "finished", for progress
    stop_signal: int | None = None  # set by SIGINT/SIGTERM (outcomes.stop_on_signals)


@dataclass
class _Worker:
    slot: Slot
    proc: subprocess.Popen[bytes]
    workdir: Path
    stdout: IO[bytes]
    stderr: IO[bytes]
    offset: int = 0  # bytes of stdout.txt already read
    partial: bytes = b""  # an unfinished last line
    batch_id: int = 0
    batch: list[SweepItem] = field(default_factory=list)
    reported: set[str] = field(default_factory=set)
    started: float = 0.0  # when the current batch was sent (or the worker became ready)
    ready: bool = False  # the worker finished its start-up
    stderr_start: int = 0  # stderr.txt size when the batch was sent
    busy: str = ""

    @property
    def idle(self) -> bool:
        return not self.batch

    def new_lines(self) -> list[str]:
        try:
            with open(self.workdir / "stdout.txt", "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]

    def stderr_tail(self) -> str:
        """What the worker wrote to stderr since the current batch began."""
        return file_tail(self.workdir / "stderr.txt", start=self.stderr_start)


class PersistentPool:
    """The workers of one sweep, one per slot, started on demand and replaced on faults."""

    def __init__(self, plan: WorkerPlan, root: Path) -> None:
        self.plan = plan
        self.root = root
        self.workers: dict[str, _Worker] = {}
        self.next_batch = 0

    def start(self, slot: Slot) -> _Worker:
        """A new worker (its start-up, several seconds, overlaps the runner's busy check
        and the previous batch's bookkeeping)."""
        workdir = Path(tempfile.mkdtemp(prefix=f"worker-{slot.name}-", dir=self.root))
        cmd = self.plan.worker_command(slot, workdir, "--serve")
        env = self.plan.worker_env(slot, workdir)
        stdout = open(workdir / "stdout.txt", "wb")
        stderr = open(workdir / "stderr.txt", "wb")
        proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr,
                                stdin=subprocess.PIPE, start_new_session=True)
        worker = _Worker(slot, proc, workdir, stdout, stderr)
        self.workers[slot.name] = worker
        return worker

    def send(self, slot: Slot, batch: list[SweepItem], busy: str) -> None:
        """Hand ``batch`` to the slot's worker (started if it has none, or a dead one);
        ``busy`` (the machine was busy before the batch) travels with the batch, so its
        selections are recorded low-confidence, as per item."""
        worker = self.workers.get(slot.name)
        if worker is not None and worker.proc.poll() is not None:
            self.stop(worker)
            worker = None
        if worker is None:
            worker = self.start(slot)
        self.next_batch += 1
        worker.batch_id, worker.batch, worker.reported = self.next_batch, batch, set()
        worker.started = time.monotonic()
        worker.busy = busy
        worker.stderr_start = (worker.workdir / "stderr.txt").stat().st_size
        request = {"batch": worker.batch_id, "items": [i.to_dict() for i in batch],
                   "busy": busy}
        assert worker.proc.stdin is not None
        try:
            worker.proc.stdin.write((json.dumps(request) + "\n").encode())
            worker.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker died: poll() reports it

    def stop(self, worker: _Worker) -> None:
        """End a worker: kill its process group. Every caller either has all its results
        (an idle worker's plugin has committed and closed its DB; killing skips a torch
        interpreter's exit, about a second) or is giving up on it (dead, hung, stopped)."""
        try:
            os.killpg(worker.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        worker.proc.wait()
        worker.stdout.close()
        worker.stderr.close()
        shutil.rmtree(worker.workdir, ignore_errors=True)
        self.workers.pop(worker.slot.name, None)

    def sessions(self) -> set[int]:
        return {w.proc.pid for w in self.workers.values()}


def _results(worker: _Worker) -> tuple[list[dict[str, Any]], bool]:
    """The current batch's new result lines, and whether the batch is complete. A
    worker's start-up (imports, Inductor's one-time set-up) does not count against its
    first batch's timeout: the clock restarts when the worker says it is ready."""
    found, complete = [], False
    for line in worker.new_lines():
        if line.startswith(BATCH_PREFIX) and '"ready"' in line:
            worker.ready, worker.started = True, time.monotonic()
            continue
        if line.startswith(RESULT_PREFIX):
            try:
                value = json.loads(line[len(RESULT_PREFIX):])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and value.get("batch") == worker.batch_id:
                found.append(value)
        elif line.startswith(BATCH_PREFIX):
            try:
                complete |= json.loads(line[len(BATCH_PREFIX):]).get("batch") == \
                    worker.batch_id
            except (json.JSONDecodeError, AttributeError):
                continue
    return found, complete


def run_persistent(plan: WorkerPlan, items: list[SweepItem],
                   summary: SweepSummary) -> None:
    queue = plan_batches(items, plan.batch_items)
    start = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="inductor_flydsl_sweep_"))
    pool = PersistentPool(plan, root)

    def finish(outcome: ItemOutcome) -> None:
        plan.record(outcome)
        summary.outcomes.append(outcome)
        plan.on_event("finished", outcome)

    def item_seconds(worker: _Worker) -> float:
        """A batch's items share one compile: each is charged an equal part of it."""
        return (time.monotonic() - worker.started) / len(worker.batch)

    try:
        if queue and plan.budget_s != 0:
            for slot in plan.slots:  # start-up overlaps the first busy check
                pool.start(slot)
        with stop_on_signals(plan, plan.handle_signals):
            while queue or any(not w.idle for w in pool.workers.values()):
                if plan.stop_signal is not None:
                    summary.stopped = signal.Signals(plan.stop_signal).name
                    for worker in list(pool.workers.values()):
                        for item in worker.batch:
                            if item.item_id not in worker.reported:
                                finish(ItemOutcome(
                                    item=item, status=INTERRUPTED, slot=worker.slot.name,
                                    seconds=time.monotonic() - worker.started,
                                    error=f"sweep stopped by {summary.stopped}"))
                        pool.stop(worker)
                    break
                budget = plan.budget_s
                if queue and budget is not None and time.monotonic() - start >= budget:
                    summary.stopped = "budget"
                for slot in plan.slots:
                    worker = pool.workers.get(slot.name)
                    if summary.stopped or not queue or (worker and not worker.idle):
                        continue
                    verdict, busy = plan.gate.check(queue[0][0].item_id, pool.sessions())
                    if verdict != RUN:
                        if verdict == DEFER and len(queue) > 1:
                            queue.append(queue.pop(0))
                        break
                    batch = queue.pop(0)
                    pool.send(slot, batch, busy)
                    for item in batch:
                        plan.on_event("started", ItemOutcome(item=item, status="running",
                                                               slot=slot.name))
                for worker in list(pool.workers.values()):
                    if worker.idle:
                        continue
                    results, complete = _results(worker)
                    by_id = {i.item_id: i for i in worker.batch}
                    for result in results:
                        item = by_id.get(str(result.get("item_id")))
                        if item is None or item.item_id in worker.reported:
                            continue
                        worker.reported.add(item.item_id)
                        finish(outcome_of(item, result, seconds=item_seconds(worker),
                                          slot=worker.slot.name, busy=worker.busy,
                                          rc=None, timed_out=None,
                                          stderr_tail=worker.stderr_tail(),
                                          identity=plan.identity))
                    left = [i for i in worker.batch if i.item_id not in worker.reported]
                    if complete:
                        worker.batch = []
                        if left:  # a batch that ended without an item's result
                            for item in left:
                                finish(outcome_of(item, None, seconds=0.0,
                                                  slot=worker.slot.name, busy=worker.busy,
                                                  rc=None, timed_out=None,
                                                  stderr_tail="the worker reported no "
                                                  "result for this item",
                                                  identity=plan.identity))
                        continue
                    rc = worker.proc.poll()
                    limit = plan.timeout_s * max(1, len(left)) + (
                        0 if worker.ready else STARTUP_S)
                    timed_out = rc is None and time.monotonic() - worker.started > limit
                    if rc is None and not timed_out:
                        continue
                    tail = worker.stderr_tail()
                    pool.stop(worker)
                    if len(left) > 1:  # retry each alone: a fault then costs one item
                        queue[:0] = [[item] for item in left]
                        continue
                    for item in left:
                        finish(outcome_of(item, None, seconds=time.monotonic()
                                          - worker.started, slot=worker.slot.name,
                                          busy=worker.busy, rc=rc,
                                          timed_out=plan.timeout_s if timed_out else None,
                                          stderr_tail=tail, identity=plan.identity))
                if summary.stopped == "budget" and all(
                        w.idle for w in pool.workers.values()):
                    break
                time.sleep(POLL_S)
    finally:
        for worker in list(pool.workers.values()):
            pool.stop(worker)
        shutil.rmtree(root, ignore_errors=True)
        summary.not_started = sum(len(batch) for batch in queue)
        summary.busy_waited_s = plan.gate.waited_s
        summary.wall_s = time.monotonic() - start
