"""Worker processes that compile FlyDSL jobs, each worker taking its next job itself.

Used by the compile catalog (``compile-check``: one pool per run, :func:`run_pool`, in the
CLI's own process) and by the parallel candidate builds of a compile (:mod:`.prebuild`:
one pool kept for the process, its workers started and warmed up when the plugin is
enabled; the pool lives in a build server of its own, :mod:`.build_server`, which forks
the workers from its only thread, so no user ``__main__`` is imported). MLIR compiles
single-threaded, so one job runs at a time per process. This is a small dedicated pool
rather than ``concurrent.futures``, because an executor can neither stop one overrunning
task nor tell which task killed a worker (a dead worker breaks the executor and fails
every pending future). Here:

* **Workers pull.** Jobs are submitted as *runs* (a list of job payloads); every worker
  gets each run's payloads once and takes the run's next free job from :class:`Claims`
  (a flag per job in shared memory, under a process-shared lock) without asking the
  parent. The parent only collects results, so a parent thread that holds the GIL (a
  compile's Python work) leaves no finished worker idle.
* **Failures stay with their job.** A job that exceeds ``timeout_s`` has its worker
  killed and is reported ``timeout``; a worker that dies (abort, segfault, OOM kill) is
  reported as its current job's ``crashed``; a fresh worker takes over. Workers ignore
  SIGINT: the parent stops them (Ctrl-C keeps what finished), and end with it: SIGTERM
  when the parent process dies (``parent_death.py``). When workers keep dying
  before their first job, the pool gives up (``broken``): the runs end with their free
  jobs closed and :func:`run_pool` raises.
* **Warm workers.** A worker imports ``warm_up`` modules and, when it has no job waiting
  yet, runs ``warm_up_job`` (its result discarded) before it says it is ready, so the
  first real job does not pay for FlyDSL's first compile in a process.
* **Started on demand.** Workers are started for runs with free jobs, and by
  :meth:`WorkerPool.prewarm`; a worker idle for ``idle_exit_s`` exits and is not
  replaced until there is work again.

Results reach a run's ``on_event(event)`` (a :class:`PoolEvent`: kind ``"result"`` with
the worker's payload, ``{"result": ...}`` or ``{"error": ...}``, or ``"crashed"`` /
``"timeout"`` with the reason), from the thread that serves the pool.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .build_claims import CAPACITY, CLOSED, ELSEWHERE, Claims
from .parent_death import end_with_parent


@dataclass
class PoolEvent:
    index: int  # the job's index in its run
    kind: str  # "result", "crashed" or "timeout"
    detail: Any  # the worker's payload, or the reason
    seconds: float  # the job's run time
    finished_at: float  # time.monotonic() when it ended


@dataclass
class PoolRun:
    """One submitted list of jobs; ``done`` is set when each is reported or was taken by a
    parent thread or closed."""

    base: int
    payloads: list[dict[str, Any]]
    on_event: Callable[[PoolEvent], None]
    claims: Claims
    on_done: Callable[[PoolRun], None] | None = None
    reported: set[int] = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None  # why the pool gave up on it
    crashed: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)

    def close_free(self) -> None:
        """No worker may take the jobs still free (they are left to the caller)."""
        for index in range(len(self.payloads)):
            self.claims.take(self.base + index, CLOSED)

    def settled(self) -> bool:
        owners = self.claims.owners(self.base, len(self.payloads))
        return all(i in self.reported or owner in (ELSEWHERE, CLOSED)
                   for i, owner in enumerate(owners))


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _call(fn: Callable[..., Any], job: dict[str, Any]) -> Any:
    return fn(job["template"], job["config"], arch=job["arch"], dtype=job["dtype"],
              layout=job["layout"], op=job["op"], **job.get("extra", {}))


def _worker_main(conn: multiprocessing.connection.Connection, compile_fn: str,
                 claims: Claims, slot: int, warm_up: list[str],
                 warm_up_job: dict[str, Any] | None,
                 runs: list[tuple[int, list[dict[str, Any]]]],
                 idle_exit_s: float | None) -> None:
    """Worker: warm up, say ready, then take free jobs of the runs it was given, oldest
    run first; wait for more runs when none is left (None, a closed pipe or
    ``idle_exit_s`` without a run: exit).
    Messages to the parent: ("ready",), ("start", index, t), ("result", index, payload, t)
    with ``t`` from time.monotonic()."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None and not end_with_parent(parent.pid):
        return  # the parent died while this worker started
    fn = _resolve(compile_fn)
    for module in warm_up:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    if warm_up_job is not None and not runs and not conn.poll(0):
        with contextlib.suppress(Exception):
            _call(fn, warm_up_job)
    conn.send(("ready",))
    pending = collections.deque(runs)
    while True:
        try:
            if not pending and not conn.poll(idle_exit_s):
                return  # idle too long
            while conn.poll(0):
                message = conn.recv()
                if message is None:
                    return
                pending.append(message)
        except (EOFError, OSError):
            return
        base, payloads = pending[0]
        index = claims.take_next(base, len(payloads), slot)
        if index is None:
            pending.popleft()
            continue
        started = time.monotonic()
        conn.send(("start", index, started))
        try:
            payload = {"result": _call(fn, payloads[index - base]).to_json()}
        except Exception as exc:
            payload = {"error": "".join(traceback.format_exception_only(exc)).strip()}
        conn.send(("result", index, payload, time.monotonic()))


@dataclass
class _Worker:
    slot: int
    conn: Any
    proc: Any
    ready: bool = False
    current: int | None = None
    started: float = 0.0  # monotonic time its current job started
    jobs_started: int = 0
    sent: set[int] = field(default_factory=set)  # bases of the runs it has

    def stop(self) -> None:
        if self.proc.is_alive():
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
            self.proc.join(1)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def _exit_reason(proc: Any) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class WorkerPool:
    """``n_workers`` processes running ``compile_fn`` on submitted runs (see the module
    docstring). Workers are started while a run has free jobs, and by :meth:`prewarm`;
    with ``idle_exit_s`` an idle worker exits after that long. Serve the pool with
    :meth:`serve_until` (the calling thread) or :meth:`serve_in_background`."""

    def __init__(self, n_workers: int, timeout_s: float, compile_fn: str, *,
                 context: Any = None, warm_up: list[str] | None = None,
                 warm_up_job: dict[str, Any] | None = None,
                 idle_exit_s: float | None = None, capacity: int = CAPACITY) -> None:
        self.n_workers = max(1, n_workers)
        self.timeout_s = timeout_s
        self.compile_fn = compile_fn
        self.idle_exit_s = idle_exit_s
        self.pid = os.getpid()  # a forked child must not use its parent's pool
        self._prewarm = False
        self.warm_up = list(warm_up or [])
        self.warm_up_job = warm_up_job
        self._ctx = context or multiprocessing.get_context("spawn")
        self.claims = Claims(self._ctx, capacity)
        self._lock = threading.RLock()  # on_done may run under it
        self._workers: list[_Worker] = []
        self._runs: list[PoolRun] = []  # not done yet, oldest first
        self._next_index = 0
        self._slots = 0
        self._start_failures = 0
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe()
        self._thread: threading.Thread | None = None
        self.broken: str | None = None
        self.workers_started = 0

    # ---- callers ----------------------------------------------------------------------
    def submit(self, payloads: list[dict[str, Any]], on_event: Callable[[PoolEvent], None],
               on_done: Callable[[PoolRun], None] | None = None) -> PoolRun | None:
        """Queue a run; None when the pool is broken, stopped or out of job indices."""
        with self._lock:
            if self.broken or self._stopping or \
                    self._next_index + len(payloads) > self.claims.capacity:
                return None
            run = PoolRun(self._next_index, payloads, on_event, self.claims, on_done)
            self._next_index += len(payloads)
            self._runs.append(run)
            if not payloads:
                self._finish(run)
                return run
            for worker in self._workers:
                self._send_run(worker, run)
        self._wake()
        return run

    def prewarm(self) -> None:
        """Start all workers now (they warm up), without waiting for them."""
        with self._lock:
            self._prewarm = True
        self._wake()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until every worker is ready (warm); False on timeout or a broken pool."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.broken:
            if self.ready_workers() >= self.n_workers:
                return True
            time.sleep(0.02)
        return False

    def ready_workers(self) -> int:
        with self._lock:
            return sum(1 for w in self._workers if w.ready and w.proc.is_alive())

    def serve_until(self, run: PoolRun) -> None:
        """Serve the pool in this thread until ``run`` is done; raises RuntimeError if the
        pool gave up on it."""
        while not run.done.is_set():
            self._step()
        if run.error:
            raise RuntimeError(run.error)

    def serve_with_input(self, fd: int, on_input: Callable[[], bool],
                         after_step: Callable[[], bool] | None = None) -> None:
        """Serve the pool in this thread, calling ``on_input()`` whenever ``fd`` is
        readable, until it returns False; ``after_step()`` after every step (at least
        once a second), which stops serving too when it returns False. For a process
        whose only thread serves the pool, so its workers may be forked from it
        (:mod:`.build_server`)."""
        while True:
            if fd in self._step([fd]) and not on_input():
                return
            if after_step is not None and not after_step():
                return

    def serve_in_background(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._serve_forever, daemon=True,
                                            name="inductor-flydsl-build-pool")
        self._thread.start()

    def shutdown(self) -> None:
        with self._lock:
            self._stopping = True
            workers, self._workers = list(self._workers), []
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        for worker in workers:
            worker.stop()
        with self._lock:
            runs, self._runs = list(self._runs), []
        for run in runs:
            self._give_up(run, "the build pool was shut down")
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # ---- serving ----------------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _serve_forever(self) -> None:
        while not self._stopping:
            try:
                self._step()
            except Exception as exc:  # never let the pool thread die silently
                self._break(f"build pool failed: {type(exc).__name__}: {exc}")
                return

    def _wanted_workers(self) -> int:
        if self._stopping or self.broken:
            return 0
        if self._prewarm:
            return self.n_workers
        free = sum(len(r.payloads) - len(r.reported) for r in self._runs)
        return min(self.n_workers, free)

    def _spawn_missing(self) -> None:
        while True:
            with self._lock:
                if len(self._workers) >= self._wanted_workers():
                    self._prewarm = False  # done: idle workers may now exit for good
                    return
                slot, self._slots = self._slots, self._slots + 1
                runs = [(r.base, r.payloads) for r in self._runs]
            conn, child = self._ctx.Pipe()
            proc = self._ctx.Process(
                target=_worker_main, daemon=True, name="flydsl-compile",
                args=(child, self.compile_fn, self.claims, slot, self.warm_up,
                      self.warm_up_job, runs, self.idle_exit_s))
            proc.start()  # forked: at once; spawned: after its imports
            child.close()
            worker = _Worker(slot, conn, proc, sent={base for base, _ in runs})
            with self._lock:
                self.workers_started += 1
                if self._stopping:
                    worker.stop()
                    return
                self._workers.append(worker)
                for run in self._runs:
                    if run.base not in worker.sent:
                        self._send_run(worker, run)

    @staticmethod
    def _send_run(worker: _Worker, run: PoolRun) -> None:
        worker.sent.add(run.base)
        with contextlib.suppress(OSError, ValueError):  # a dead worker is handled later
            worker.conn.send((run.base, run.payloads))

    def _run_of(self, index: int) -> PoolRun | None:
        for run in self._runs:
            if run.base <= index < run.base + len(run.payloads):
                return run
        return None

    def _report(self, index: int, kind: str, detail: Any, seconds: float,
                finished_at: float) -> None:
        with self._lock:
            run = self._run_of(index)
            if run is None or index - run.base in run.reported:
                return
            run.reported.add(index - run.base)
            if kind == "crashed":
                run.crashed.append(index - run.base)
            elif kind == "timeout":
                run.timed_out.append(index - run.base)
        run.on_event(PoolEvent(index - run.base, kind, detail, seconds, finished_at))

    def _lost(self, worker: _Worker, kind: str, reason: str) -> None:
        """The worker's taken, unreported jobs end as ``kind``."""
        now = time.monotonic()
        seconds = now - worker.started if worker.current is not None else 0.0
        for run in list(self._runs):
            owners = self.claims.owners(run.base, len(run.payloads))
            for i, owner in enumerate(owners):
                if owner == worker.slot + 1:
                    self._report(run.base + i, kind, reason, seconds, now)

    def _drain(self, worker: _Worker) -> None:
        while True:
            try:
                if not worker.conn.poll():
                    return
                message = worker.conn.recv()
            except (EOFError, OSError):
                return
            if message[0] == "ready":
                worker.ready = True
            elif message[0] == "start":
                worker.current, worker.started = message[1], message[2]
                worker.jobs_started += 1
            elif message[0] == "result":
                worker.current = None
                self._report(message[1], "result", message[2],
                             message[3] - worker.started, message[3])

    def _step(self, extra: list[int] | tuple[int, ...] = ()) -> list[Any]:
        """One round: start missing workers, wait for messages, deaths and timeouts (and
        the file descriptors ``extra``) at most a second; returns what became ready."""
        self._spawn_missing()
        with self._lock:
            workers = list(self._workers)
        now = time.monotonic()
        busy = [w.started + self.timeout_s - now for w in workers if w.current is not None]
        waitables: list[Any] = [self._wake_r]
        waitables += [w.conn for w in workers] + [w.proc.sentinel for w in workers]
        waitables += list(extra)
        ready = multiprocessing.connection.wait(waitables, max(0.05, min([1.0, *busy])))
        if self._wake_r in ready:
            with contextlib.suppress(OSError):
                os.read(self._wake_r, 4096)
        for worker in workers:
            alive = worker.proc.is_alive()
            self._drain(worker)
            if not alive:
                worker.proc.join()
                self._retire(worker)
                first = worker.jobs_started == 0 and not any(
                    owner == worker.slot + 1 for run in self._runs
                    for owner in self.claims.owners(run.base, len(run.payloads)))
                if worker.proc.exitcode != 0 and first and not self._stopping:
                    self._start_failures += 1
                    if self._start_failures > 2 * self.n_workers + 2:
                        self._break("compile workers keep dying before their first job "
                                    f"({_exit_reason(worker.proc)})")
                self._lost(worker, "crashed", f"worker crashed ({_exit_reason(worker.proc)})")
                worker.conn.close()
            elif worker.current is not None and \
                    time.monotonic() - worker.started > self.timeout_s:
                self._retire(worker)
                worker.proc.kill()
                worker.proc.join(5)
                self._lost(worker, "timeout",
                           f"timed out after {self.timeout_s:g} s (worker killed)")
                worker.conn.close()
        for run in list(self._runs):
            if run.settled():
                with self._lock:
                    self._finish(run)
        return ready

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def _finish(self, run: PoolRun) -> None:
        """(Under the lock.) The run is settled: forget it and tell its caller."""
        if run in self._runs:
            self._runs.remove(run)
        if not run.done.is_set():
            run.done.set()
            if run.on_done is not None:
                with contextlib.suppress(Exception):
                    run.on_done(run)

    def _give_up(self, run: PoolRun, reason: str) -> None:
        run.close_free()
        run.error = run.error or reason
        with self._lock:
            self._finish(run)

    def _break(self, reason: str) -> None:
        with self._lock:
            self.broken = reason
            runs, self._runs = list(self._runs), []
        for run in runs:
            self._give_up(run, reason)


def run_pool(payloads: list[dict[str, Any]], n_workers: int, timeout_s: float,
             compile_fn: str, on_event: Callable[[PoolEvent], None], *,
             context: Any = None, warm_up: list[str] | None = None) -> PoolRun:
    """Run every payload in a pool of its own, served by this thread (``on_event`` is
    called here), and stop the pool. Raises RuntimeError when the workers keep dying
    before their first job (jobs still free then are left unreported)."""
    pool = WorkerPool(n_workers, timeout_s, compile_fn, context=context, warm_up=warm_up,
                      capacity=len(payloads))
    try:
        run = pool.submit(payloads, on_event)
        assert run is not None  # a fresh pool has room for exactly these jobs
        pool.serve_until(run)
        return run
    finally:
        pool.shutdown()
