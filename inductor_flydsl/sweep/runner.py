"""The sweep loop: one worker subprocess per item, on one or more devices.

Each item runs in a fresh ``python -m inductor_flydsl.sweep.worker`` process (its own
session, so a timeout kills its whole process group). A crash, an abort (exit 134), a kill
or a hang past ``timeout_s`` is recorded in ``sweep_status`` as ``failed`` with the error
tail, and the sweep goes on. The worker commits its own tuning rows; the runner commits
one ``sweep_status`` row per finished item, so a ``kill -9`` of the runner loses nothing
committed (workers get SIGKILL with it, through ``PR_SET_PDEATHSIG``).

``resume`` skips items whose status for this device and software is ``done`` or
``skipped`` (and ``failed`` unless ``retry_failed``). A budget stops new items once spent
(running ones finish); SIGINT/SIGTERM kill the running workers, mark their items
``interrupted`` (redone on resume) and stop. Devices run in parallel from one thread
that polls its workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..db import sweep_state
from ..db.store import TuningDB, utc_now
from ..problems.keys import canonical_json
from ..provenance.noise import ENV_BUSY_NOTE
from ..settings import (
    ENV_DB,
    ENV_ENABLE,
    ENV_MODE,
    ENV_REUSE,
    ENV_SHIPPED,
    TOP_K,
    SettingError,
    environment_errors,
)
from .batch import MAX_BATCH
from .busy import HOLD, RUN, BusyGate, BusyWait, default_policy
from .items import ItemError, SweepItem, shard
from .outcomes import (
    DONE,
    ERROR_TAIL,
    FAILED,
    INTERRUPTED,
    POLL_S,
    SKIPPED,
    Identity,
    ItemOutcome,
    Slot,
    SweepSummary,
    file_tail,
    outcome_of,
    stop_on_signals,
)
from .worker import RESULT_PREFIX


class SweepError(Exception):
    """The sweep cannot start (bad devices, unusable DB); ``str(exc)`` says why."""


# ---- devices --------------------------------------------------------------------------
def _gpu_runtime() -> tuple[bool, int, bool]:
    import torch

    available = torch.cuda.is_available()
    return available, torch.cuda.device_count() if available else 0, (
        torch.version.hip is not None)


def gpu_slot(index: int, *, rocm: bool, environ: dict[str, str]) -> Slot:
    """Make GPU ``index`` (as this process numbers them) the worker's only one: set
    CUDA_VISIBLE_DEVICES (CUDA) or HIP_VISIBLE_DEVICES (ROCm) to its physical id, read
    through this process's own visible-device list."""
    names = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") if rocm else (
        "CUDA_VISIBLE_DEVICES",)
    parent = next((environ[n] for n in names if environ.get(n, "").strip()), None)
    visible = [v.strip() for v in parent.split(",")] if parent else None
    if visible is not None and index >= len(visible):
        raise SweepError(f"GPU {index} is not visible here ({names[0]}={parent})")
    physical = visible[index] if visible is not None else str(index)
    if rocm:
        env = (("HIP_VISIBLE_DEVICES", physical), ("CUDA_VISIBLE_DEVICES", None))
    else:
        env = (("CUDA_VISIBLE_DEVICES", physical),)
    return Slot(name=str(index), device="cuda", env=env)


def resolve_slots(spec: str | None) -> list[Slot]:
    """``None``/``auto`` (first GPU, else the CPU), ``cpu``, ``all`` or ``0,1,...``."""
    text = (spec or "auto").strip().lower()
    if text == "cpu":
        return [Slot(name="cpu", device="cpu")]
    available, count, rocm = _gpu_runtime()
    if text == "auto":
        return [gpu_slot(0, rocm=rocm, environ=dict(os.environ))] if available else [
            Slot(name="cpu", device="cpu")]
    if not available:
        raise SweepError(f"--devices {spec}: no GPU is available here (use cpu)")
    if text == "all":
        indexes = list(range(count))
    else:
        try:
            indexes = sorted({int(x) for x in text.split(",") if x.strip()})
        except ValueError:
            raise SweepError(f"bad --devices {spec!r}: use all, cpu or 0,1,...") from None
    if not indexes or any(not 0 <= i < count for i in indexes):
        raise SweepError(f"--devices {spec}: this machine has GPUs 0..{count - 1}")
    return [gpu_slot(i, rocm=rocm, environ=dict(os.environ)) for i in indexes]


def _worker_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "inductor_flydsl.sweep.worker", *args]


def probe_identity(slots: list[Slot], timeout_s: float = 300) -> Identity:
    """Device and software as the workers will see them (GPU: asked of a worker process
    per slot, so CUDA is never initialised in the runner). Mixed devices are refused."""
    if slots[0].device == "cpu":
        from .worker import describe

        return Identity(**describe("cpu"))
    procs = [subprocess.Popen(_worker_cmd("--describe", "--device", s.device),
                              env=s.environ(dict(os.environ)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for s in slots]
    found = []
    for slot, proc in zip(slots, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SweepError(f"GPU {slot.name}: describing the device timed out") from None
        if proc.returncode != 0:
            raise SweepError(f"GPU {slot.name}: describing the device failed: "
                             f"{err.strip()[-500:]}")
        found.append(Identity(**json.loads(out.strip().splitlines()[-1])))
    ids = {i.device_id for i in found}
    if len(ids) > 1:
        names = ", ".join(f"GPU {s.name}: {i.device['name']} ({i.device['arch']}, "
                          f"{i.device['compute_units']} CUs)"
                          for s, i in zip(slots, found, strict=True))
        raise SweepError(f"--devices names different devices ({names}); run one sweep per "
                         "kind of device")
    return found[0]


# ---- selection ------------------------------------------------------------------------
def statuses(db: TuningDB, identity: Identity) -> dict[str, str]:
    return sweep_state.statuses(db, identity.device_id, identity.software_id)


def select_items(items: list[SweepItem], *, shard_spec: tuple[int, int] | None,
                 previous: dict[str, str], resume: bool,
                 retry_failed: bool) -> tuple[list[SweepItem], int]:
    """The items to run, in the given order, and how many ``resume`` skipped."""
    if shard_spec is not None:
        mine = {item.item_id for item in shard(items, *shard_spec)}
        items = [item for item in items if item.item_id in mine]
    if not resume:
        return items, 0
    finished = {DONE, SKIPPED} | (set() if retry_failed else {FAILED})
    todo = [item for item in items if previous.get(item.item_id) not in finished]
    return todo, len(items) - len(todo)


# ---- options and summary --------------------------------------------------------------
@dataclass
class SweepOptions:
    db: Path
    backends: str | None = None
    timing: str = "graph"  # on a GPU: graph (max-autotune) or eager (sweep/worker.py)
    resume: bool = False
    retry_failed: bool = False
    shard: tuple[int, int] | None = None
    budget_s: float | None = None
    timeout_s: float = 900.0
    progress: bool = True
    handle_signals: bool = True
    on_busy: str = field(default_factory=default_policy)  # wait, backoff, record: busy.py
    busy_max_wait_s: float = 600.0
    remeasure: bool = False  # workers never reuse a recorded winner (INDUCTOR_FLYDSL_REUSE=0)
    # "worker": one long-lived worker per device tunes batches of items (sweep/persistent.py);
    # "item": a fresh worker process per item
    isolate: str = "worker"
    batch_items: int = MAX_BATCH  # items per compiled graph in persistent mode (1: none)


# ---- workers --------------------------------------------------------------------------
@dataclass
class _Running:
    item: SweepItem
    slot: Slot
    proc: subprocess.Popen[bytes]
    started: float
    workdir: Path
    stdout: IO[bytes]
    stderr: IO[bytes]
    busy: str = ""


def _result_line(path: Path) -> dict[str, Any] | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith(RESULT_PREFIX):
            try:
                value = json.loads(line[len(RESULT_PREFIX):])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _outcome(run: _Running, rc: int | None, timed_out: float | None,
             identity: Identity) -> ItemOutcome:
    seconds = time.monotonic() - run.started
    stderr_tail = file_tail(run.workdir / "stderr.txt")
    result = None if timed_out is not None else _result_line(run.workdir / "stdout.txt")
    return outcome_of(run.item, result, seconds=seconds, slot=run.slot.name, busy=run.busy,
                      rc=rc, timed_out=timed_out, stderr_tail=stderr_tail,
                      identity=identity)


class SweepRunner:
    def __init__(self, options: SweepOptions, slots: list[Slot], identity: Identity,
                 on_event: Callable[[str, ItemOutcome | None], None] | None = None) -> None:
        self.options = options
        self.slots = slots
        self.identity = identity
        self.on_event = on_event or (lambda kind, outcome: None)
        self.stop_signal: int | None = None
        self.gate = BusyGate(options.on_busy, options.busy_max_wait_s)
        try:
            self.db = TuningDB.open(options.db, writable=True, tool="sweep")
        except Exception as exc:  # UnusableDB, sqlite3.Error, OSError
            raise SweepError(str(exc)) from exc
        self.run_id = self.db.run_id()
        sweep_state.register(self.db, identity.device, identity.software)

    def close(self) -> None:
        self.db.close()

    # ---- recording ------------------------------------------------------------------
    def record(self, outcome: ItemOutcome) -> None:
        row = {"device_id": self.identity.device_id, "software_id": self.identity.software_id,
               "item_id": outcome.item.item_id, "item": canonical_json(outcome.item.to_dict()),
               "status": outcome.status, "error": outcome.error[-ERROR_TAIL:],
               "seconds": round(outcome.seconds, 3),
               "problem_ids": json.dumps(outcome.problem_ids), "run_id": self.run_id,
               "updated_at": utc_now()}
        # an interrupted item never replaces an earlier run's finished one
        sweep_state.record_status(self.db, row,
                                  keep_status=DONE if outcome.status == INTERRUPTED else None)

    def wins_by_backend(self, problem_ids: set[str]) -> dict[str, int]:
        counts = Counter(backend for problem_id, backend in sweep_state.winner_backends(
            self.db, self.identity.device_id, self.identity.software_id)
            if problem_id in problem_ids)
        return dict(counts.most_common())

    def low_confidence(self, problem_ids: set[str]) -> list[str]:
        return sorted(p for p in sweep_state.low_confidence_ids(
            self.db, self.identity.device_id, self.identity.software_id)
            if p in problem_ids)

    def _next_item(self, pending: list[SweepItem], running: dict[str, _Running],
                   ) -> tuple[SweepItem | None, str]:
        """The next item to start (from the end of ``pending``) once the busy gate lets
        it, and its busy note; None while the gate holds it back."""
        sessions = {run.proc.pid for run in running.values()}
        for _ in range(len(pending)):
            verdict, note = self.gate.check(pending[-1].item_id, sessions)
            if verdict == RUN:
                return pending.pop(), note
            if verdict == HOLD:
                return None, ""
            pending.insert(0, pending.pop())  # DEFER: back of the queue
        return None, ""

    # ---- running --------------------------------------------------------------------
    def worker_command(self, slot: Slot, workdir: Path, *args: str) -> list[str]:
        cmd = _worker_cmd(*args, "--db", str(self.options.db), "--device", slot.device,
                          "--cache-dir", str(workdir / "inductor_cache"), "--parent-pid",
                          str(os.getpid()))
        if self.options.backends:
            cmd += ["--backends", self.options.backends]
        if self.options.timing != "graph":
            cmd += ["--timing", self.options.timing]
        return cmd

    def worker_env(self, slot: Slot, workdir: Path, busy: str = "") -> dict[str, str]:
        env = slot.environ(dict(os.environ))
        env[ENV_SHIPPED] = "0"
        env["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor_cache")
        for name in NOT_PASSED_TO_WORKERS:
            env.pop(name, None)
        if busy:
            env[ENV_BUSY_NOTE] = busy  # the selection is recorded low-confidence
        if self.options.remeasure:
            env[ENV_REUSE] = "0"
        # an offline sweep measures every eligible FlyDSL config (no top-k preselection),
        # unless the user set INDUCTOR_FLYDSL_TOP_K: its records are then complete, and
        # the report compares the model's ranking with all of them
        env.setdefault(TOP_K.name, "0")
        return env

    def _launch(self, item: SweepItem, slot: Slot, root: Path, busy: str = "") -> _Running:
        workdir = Path(tempfile.mkdtemp(prefix=f"{item.item_id}-", dir=root))
        cmd = self.worker_command(slot, workdir, "--item", canonical_json(item.to_dict()))
        env = self.worker_env(slot, workdir, busy)
        stdout = open(workdir / "stdout.txt", "wb")
        stderr = open(workdir / "stderr.txt", "wb")
        proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        return _Running(item, slot, proc, time.monotonic(), workdir, stdout, stderr, busy)

    @staticmethod
    def _kill(run: _Running) -> None:
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        run.proc.wait()

    def _finish(self, run: _Running, outcome: ItemOutcome) -> ItemOutcome:
        run.stdout.close()
        run.stderr.close()
        self.record(outcome)
        shutil.rmtree(run.workdir, ignore_errors=True)
        self.on_event("finished", outcome)
        return outcome

    def run(self, items: list[SweepItem], summary: SweepSummary) -> None:
        if self.options.isolate == "worker":
            from .persistent import WorkerPlan, run_persistent

            options = self.options
            run_persistent(WorkerPlan(
                slots=self.slots, identity=self.identity, gate=self.gate,
                batch_items=options.batch_items, budget_s=options.budget_s,
                timeout_s=options.timeout_s, handle_signals=options.handle_signals,
                worker_command=self.worker_command, worker_env=self.worker_env,
                record=self.record, on_event=self.on_event), items, summary)
            return
        pending = list(reversed(items))
        running: dict[str, _Running] = {}
        start = time.monotonic()
        root = Path(tempfile.mkdtemp(prefix="inductor_flydsl_sweep_"))
        try:
            with stop_on_signals(self, self.options.handle_signals):
                while pending or running:
                    if self.stop_signal is not None:
                        summary.stopped = signal.Signals(self.stop_signal).name
                        for run in running.values():
                            self._kill(run)
                            summary.outcomes.append(self._finish(run, ItemOutcome(
                                item=run.item, status=INTERRUPTED, slot=run.slot.name,
                                seconds=time.monotonic() - run.started,
                                error=f"sweep stopped by {summary.stopped}")))
                        running.clear()
                        break
                    budget = self.options.budget_s
                    if pending and budget is not None and time.monotonic() - start >= budget:
                        summary.stopped = "budget"
                    for slot in self.slots:
                        if summary.stopped or not pending or slot.name in running:
                            continue
                        item, busy = self._next_item(pending, running)
                        if item is None:
                            break
                        running[slot.name] = self._launch(item, slot, root, busy)
                        self.on_event("started", ItemOutcome(item=item, status="running",
                                                             slot=slot.name))
                    for name, run in list(running.items()):
                        rc = run.proc.poll()
                        elapsed = time.monotonic() - run.started
                        if rc is None and elapsed > self.options.timeout_s:
                            self._kill(run)
                            outcome = _outcome(run, None, self.options.timeout_s,
                                               self.identity)
                        elif rc is None:
                            continue
                        else:
                            outcome = _outcome(run, rc, None, self.identity)
                        del running[name]
                        summary.outcomes.append(self._finish(run, outcome))
                    if summary.stopped == "budget" and not running:
                        break
                    time.sleep(POLL_S)
        finally:
            for run in running.values():  # only on an unexpected error
                self._kill(run)
            shutil.rmtree(root, ignore_errors=True)
            summary.not_started = len(pending)
            summary.busy_waited_s = self.gate.waited_s
            summary.wall_s = time.monotonic() - start


# variables the runner removes from its workers' environment (worker_env): theirs alone
# never reach a worker
NOT_PASSED_TO_WORKERS = (ENV_ENABLE, ENV_DB, ENV_MODE, ENV_BUSY_NOTE)


def check_worker_environment() -> None:
    """SweepError naming every bad ``INDUCTOR_FLYDSL_*`` value the runner or its workers
    would see (a worker enables the plugin strictly: each item would fail on it)."""
    bad = [e for e in environment_errors() if e.name not in NOT_PASSED_TO_WORKERS]
    if bad:
        raise SweepError(f"bad setting: {SettingError.combine(bad)}")


def run_sweep(items: list[SweepItem], options: SweepOptions, slots: list[Slot],
              identity: Identity,
              on_event: Callable[[str, ItemOutcome | None], None] | None = None,
              on_plan: Callable[[SweepSummary, list[SweepItem]], None] | None = None,
              on_wait: Callable[[BusyWait | None], None] | None = None,
              ) -> SweepSummary:
    """Select (shard, resume) and run ``items``; every finished item is committed.
    ``on_wait`` is told while an item waits for a quiet machine (``busy.BusyGate``)."""
    if not items:
        raise ItemError("no sweep items")
    check_worker_environment()
    runner = SweepRunner(options, slots, identity, on_event)
    runner.gate.on_wait = on_wait
    try:
        shard_text = f"{options.shard[0]}/{options.shard[1]}" if options.shard else None
        todo, finished = select_items(items, shard_spec=options.shard,
                                      previous=statuses(runner.db, identity),
                                      resume=options.resume,
                                      retry_failed=options.retry_failed)
        summary = SweepSummary(db=str(options.db), device=identity.device,
                               software=identity.software, shard=shard_text,
                               items_total=len(todo) + finished, resumed_skip=finished)
        if on_plan is not None:
            on_plan(summary, todo)
        runner.run(todo, summary)
        tuned = {p for o in summary.outcomes if o.status == DONE for p in o.problem_ids}
        summary.wins_by_backend = runner.wins_by_backend(tuned)
        summary.low_confidence = runner.low_confidence(tuned)
        return summary
    finally:
        runner.close()
