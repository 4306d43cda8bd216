"""Build a shape's FlyDSL candidates in parallel, before Inductor benchmarks them.

Without this, each candidate compiles on its first launch, inside Inductor's benchmark
loop, one after another: Inductor's precompile pool is a no-op on Python 3.11.0-3.11.8,
and MLIR compiles single-threaded. Here, as soon as the provider has made the candidates,
a background thread hands their builds, largest tiles first, to the compile catalog's
worker pool (:func:`catalog._compile_all`: one build at a time per process, a crashing
or overrunning build recorded against its own candidate and its worker replaced).
Workers are forked from a fork server that has imported torch and FlyDSL once
(:func:`build_context`; started in the background when the plugin is enabled on a
device that can run FlyDSL: :func:`prewarm`), so they start in milliseconds.

Each build compiles with ``COMPILE_ONLY=1`` into FlyDSL's disk cache (the launching
process's ``FLYDSL_RUNTIME_CACHE_DIR`` and ``ROCM_PATH``, so the cache key is the one the
launch computes). A candidate's ``benchmark`` needs only its own build: if no worker has
taken it yet, the benchmarking thread builds it itself (it would only wait otherwise);
else it waits for the worker's result. A failed build makes the candidate ``failed``
without a launch; a built one launches, traces and finds its binary on disk (FlyDSL
traces before every cache lookup, so that part of the first launch stays here).

A variant's binary does not depend on M, N or K (they are kernel arguments), so builds
are kept per process by (template hash, config, arch, dtype, layout, op): the next shape
with the same variants waits for nothing.

Settings: ``INDUCTOR_FLYDSL_BUILD_JOBS`` = the number of worker processes (default: the
CPUs this process may use; ``0`` turns parallel builds off: candidates compile on first
launch as before). ``INDUCTOR_FLYDSL_BUILD_TIMEOUT_S`` (default 300) per build.
Test-only hook (tests/flydsl; never set it otherwise): a build whose config id equals
``INDUCTOR_FLYDSL_BUILD_TEST_CRASH`` aborts its worker (and is never built in-process).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .cross_compile import CompileResult

log = logging.getLogger("inductor_flydsl")
ENV_BUILD_JOBS = "INDUCTOR_FLYDSL_BUILD_JOBS"
ENV_BUILD_TIMEOUT = "INDUCTOR_FLYDSL_BUILD_TIMEOUT_S"
ENV_TEST_CRASH = "INDUCTOR_FLYDSL_BUILD_TEST_CRASH"


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build_workers(jobs: int) -> int:
    """Worker processes for ``jobs`` builds: the setting (0: off), else the CPU count."""
    text = os.environ.get(ENV_BUILD_JOBS, "").strip()
    if text:
        try:
            limit = int(text)
        except ValueError:
            log.warning("inductor_flydsl: %s=%r is not an integer; using the CPU count",
                        ENV_BUILD_JOBS, text)
            limit = available_cpus()
    else:
        limit = available_cpus()
    return max(0, min(limit, jobs))


def _timeout_s() -> float:
    try:
        return max(1.0, float(os.environ.get(ENV_BUILD_TIMEOUT, "300")))
    except ValueError:
        return 300.0


# ---- building ------------------------------------------------------------------------
def build_config(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
                 op: str) -> CompileResult:
    """Compile one variant into FlyDSL's disk cache without launching it (the function
    the build workers run)."""
    from ..keys import stable_id

    if os.environ.get(ENV_TEST_CRASH) == stable_id(dict(config)):
        os.abort()
    return build_here(template_name, config, arch=arch, dtype=dtype, layout=layout, op=op)


def build_here(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
               op: str) -> CompileResult:
    """The build itself, in this process: FlyDSL's environment is set for this build only,
    under the cross-compiler's lock, with a fresh launcher (so a benchmarking process's
    cached launchers keep their own state)."""
    from .cross_compile import _ENV_LOCK, _compile_env, prepare_compile
    from .toolchain import rocm_path_for_compile

    result, launcher, args = prepare_compile(template_name, config, arch=arch, dtype=dtype,
                                             layout=layout, op=op)
    if launcher is None:
        return result
    env = {"FLYDSL_GPU_ARCH": arch, "COMPILE_ONLY": "1", "FLYDSL_RUNTIME_ENABLE_CACHE": "1",
           "ROCM_PATH": rocm_path_for_compile(),
           "FLYDSL_DUMP_IR": "0", "FLYDSL_DEBUG_DUMP_ASM": "0"}  # dumping bypasses the cache
    start = time.perf_counter()
    with _ENV_LOCK, _compile_env(env):
        try:
            launcher(*args)
            result.ok = True
        except Exception as exc:  # compiler errors surface as many exception types
            result.error = f"build failed: {type(exc).__name__}: {exc}"[:4000]
    result.compile_seconds = round(time.perf_counter() - start, 3)
    return result


# ---- process side ---------------------------------------------------------------------
@dataclass
class Build:
    """One variant's build: ``done`` is set once ``result`` holds its outcome."""

    job: Any = None  # the catalog Job
    done: threading.Event = field(default_factory=threading.Event)
    result: CompileResult | None = None
    status: str = ""  # the catalog's job status: ok, failed, crashed, timeout
    deadline: float = 0.0  # time.monotonic() by which the pool must have reported it
    owner: str = ""  # "pool" (handed to a worker) or "here" (built by the waiting thread)
    finished_at: float | None = None  # time.perf_counter() when it was done

    def claim(self, owner: str) -> bool:
        with _lock:
            if self.owner:
                return False
            self.owner = owner
        return True

    def finish(self, result: CompileResult | None, status: str) -> None:
        self.result, self.status = result, status
        self.finished_at = time.perf_counter()
        self.done.set()

    def wait(self) -> CompileResult | None:
        """The build's outcome. A build no worker has taken yet (they are still starting,
        or busy) is built right here, in this thread, instead of waiting: the benchmark is
        blocked on it anyway. None when the outcome is unknown (the pool failed or is
        late): the launch then compiles as it would without parallel builds."""
        test_crash = os.environ.get(ENV_TEST_CRASH) == self.job.config_id  # a worker's
        if not test_crash and self.claim("here"):
            job = self.job
            result = build_here(job.template, job.config_json, arch=job.arch,
                                dtype=job.dtype, layout=job.layout, op=job.op)
            self.finish(result, "ok" if result.ok else "failed")
            return result
        self.done.wait(max(0.0, self.deadline - time.monotonic()))
        return self.result


@dataclass
class BuildRun:
    """One batch of builds started together; timing for reports and benchmarks."""

    jobs: int
    workers: int
    builds: list[Build] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    pool_finished: float | None = None

    @property
    def wall_s(self) -> float | None:
        """From the start to the last build done (by a worker or a waiting thread)."""
        ends = [b.finished_at for b in self.builds]
        if not ends or any(end is None for end in ends):
            return None
        return max(ends) - self.started

    @property
    def built_here(self) -> int:
        return sum(1 for b in self.builds if b.owner == "here")


_lock = threading.Lock()
_builds: dict[tuple[str, ...], Build] = {}
runs: list[BuildRun] = []  # this process's build runs, newest last


def _build_cost(config: dict[str, int]) -> int:
    """A rough build-time rank: unrolled MFMA work per K step times pipeline stages."""
    return (config.get("tile_m", 1) * config.get("tile_n", 1) * config.get("tile_k", 1)
            * config.get("stages", 1))


# Imported once by the fork server; every build worker is forked from it with these
# loaded, so a worker starts in milliseconds instead of importing torch and FlyDSL.
PRELOAD = ["torch", "flydsl.compiler", "inductor_flydsl.flydsl_backend.prebuild",
           "inductor_flydsl.flydsl_backend.catalog"]
_context: Any = None


def build_context() -> Any:
    """The multiprocessing context of build workers: a fork server that preloads
    :data:`PRELOAD` (a clean process started by exec: no GPU context and no threads of
    the compiling process are inherited)."""
    global _context
    with _lock:
        if _context is None:
            import multiprocessing

            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            _context = ctx
        return _context


def prewarm() -> None:
    """Start the fork server in the background (it imports torch and FlyDSL once, about
    3 s of one core), so the first shape's builds start at once. Called when the plugin
    is enabled on a device where FlyDSL candidates can be offered; no-op when parallel
    builds are off."""
    if build_workers(2) < 1:
        return

    def start() -> None:
        try:
            from multiprocessing import forkserver

            build_context()
            forkserver.ensure_running()
        except Exception as exc:  # builds then start the server themselves, or fail
            log.debug("inductor_flydsl: build fork server not started: %s", exc)

    threading.Thread(target=start, name="inductor-flydsl-prewarm", daemon=True).start()


def variant_key(template_hash: str, config_id: str, arch: str, dtype: str, layout: str,
                op: str) -> tuple[str, ...]:
    return (template_hash, config_id, arch, dtype, layout, op)


def start_builds(template: str, configs: Iterable[Any], *, arch: str, dtype: str,
                 layout: str, op: str) -> dict[str, Build]:
    """Start (in the background) the builds of ``configs`` not built or building in this
    process; returns config_id -> Build for every config. With the setting at 0, or a
    single config, nothing is started and the map is empty (first launch compiles)."""
    from ..keys import stable_id
    from .catalog import BUILD_FN, Job, _compile_all
    from .cross_compile import template_source_hash

    template_hash = template_source_hash(template)
    wanted = {stable_id(c.to_json()): c for c in configs}
    if build_workers(len(wanted)) < 1 or len(wanted) < 2:
        return {}
    found: dict[str, Build] = {}
    jobs: list[Job] = []
    with _lock:
        for config_id, config in wanted.items():
            key = variant_key(template_hash, config_id, arch, dtype, layout, op)
            if key not in _builds:
                job = Job(template=template, config=tuple(config.to_json().items()),
                          arch=arch, dtype=dtype, layout=layout, op=op)
                _builds[key] = Build(job=job)
                jobs.append(job)
            found[config_id] = _builds[key]
    if not jobs:
        return found
    # Largest first (longest-processing-time order), so no long build starts last.
    jobs.sort(key=lambda job: -_build_cost(job.config_json))
    run = BuildRun(jobs=len(jobs), workers=build_workers(len(jobs)),
                   builds=[found[job.config_id] for job in jobs])
    runs.append(run)
    rounds = -(-len(jobs) // run.workers)
    deadline = time.monotonic() + _timeout_s() * rounds + 120  # + worker start-up
    for job in jobs:
        found[job.config_id].deadline = deadline

    def on_result(item: Any) -> None:
        found[item.job.config_id].finish(item.result, item.status)

    def work() -> None:
        try:
            _compile_all(jobs, run.workers, _timeout_s(), BUILD_FN, on_result,
                         claim=lambda job: found[job.config_id].claim("pool"),
                         context=build_context())
        except Exception as exc:  # the pool itself failed: builds fall back to first launch
            log.warning("inductor_flydsl: parallel FlyDSL builds failed (%s); candidates "
                        "compile on first launch", exc)
        finally:
            for job in jobs:  # what the pool took and did not report is left to the launch
                build = found[job.config_id]
                if not build.done.is_set() and build.owner != "here":
                    build.claim("pool")  # no waiting thread may start it now
                    with _lock:
                        _builds.pop(variant_key(template_hash, job.config_id, arch, dtype,
                                                layout, op), None)
                    build.finish(None, "")
            run.pool_finished = time.perf_counter()

    log.debug("inductor_flydsl: building %d FlyDSL candidates in %d processes", len(jobs),
              run.workers)
    threading.Thread(target=work, name="inductor-flydsl-builds", daemon=True).start()
    return found


def forget_builds() -> None:
    """Drop this process's record of finished builds (tests; a new template source)."""
    with _lock:
        _builds.clear()
        runs.clear()
