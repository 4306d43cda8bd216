"""The build server: a process of the package's own, started as
``python -m inductor_flydsl.flydsl_backend.builds.build_server`` by :mod:`.build_client`, that
owns a compiling process's build pool (:class:`.build_pool.WorkerPool`).

Why a process of its own: multiprocessing's ``spawn`` and ``forkserver`` start methods
run the parent's ``__main__`` again in every worker (as ``__mp_main__``), so a user's
script without an ``if __name__ == "__main__":`` guard ran its top level once per build
worker and its builds failed. This process's ``__main__`` is this module, so nothing of
the user's is ever imported here; Inductor starts its compile workers the same way
(``torch._inductor.compile_worker``).

It imports torch and FlyDSL once (``preload``), then forks each worker from its only
thread (the ``fork`` start method: no ``__main__`` is prepared again, and a worker starts
in milliseconds with everything loaded). It is started with ``INDUCTOR_FLYDSL=0``, so its
``import torch`` never enables the plugin (which would start another server).

It ends with the process that started it: :data:`BOOTSTRAP` (run by ``python -c``
before this module, and so the package and torch, are imported) asks for SIGTERM at the
parent's death (``parent_death.py``) and exits at once if the parent (``--parent-pid``)
is already gone; the serving loop also checks the parent about every second. Its workers
ask the same of it (``build_pool.py``), so nothing of the pool outlives the compiling
process, even killed with SIGKILL while a child forked from it lives on.

Protocol, one JSON object per line, nothing pickled between the two processes:

* requests on stdin: first the pool's settings (``workers``, ``timeout_s``,
  ``compile_fn``, ``warm_up``, ``warm_up_job``, ``idle_exit_s``, ``preload``), then
  ``{"op": "submit", "run": id, "payloads": [...]}``, ``{"op": "prewarm"}``,
  ``{"op": "timeout", "seconds": s}``. End of input (the client closed it or exited):
  the pool stops and the server exits.
* events on the file descriptor given by ``--events-fd``:
  ``{"ev": "event", "run", "index", "kind", "detail", "seconds", "finished_at"}`` per
  job (``finished_at`` from ``time.monotonic()``, one clock for the whole host),
  ``{"ev": "done", "run", "error"}`` per run, and ``{"ev": "status", "ready",
  "started", "broken"}`` whenever one of those changes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import multiprocessing
import os
import signal
import sys
from typing import Any

from .build_pool import PoolEvent, PoolRun, WorkerPool

MODULE = "inductor_flydsl.flydsl_backend.builds.build_server"
# ``python -c BOOTSTRAP <parent_death.py> <module> <args>``: end with the parent (its pid
# follows --parent-pid in <args>), then run <module> as ``__main__`` (as ``-m`` would)
BOOTSTRAP = """\
import runpy, sys
helper, module, *args = sys.argv[1:]
parent = int(args[args.index("--parent-pid") + 1])
if not runpy.run_path(helper)["end_with_parent"](parent):
    sys.exit(0)
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


class LineReader:
    """Whole lines from a file descriptor read as data arrives (never blocks once
    ``select`` said it is readable)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    def read_lines(self) -> list[bytes] | None:
        """The complete lines now available; None at end of input."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [line for line in lines if line.strip()]


class EventWriter:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with contextlib.suppress(OSError):  # the client is gone: end of input follows
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]


class BuildServer:
    """The pool and the two channels; :meth:`serve` runs until end of input."""

    def __init__(self, requests_fd: int, events: EventWriter,
                 parent_pid: int | None = None) -> None:
        self.requests = LineReader(requests_fd)
        self.events = events
        self.parent_pid = parent_pid  # None: not checked
        self.pool: WorkerPool | None = None
        self._status: tuple[int, int, str | None] | None = None
        self._pending: list[dict[str, Any]] = []

    def settings(self) -> dict[str, Any] | None:
        """Wait for the first request, the pool's settings; None at end of input."""
        while not self._pending:
            lines = self.requests.read_lines()
            if lines is None:
                return None
            self._pending += [json.loads(line) for line in lines]
        return self._pending.pop(0)

    def start(self, settings: dict[str, Any]) -> None:
        for module in settings.get("preload", []):
            with contextlib.suppress(ImportError):  # a worker reports the failure
                importlib.import_module(module)
        self.pool = WorkerPool(
            settings["workers"], settings["timeout_s"], settings["compile_fn"],
            context=multiprocessing.get_context("fork"), warm_up=settings.get("warm_up"),
            warm_up_job=settings.get("warm_up_job"), idle_exit_s=settings.get("idle_exit_s"))

    def serve(self) -> None:
        assert self.pool is not None
        for request in self._pending:
            self.handle(request)
        self._pending = []
        self.pool.serve_with_input(self.requests.fd, self._on_input, self._after_step)
        self.pool.shutdown()

    def _after_step(self) -> bool:
        """Report a changed status; False (stop serving) when the parent is gone."""
        self._report_status()
        return self.parent_pid is None or os.getppid() == self.parent_pid

    def _on_input(self) -> bool:
        lines = self.requests.read_lines()
        if lines is None:
            return False
        for line in lines:
            self.handle(json.loads(line))
        return True

    def handle(self, request: dict[str, Any]) -> None:
        pool = self.pool
        assert pool is not None
        op = request.get("op")
        if op == "submit":
            self._submit(request["run"], request["payloads"])
        elif op == "prewarm":
            pool.prewarm()
        elif op == "timeout":
            pool.timeout_s = float(request["seconds"])

    def _submit(self, run_id: int, payloads: list[dict[str, Any]]) -> None:
        assert self.pool is not None

        def on_event(event: PoolEvent) -> None:
            self.events.send({"ev": "event", "run": run_id, "index": event.index,
                              "kind": event.kind, "detail": event.detail,
                              "seconds": event.seconds, "finished_at": event.finished_at})

        def on_done(run: PoolRun) -> None:
            self.events.send({"ev": "done", "run": run_id, "error": run.error})

        if self.pool.submit(payloads, on_event, on_done) is None:
            self.events.send({"ev": "done", "run": run_id,
                              "error": self.pool.broken or "the build pool is full"})

    def _report_status(self) -> None:
        assert self.pool is not None
        status = (self.pool.ready_workers(), self.pool.workers_started, self.pool.broken)
        if status != self._status:
            self._status = status
            self.events.send({"ev": "status", "ready": status[0], "started": status[1],
                              "broken": status[2]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="inductor_flydsl's FlyDSL build server "
                                     "(started by the plugin; not for direct use)")
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process is no longer the parent")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client decides when to stop
    requests_fd = os.dup(0)
    events_fd = args.events_fd
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # workers never read the requests
    os.close(devnull)

    def close_channels() -> None:  # in each forked worker: the channels are not its own
        for fd in (requests_fd, events_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    os.register_at_fork(after_in_child=close_channels)
    server = BuildServer(requests_fd, EventWriter(events_fd), args.parent_pid)
    settings = server.settings()
    if settings is None:
        return 0
    server.start(settings)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
