"""The compiling process's side of the build server (:mod:`.build_server`): a pool with
the interface :mod:`.prebuild` uses (``submit``, ``prewarm``, ``wait_ready``,
``ready_workers``, ``shutdown``, ``broken``, ``n_workers``, ``pid``, ``timeout_s``),
whose workers live in a process started from the package's own entry point, so a user's
``__main__`` is never imported by them.

The server is started with the interpreter of this process, a ``PYTHONPATH`` made of
this process's ``sys.path`` (so the package and a test's job functions import there as
here) and ``INDUCTOR_FLYDSL=0``; in a session of its own (a terminal's Ctrl-C reaches
the compiling process only, which decides when builds stop). Requests go to its stdin and
events come back on a pipe of their own, one JSON object per line; a thread of this
process reads them and calls each run's ``on_event`` / ``on_done``. The server exits
when its stdin closes: :meth:`BuildServerPool.shutdown`, or this process's exit.

It also ends when this process dies without closing it (SIGKILL, a crash): a child
forked from this process (a DataLoader worker, a user's ``os.fork``) does not keep the
server's stdin open, since the pipes are replaced by ``/dev/null`` in every forked child
(:func:`_detach_forked_child`), and the server asks for SIGTERM at its parent's death
(``build_server.BOOTSTRAP``). That signal follows the thread that started the server,
so every server is started by one thread of this process that lasts as long as the
process (:func:`_start_server`), whichever thread (a compile's, a launch's) asks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import parent_death
from .build_claims import CAPACITY
from .build_pool import PoolEvent
from .build_server import BOOTSTRAP, MODULE

log = logging.getLogger("inductor_flydsl")


@dataclass
class ServerRun:
    """One submitted list of jobs; ``done`` is set once the server reported each, or gave
    the run up (``error``)."""

    run_id: int
    payloads: list[dict[str, Any]]
    on_event: Callable[[PoolEvent], None]
    on_done: Callable[[ServerRun], None] | None = None
    reported: set[int] = field(default_factory=set)
    crashed: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


def server_environment() -> dict[str, str]:
    """The server's environment: this one, the plugin off, this process's import path."""
    env = dict(os.environ)
    env["INDUCTOR_FLYDSL"] = "0"  # its `import torch` must not start another server
    paths = [os.getcwd() if p == "" else p for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def server_command(events_fd: int) -> list[str]:
    """The server's command line: :data:`.build_server.BOOTSTRAP` (end with this process)
    running :data:`.build_server.MODULE`."""
    return [sys.executable, "-c", BOOTSTRAP, parent_death.__file__, MODULE,
            "--events-fd", str(events_fd), "--parent-pid", str(os.getpid())]


class _Starter:
    """One daemon thread of this process that starts build servers: a server's
    parent-death signal follows the thread that started it, and the threads that ask for
    a pool (a compile's, a launch's, a test's) may end long before the process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._serve, daemon=True,
                         name="inductor-flydsl-build-server-starter").start()

    def _serve(self) -> None:
        while True:
            fn, box, done = self._requests.get()
            try:
                box.append((True, fn()))
            except BaseException as exc:  # handed to the caller
                box.append((False, exc))
            done.set()

    def call(self, fn: Callable[[], Any]) -> Any:
        box: list[tuple[bool, Any]] = []
        done = threading.Event()
        self._requests.put((fn, box, done))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value


_starter: _Starter | None = None
_starter_lock = threading.Lock()
_pools: weakref.WeakSet[BuildServerPool] = weakref.WeakSet()  # this process's, live


def _start_server(fn: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """``fn()`` (which starts a server) on this process's starter thread (here while the
    interpreter exits: daemon threads no longer run then)."""
    global _starter
    if sys.is_finalizing():
        return fn()
    with _starter_lock:
        if _starter is None or _starter.pid != os.getpid():
            _starter = _Starter()
        starter = _starter
    return starter.call(fn)


def _detach_forked_child() -> None:
    """In a child forked from this process: the pools' pipes are replaced by
    ``/dev/null`` (not closed: the file objects still own the descriptor numbers), so
    the child does not keep a server's stdin open after this process dies. The child's
    own builds get a pool of their own (``prebuild.build_pool`` checks the pid)."""
    global _starter, _starter_lock
    _starter, _starter_lock = None, threading.Lock()  # the thread is not in the child
    for pool in list(_pools):
        pool.detach()


os.register_at_fork(after_in_child=_detach_forked_child)


class BuildServerPool:
    """``n_workers`` build workers of ``compile_fn`` (``module:function``) in a build
    server (see the module docstring); the server starts with this object, its workers
    on demand (a run with free jobs, or :meth:`prewarm`)."""

    def __init__(self, n_workers: int, timeout_s: float, compile_fn: str, *,
                 warm_up: list[str] | None = None,
                 warm_up_job: dict[str, Any] | None = None,
                 idle_exit_s: float | None = None, preload: list[str] | None = None) -> None:
        self.n_workers = max(1, n_workers)
        self.compile_fn = compile_fn
        self.pid = os.getpid()  # a forked child must not use its parent's pool
        self.broken: str | None = None
        self.workers_started = 0
        self._timeout_s = timeout_s
        self._ready = 0
        self._stopping = False
        self._jobs = 0
        self._next_run = 0
        self._runs: dict[int, ServerRun] = {}
        self._lock = threading.Lock()
        self._status = threading.Condition(self._lock)
        self._write_lock = threading.Lock()
        events_r, events_w = os.pipe()
        command, env = server_command(events_w), server_environment()
        try:
            self._proc = _start_server(lambda: subprocess.Popen(
                command, stdin=subprocess.PIPE, pass_fds=(events_w,), env=env,
                start_new_session=True))
        except BaseException:
            os.close(events_r)
            raise
        finally:
            os.close(events_w)
        self._events = os.fdopen(events_r, "rb")
        _pools.add(self)
        self._send({"workers": self.n_workers, "timeout_s": timeout_s,
                    "compile_fn": compile_fn, "warm_up": list(warm_up or []),
                    "warm_up_job": warm_up_job, "idle_exit_s": idle_exit_s,
                    "preload": list(preload or [])})
        self._reader = threading.Thread(target=self._read_events, daemon=True,
                                        name="inductor-flydsl-build-events")
        self._reader.start()

    # ---- callers ----------------------------------------------------------------------
    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        if seconds != self._timeout_s:
            self._timeout_s = seconds
            self._send({"op": "timeout", "seconds": seconds})

    def submit(self, payloads: list[dict[str, Any]], on_event: Callable[[PoolEvent], None],
               on_done: Callable[[ServerRun], None] | None = None) -> ServerRun | None:
        """Queue a run; None when the pool is broken, stopped or out of job indices."""
        with self._lock:
            if self.broken or self._stopping or self._jobs + len(payloads) > CAPACITY:
                return None
            run = ServerRun(self._next_run, payloads, on_event, on_done)
            self._next_run += 1
            self._jobs += len(payloads)
            self._runs[run.run_id] = run
        self._send({"op": "submit", "run": run.run_id, "payloads": payloads})
        return run

    def prewarm(self) -> None:
        """Start all workers now (they warm up), without waiting for them."""
        self._send({"op": "prewarm"})

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until every worker is ready (warm); False on timeout or a broken pool."""
        deadline = time.monotonic() + timeout_s
        with self._status:
            while self._ready < self.n_workers and not self.broken:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._status.wait(left)
            return not self.broken

    def ready_workers(self) -> int:
        return self._ready

    def serve_in_background(self) -> None:
        """Nothing to do: the server serves its pool, a thread here reads its events."""

    def shutdown(self) -> None:
        """Stop the server (its workers with it) and give up the runs it did not finish."""
        with self._lock:
            self._stopping = True
        with contextlib.suppress(OSError), self._write_lock:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        if self._reader is not threading.current_thread():
            self._reader.join(10)
        self._give_up_all("the build pool was shut down")

    def detach(self) -> None:
        """(In a forked child, which has no reader thread.) Let go of the server's pipes:
        each descriptor now refers to ``/dev/null``, and this pool is broken here."""
        if self.pid == os.getpid():
            return
        self.broken = self.broken or "inherited by a forked process"
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            for pipe in (self._proc.stdin, self._events):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    os.dup2(null, pipe.fileno(), inheritable=False)  # closed: ValueError
        finally:
            os.close(null)

    # ---- the channels -----------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        try:
            with self._write_lock:
                stdin = self._proc.stdin
                assert stdin is not None
                stdin.write(data)
                stdin.flush()
        except (OSError, ValueError) as exc:  # the server is gone (its events end too)
            log.debug("inductor_flydsl: build server unreachable: %s", exc)

    def _read_events(self) -> None:
        try:
            for line in self._events:
                try:
                    message = json.loads(line)
                except ValueError:
                    log.warning("inductor_flydsl: build server sent %r", line[:200])
                    continue
                self._dispatch(message)
        finally:
            self._events.close()
            code = self._proc.wait()
            reason = ("the build pool was shut down" if self._stopping
                      else f"the build server exited (exit code {code})")
            with self._status:
                self.broken = self.broken or reason
                self._ready = 0
                self._status.notify_all()
            self._give_up_all(reason)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("ev")
        if kind == "status":
            with self._status:
                self._ready, self.workers_started = message["ready"], message["started"]
                if message.get("broken"):
                    self.broken = message["broken"]
                self._status.notify_all()
            return
        with self._lock:
            run = self._runs.get(message.get("run", -1))
        if run is None:
            return
        if kind == "event":
            index = message["index"]
            run.reported.add(index)
            if message["kind"] == "crashed":
                run.crashed.append(index)
            elif message["kind"] == "timeout":
                run.timed_out.append(index)
            run.on_event(PoolEvent(index, message["kind"], message["detail"],
                                   message["seconds"], message["finished_at"]))
        elif kind == "done":
            self._finish(run, message.get("error"))

    def _finish(self, run: ServerRun, error: str | None) -> None:
        with self._lock:
            if self._runs.pop(run.run_id, None) is None:
                return
        run.error = run.error or error
        run.done.set()
        if run.on_done is not None:
            with contextlib.suppress(Exception):
                run.on_done(run)

    def _give_up_all(self, reason: str) -> None:
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            self._finish(run, reason)
