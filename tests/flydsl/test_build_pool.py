"""The build pool (inductor_flydsl/flydsl_backend/builds/build_pool.py) with real worker processes,
in this process (``in-process``: as compile-check runs it) and in a build server
(``server``: build_client.py / build_server.py, as a compile runs it).

Stand-in job functions (below; the workers import this module) time and pace the jobs;
the last test builds real FlyDSL candidates through prebuild.py's pool."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from inductor_flydsl.flydsl_backend.builds import build_client, build_pool, prebuild

HERE = str(Path(__file__).parent)


class Done:
    def __init__(self, **values: object) -> None:
        self.values = values

    def to_json(self) -> dict:
        return dict(self.values)


def paced_job(template, config, *, arch, dtype, layout, op, marker_dir=None):
    """Sleeps ``config["sleep"]`` s; aborts when ``config["crash"]``; reports its pid and
    start/end times. A warm-up call (``config["warm"]``) leaves a marker file."""
    if config.get("warm"):
        Path(marker_dir, f"warm-{os.getpid()}").touch()
        return Done()
    if config.get("crash"):
        os.abort()
    start = time.monotonic()
    time.sleep(config["sleep"])
    return Done(pid=os.getpid(), start=start, end=time.monotonic(), n=config["n"])


def _payloads(count: int, sleep: float, **extra_config: object) -> list[dict]:
    return [{"template": "t", "config": {"n": i, "sleep": sleep, **extra_config}, "arch": "a",
             "dtype": "d", "layout": "l", "op": "o"} for i in range(count)]


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> str:
    """The stand-in's import path, for spawned workers (they inherit PYTHONPATH)."""
    monkeypatch.syspath_prepend(HERE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    return f"{__name__}:paced_job"


@pytest.fixture(params=["in-process", "server"])
def make_pool(request: pytest.FixtureRequest, importable: str):
    """A pool of ``n`` workers running the stand-in jobs, either kind."""
    def make(n: int, timeout_s: float = 60, **kwargs: Any) -> Any:
        if request.param == "server":
            return build_client.BuildServerPool(n, timeout_s, importable, **kwargs)
        return build_pool.WorkerPool(n, timeout_s, importable, **kwargs)
    return make


def _collect(events: list, lock: threading.Lock):
    def on_event(event: build_pool.PoolEvent) -> None:
        with lock:
            events.append(event)
    return on_event


def _start(pool: Any) -> None:
    """Start the pool's workers and serving thread, and wait until the workers are warm."""
    pool.prewarm()
    pool.serve_in_background()
    assert pool.wait_ready(60)


def test_workers_keep_taking_jobs_while_the_parent_holds_the_gil(make_pool) -> None:
    """The parent's serving thread cannot run while another thread holds the GIL (here a
    Python loop under a 2 s switch interval, standing in for MLIR's pass manager); the
    workers take their next jobs themselves, so all 12 jobs of 0.1 s run meanwhile."""
    pool = make_pool(2)
    events: list = []
    lock = threading.Lock()
    try:
        _start(pool)
        run = pool.submit(_payloads(12, 0.1), _collect(events, lock))
        assert run is not None
        old = sys.getswitchinterval()
        sys.setswitchinterval(2.0)
        try:
            start = time.monotonic()
            while time.monotonic() - start < 1.5:  # holds the GIL: no other thread runs
                pass
            held_until = time.monotonic()
        finally:
            sys.setswitchinterval(old)
        assert run.done.wait(30)
    finally:
        pool.shutdown()
    results = [e.detail["result"] for e in events]
    assert sorted(r["n"] for r in results) == list(range(12))
    assert len({r["pid"] for r in results}) == 2
    # every job ended while the GIL was held (the old push pool: one job per worker)
    assert sum(1 for r in results if r["end"] <= held_until) == 12
    assert all(e.kind == "result" for e in events)


def test_warm_workers_serve_runs_in_turn_and_a_crash_costs_its_job(
        make_pool, tmp_path: Path) -> None:
    """A kept pool: workers warm up once (marker files), serve two runs, and a job that
    aborts its worker is reported crashed while a new worker finishes the run."""
    warm = {"template": "t", "config": {"warm": 1}, "arch": "a", "dtype": "d", "layout": "l",
            "op": "o", "extra": {"marker_dir": str(tmp_path)}}
    pool = make_pool(2, warm_up_job=warm)
    events: list = []
    lock = threading.Lock()
    try:
        _start(pool)
        assert len(list(tmp_path.glob("warm-*"))) == 2
        first = pool.submit(_payloads(4, 0.05), _collect(events, lock))
        assert first is not None and first.done.wait(30)
        pids = {e.detail["result"]["pid"] for e in events}
        assert pool.workers_started == 2 and len(pids) == 2
        crashing = _payloads(5, 0.5)  # slow enough that the crash is seen with jobs left
        crashing[2]["config"]["crash"] = 1
        second_events: list = []
        second = pool.submit(crashing, _collect(second_events, lock))
        assert second is not None and second.done.wait(60)
    finally:
        pool.shutdown()
    kinds = {e.index: e.kind for e in second_events}
    assert kinds == {0: "result", 1: "result", 2: "crashed", 3: "result", 4: "result"}
    crash = next(e for e in second_events if e.kind == "crashed")
    assert "killed by SIGABRT" in crash.detail and second.crashed == [2]
    assert pool.workers_started == 3  # the crashed worker was replaced


def test_an_overrunning_job_times_out_alone(make_pool) -> None:
    """A job past ``timeout_s`` has its worker killed and is reported ``timeout``; the
    other jobs of its run finish (a fresh worker takes the place of the killed one)."""
    pool = make_pool(2, timeout_s=1.0)
    payloads = _payloads(4, 0.05)
    payloads[1]["config"]["sleep"] = 30
    events: list = []
    lock = threading.Lock()
    try:
        _start(pool)
        run = pool.submit(payloads, _collect(events, lock))
        assert run is not None and run.done.wait(60)
    finally:
        pool.shutdown()
    assert {e.index: e.kind for e in events} == {0: "result", 1: "timeout", 2: "result",
                                                 3: "result"}
    timeout = next(e for e in events if e.kind == "timeout")
    assert run.timed_out == [1] and "timed out after 1 s" in timeout.detail


def test_idle_workers_exit_and_come_back_for_work(make_pool) -> None:
    pool = make_pool(2, idle_exit_s=0.5)
    events: list = []
    lock = threading.Lock()
    try:
        _start(pool)
        deadline = time.monotonic() + 20
        while pool.ready_workers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.ready_workers() == 0  # both idle workers exited
        run = pool.submit(_payloads(3, 0.01), _collect(events, lock))
        assert run is not None and run.done.wait(60)
    finally:
        pool.shutdown()
    assert sorted(e.index for e in events) == [0, 1, 2]
    assert pool.workers_started == 4


def test_a_forked_child_makes_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked from a process with a build pool (a DataLoader worker) must not
    write to its parent's workers: prebuild makes the child a pool of its own."""
    monkeypatch.setenv(prebuild.ENV_BUILD_JOBS, "1")
    prebuild.shutdown_pool()
    try:
        parent = prebuild.build_pool()
        assert parent is not None and parent.pid == os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 when it got a pool of its own
            ok = False
            try:
                child = prebuild.build_pool()
                ok = child is not parent and child.pid == os.getpid()
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert prebuild.build_pool() is parent  # the parent keeps its own
    finally:
        prebuild.shutdown_pool()
    assert os.waitstatus_to_exitcode(status) == 0


def test_builds_use_the_callers_flydsl_settings_made_after_the_pool_started(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """prebuild.py's pool is started (and its workers forked) before the cache dir is
    set; the builds still land in that dir, since each run carries the settings."""
    from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs
    from inductor_flydsl.problems.problem import synthetic_problem

    monkeypatch.setenv(prebuild.ENV_BUILD_JOBS, "2")
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(tmp_path / "before"))
    prebuild.shutdown_pool()
    prebuild.forget_builds()
    try:
        prebuild.prewarm()
        assert prebuild.wait_ready(120)
        cache = tmp_path / "after"
        monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(cache))
        configs = candidate_configs(synthetic_problem("mm", 64, 256, 128, dtype="bfloat16",
                                                      layout="nt"), "gfx950", limit=3)
        builds = prebuild.start_builds("gemm_dense", configs, arch="gfx950", dtype="bf16",
                                       layout="nt", op="mm")
        assert len(builds) == 3
        results = [b.wait() for b in builds.values()]
        (run,) = prebuild.runs
    finally:
        prebuild.shutdown_pool()
        prebuild.forget_builds()
    assert all(r is not None and r.ok and r.artifact and r.entry for r in results)
    assert run.workers_ready == 2  # warm workers
    assert len(list(cache.rglob("*.pkl"))) == 3
    assert not (tmp_path / "before").exists()  # the warm-up compile is not cached
