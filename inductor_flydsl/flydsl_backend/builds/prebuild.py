"""Build a shape's FlyDSL candidates in parallel, before Inductor benchmarks them.

Without this, each candidate compiles on its first launch, inside Inductor's benchmark
loop, one after another: Inductor's precompile pool is a no-op on Python 3.11.0-3.11.8,
and MLIR compiles single-threaded. Here, as soon as the provider has made the candidates,
their builds, largest tiles first, go to this process's build pool (:mod:`.build_pool`:
one build at a time per worker process, each worker taking the next free build itself,
so a compiling thread that holds the GIL does not idle them; a crashing or overrunning
build recorded against its own candidate and its worker replaced).

The pool is kept for the process. It is made at the first selection that offers FlyDSL
candidates (:func:`prewarm`, called by the provider), or by the first build a launch asks
for; never when the plugin is enabled, which with ``INDUCTOR_FLYDSL=1`` is at ``import
torch`` in every process. Its workers live in a build server, a process started
from the package's own entry point (:mod:`.build_server`, through :mod:`.build_client`),
so a user's script without a ``__main__`` guard is never run again by them; the server
imports torch and FlyDSL once (:data:`PRELOAD`) and forks its workers; each worker then
compiles one throwaway kernel (:func:`warm_up_job`, not cached), so the first shape's
builds pay neither the imports nor FlyDSL's first compile in a process.

Each build compiles in a worker, for the arch the launch's device has, with the FlyDSL
settings (``FLYDSL_*``, e.g. ``FLYDSL_RUNTIME_CACHE_DIR``) the compiling process has when
it starts the builds, and returns the compiled module's text (``CompileResult.artifact``):
the kernel runner (:mod:`.kernel_runner`) makes a FlyDSL compiled function from it, so no
launch traces. No build runs in the compiling process (a build sets FlyDSL's
process-wide settings, and an LLVM fatal error would end the compile). A candidate's
``benchmark`` waits for its own build; a failed build makes the candidate ``failed``
without a launch. A launch of a variant no run built (a graph loaded from the FX graph
cache, a sweep, validation) asks for its build here too (:func:`build_for_launch`).

A variant's binary does not depend on M, N or K (they are kernel arguments), so builds
are kept per process by (template hash, config, arch, dtype, layout, op): the next shape
with the same variants waits for nothing.

Settings: ``INDUCTOR_FLYDSL_BUILD_JOBS`` = the number of worker processes (default: the
CPUs this process may use; ``0`` turns parallel builds off: each variant is built by one
worker at its first launch). ``INDUCTOR_FLYDSL_BUILD_TIMEOUT_S`` (default 300) per build.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ... import settings
from ...provenance.noise import cpu_count
from ...settings import overridden
from .cross_compile import CompileResult

log = logging.getLogger("inductor_flydsl")
ENV_BUILD_JOBS = settings.BUILD_JOBS.name


def cpu_share() -> int:
    """The CPUs this process may use, shared among the processes of one torchrun node
    (``LOCAL_WORLD_SIZE``)."""
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, cpu_count() // local)


def default_build_workers() -> int:
    """:func:`cpu_share`, and no more than the candidates of one shape."""
    from ..offer.offering import configs_per_problem

    return max(1, min(cpu_share(), configs_per_problem()))


def build_workers(jobs: int) -> int:
    """Worker processes for ``jobs`` builds: the setting (0: off), else
    :func:`default_build_workers`."""
    limit = settings.BUILD_JOBS.value()
    if limit is None:
        limit = default_build_workers()
    return max(0, min(limit, jobs))


def _timeout_s() -> float:
    return max(1.0, settings.BUILD_TIMEOUT_S.value())


# ---- building ------------------------------------------------------------------------
def _is_build_setting(key: str) -> bool:
    return key.startswith("FLYDSL_")


def build_settings() -> dict[str, str]:
    """The compiling process's settings a build must use (FlyDSL's): pool workers were
    forked earlier and may hold older ones."""
    return {k: v for k, v in os.environ.items() if _is_build_setting(k)}


def build_config(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
                 op: str, settings: dict[str, str] | None = None,
                 cache: bool = True, epilogue: str = "") -> CompileResult:
    """Compile one variant into FlyDSL's disk cache without launching it (the function
    the build workers run). ``settings``: :func:`build_settings` of the process that
    asked for the build, made this worker's for it. ``cache`` False: a throwaway build
    (:func:`warm_up_job`)."""
    if settings is None:
        return build_here(template_name, config, arch=arch, dtype=dtype, layout=layout,
                          op=op, cache=cache, epilogue=epilogue)
    # the asking process's FlyDSL settings exactly (one it lacks is unset), for this build
    unset: dict[str, str | None] = {k: None for k in os.environ
                                    if _is_build_setting(k) and k not in settings}
    with overridden({**unset, **settings}):
        return build_here(template_name, config, arch=arch, dtype=dtype, layout=layout,
                          op=op, cache=cache, epilogue=epilogue)


def build_here(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
               op: str, cache: bool = True, epilogue: str = "") -> CompileResult:
    """The build itself, in this process (a build worker: FlyDSL's settings are this
    process's environment, set for this build): trace and compile a fresh launcher for
    ``arch`` and keep the compiled module's text (``result.artifact``, with its entry
    point in ``result.entry``), from which the launching process makes a compiled
    function without tracing (:mod:`.flydsl_runtime`). FlyDSL's disk cache serves a
    variant built before."""
    from . import flydsl_runtime
    from .cross_compile import compile_env, prepare_compile
    from .toolchain import rocm_path_for_compile

    extra = {"epilogue": epilogue} if epilogue else {}  # a fused epilogue's variant
    result, launcher, args = prepare_compile(template_name, config, arch=arch, dtype=dtype,
                                             layout=layout, op=op, **extra)
    if launcher is None:
        return result
    env = {"FLYDSL_GPU_ARCH": arch, "COMPILE_ONLY": "0",
           "FLYDSL_RUNTIME_ENABLE_CACHE": "1" if cache else "0",
           "ROCM_PATH": rocm_path_for_compile(),
           "FLYDSL_DUMP_IR": "0", "FLYDSL_DEBUG_DUMP_ASM": "0"}  # dumping bypasses the cache
    start = time.perf_counter()
    with compile_env(env):
        try:
            result.artifact, result.entry = flydsl_runtime.compile_artifact(launcher, args)
            result.ok = True
        except Exception as exc:  # compiler errors surface as many exception types
            result.error = f"build failed: {type(exc).__name__}: {exc}"[:4000]
    result.compile_seconds = round(time.perf_counter() - start, 3)
    return result


def warm_up_job() -> dict[str, Any]:
    """A small dense bf16 kernel for gfx950, compiled once by each new build worker and
    not cached: FlyDSL's first compile in a process costs ~0.2 s more than later ones."""
    from ..offer.configs import DEFAULT
    from .catalog import TEMPLATE, Job, job_payload

    smallest = min(DEFAULT, key=lambda c: _build_cost(c.to_json()))
    job = Job(TEMPLATE, tuple(smallest.to_json().items()), "gfx950", "bf16", "nt", "mm")
    return job_payload(job, {"settings": build_settings(), "cache": False})


# ---- process side ---------------------------------------------------------------------
@dataclass
class Build:
    """One variant's build: ``done`` is set once ``result`` holds its outcome."""

    job: Any = None  # the catalog Job
    pool_run: Any = None  # the build_client.ServerRun it belongs to
    index: int = -1  # its job index in that run
    done: threading.Event = field(default_factory=threading.Event)
    result: CompileResult | None = None
    status: str = ""  # the catalog's job status: ok, failed, crashed, timeout
    deadline: float = 0.0  # time.monotonic() by which the pool must have reported it
    finished_at: float | None = None  # time.monotonic() when it was done

    def finish(self, result: CompileResult | None, status: str,
               finished_at: float | None = None) -> None:
        self.result, self.status = result, status
        self.finished_at = finished_at or time.monotonic()
        self.done.set()

    def wait(self) -> CompileResult | None:
        """The build's outcome, from a build worker (never built in this process: a
        build sets FlyDSL's process-wide settings, and a compiler abort would end the
        compile). None when the outcome is unknown (the pool failed or is late)."""
        if not self.done.is_set():
            self.done.wait(max(0.0, self.deadline - time.monotonic()))
        return self.result


@dataclass
class BuildRun:
    """One batch of builds started together; timing for reports and benchmarks."""

    jobs: int
    workers: int
    builds: list[Build] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    pool_finished: float | None = None
    workers_ready: int = 0  # warm pool workers when the builds started

    @property
    def wall_s(self) -> float | None:
        """From the start to the last build done (by a worker or a waiting thread)."""
        ends = [b.finished_at for b in self.builds]
        if not ends or any(end is None for end in ends):
            return None
        return max(ends) - self.started


_lock = threading.Lock()
_builds: dict[tuple[str, ...], Build] = {}
runs: list[BuildRun] = []  # this process's build runs, newest last
_pool: Any = None  # this process's build_pool.WorkerPool
MAX_WORKERS = 256
IDLE_EXIT_S = 600.0  # an idle build worker exits after this long (started again on demand)


def _build_cost(config: dict[str, int]) -> int:
    """A rough build-time rank: unrolled MFMA work per K step times pipeline stages."""
    return (config.get("tile_m", 1) * config.get("tile_n", 1) * config.get("tile_k", 1)
            * config.get("stages", 1))


# Imported once by the build server (:mod:`.build_server`); every build worker is forked
# from it with these loaded, so a worker starts in milliseconds instead of importing torch
# and FlyDSL.
PRELOAD = ["torch", "flydsl.compiler", "inductor_flydsl.flydsl_backend.builds.prebuild",  # this
           "inductor_flydsl.flydsl_backend.builds.catalog"]


def build_pool(min_workers: int = 0) -> Any:
    """This process's build pool (made on first use, and again when the worker setting
    changed or the pool broke); None when parallel builds are off and ``min_workers`` is
    0 (a launch asks for 1: every build runs in a worker). Its workers are started by its
    build server, so this never waits for them."""
    global _pool
    from .build_client import BuildServerPool
    from .catalog import BUILD_FN

    workers = max(min_workers, build_workers(MAX_WORKERS))
    if workers < 1:
        return _pool if _pool is not None and _pool.pid == os.getpid() else None
    with _lock:
        old = _pool
        if old is not None and old.pid != os.getpid():  # inherited by fork: not ours
            _pool = None
        elif old is not None and (old.broken or old.n_workers < workers):
            _pool = None
            threading.Thread(target=old.shutdown, daemon=True).start()
        if _pool is None:
            _pool = BuildServerPool(workers, _timeout_s(), BUILD_FN, preload=PRELOAD,
                                    warm_up_job=warm_up_job(), idle_exit_s=IDLE_EXIT_S)
        _pool.timeout_s = _timeout_s()
        return _pool


def prewarm() -> None:
    """Make the build pool now: it starts the build server (which imports torch and
    FlyDSL once, about 3 s of one core) and the workers, each warmed up with one
    throwaway compile, so the first shape's builds start at once. Called by each
    selection that offers FlyDSL candidates (a running pool only starts the workers that
    exited idle); no-op when parallel builds are off."""
    try:
        pool = build_pool()
        if pool is not None:
            pool.prewarm()
    except Exception as exc:  # builds then make the pool themselves, or fall back
        log.debug("inductor_flydsl: build pool not started: %s", exc)


def wait_ready(timeout_s: float) -> bool:
    """Wait until the build pool's workers are all warm (benchmarks, tests); False when
    there is no pool, it broke, or on timeout."""
    pool = _pool
    return pool is not None and pool.wait_ready(timeout_s)


def variant_key(template_hash: str, config_id: str, arch: str, dtype: str, layout: str,
                op: str, epilogue: str = "") -> tuple[str, ...]:
    return (template_hash, config_id, arch, dtype, layout, op, epilogue)


def start_builds(template: str, configs: Iterable[Any], *, arch: str, dtype: str,
                 layout: str, op: str, epilogue: str = "",
                 for_launch: bool = False) -> dict[str, Build]:
    """Start (in the background) the builds of ``configs`` not built or building in this
    process; returns config_id -> Build for every config. With the setting at 0, or a
    single config, nothing is started and the map is empty (the first launch builds);
    ``for_launch``: a launch needs these builds now (a pool of at least one worker)."""
    from ...problems.keys import stable_id
    from .catalog import Job

    wanted = {stable_id(c.to_json()): c for c in configs}
    if not for_launch and (build_workers(len(wanted)) < 1 or len(wanted) < 2):
        return {}
    jobs = [Job(template=template, config=tuple(config.to_json().items()), arch=arch,
                dtype=dtype, layout=layout, op=op, epilogue=epilogue)
            for config in wanted.values()]
    builds = start_jobs(jobs, min_workers=1 if for_launch else 0)
    return dict(zip(wanted, builds, strict=True)) if builds else {}


def start_jobs(jobs: list[Any], *, min_workers: int = 0) -> list[Build]:
    """Start the builds of ``jobs`` (catalog ``Job``s: variants of any template, op,
    dtype, layout and epilogue) not built or building in this process, as one pool run;
    returns each job's Build, in order (those built or building before included), or []
    when no pool could take them (their first launches build them)."""
    from ...template_loader import template_source_hash
    from .catalog import job_payload, job_result

    pool = build_pool(min_workers)
    if pool is None or not jobs:
        return []
    hashes = {job.template: template_source_hash(job.template) for job in jobs}

    def key_of(job: Any) -> tuple[str, ...]:
        return variant_key(hashes[job.template], job.config_id, job.arch, job.dtype,
                           job.layout, job.op, job.epilogue)

    found: list[Build] = []
    new: list[Build] = []
    with _lock:
        for job in jobs:
            key = key_of(job)
            if key not in _builds:
                _builds[key] = Build(job=job)
                new.append(_builds[key])
            found.append(_builds[key])
    if not new:
        return found
    # Largest first (longest-processing-time order), so no long build starts last.
    new.sort(key=lambda build: -_build_cost(build.job.config_json))
    run = BuildRun(jobs=len(new), workers=pool.n_workers, builds=new,
                   workers_ready=pool.ready_workers())
    rounds = -(-len(new) // run.workers)
    deadline = time.monotonic() + _timeout_s() * rounds + 120  # + worker start-up
    for index, build in enumerate(run.builds):
        build.index, build.deadline = index, deadline

    def forget(build: Build) -> None:
        with _lock:
            if _builds.get(key_of(build.job)) is build:
                del _builds[key_of(build.job)]

    def on_event(event: Any) -> None:
        build = run.builds[event.index]
        outcome = job_result(build.job, event)
        build.finish(outcome.result, outcome.status, event.finished_at)

    def on_done(pool_run: Any) -> None:
        """A build the pool closed without a result is forgotten: the next launch of that
        variant asks for it again."""
        for build in run.builds:
            if not build.done.is_set():
                forget(build)
                build.finish(None, "")
        if pool_run.error:
            log.warning("inductor_flydsl: parallel FlyDSL builds failed (%s)", pool_run.error)
        run.pool_finished = time.monotonic()

    settings = build_settings()
    payloads = [job_payload(build.job, {"settings": settings}) for build in run.builds]
    pool_run = pool.submit(payloads, on_event, on_done)
    if pool_run is None:  # broken or full: first launches ask again
        for build in run.builds:
            forget(build)
            build.finish(None, "")
        return []
    for build in run.builds:
        build.pool_run = pool_run
    runs.append(run)
    log.debug("inductor_flydsl: building %d FlyDSL variants in %d processes", len(new),
              run.workers)
    return found


class FlydslBuildError(RuntimeError):
    """A variant could not be built for a launch."""


def build_for_launch(variant: Any) -> tuple[str, str]:
    """The compiled module text and entry point of ``variant`` (a template's ``Variant``)
    for a launch: its finished build of this process, else a build by a worker now
    (one more try when the pool lost the first)."""
    for _attempt in range(2):
        builds = start_builds(variant.template, [variant.config], arch=variant.arch,
                              dtype=variant.dtype, layout=variant.layout, op=variant.op,
                              epilogue=variant.epilogue, for_launch=True)
        if not builds:
            raise FlydslBuildError("no build worker could be started")
        build = next(iter(builds.values()))
        result = build.wait()
        if result is None:
            continue  # the pool lost it (a broken pool is replaced on the next call)
        if not result.ok or not result.artifact or not result.entry:
            raise FlydslBuildError(f"build {build.status or 'failed'}: {result.error}")
        return result.artifact, result.entry
    raise FlydslBuildError("the build pool did not report the build")


def forget_builds() -> None:
    """Drop this process's record of finished builds (tests; a new template source)."""
    with _lock:
        _builds.clear()
        runs.clear()


def shutdown_pool() -> None:
    """Stop this process's build pool (tests; it is made again on the next use)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()
