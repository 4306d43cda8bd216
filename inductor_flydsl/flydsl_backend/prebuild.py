"""Build a shape's FlyDSL candidates in parallel worker processes, before Inductor
benchmarks them.

Without this, each candidate compiles on its first launch, inside Inductor's benchmark
loop, one after another: Inductor's precompile pool is a no-op on Python 3.11.0-3.11.8,
and MLIR compiles single-threaded. Here, as soon as the provider has made the candidates,
a background thread hands their builds to the compile-catalog's worker pool
(:func:`catalog._compile_all`: ``spawn``-ed processes, one build at a time each, a
crashing or overrunning build recorded against its own candidate and its worker
replaced). Each worker compiles with ``COMPILE_ONLY=1`` into FlyDSL's disk cache (the
launching process's ``FLYDSL_RUNTIME_CACHE_DIR`` and ``ROCM_PATH``, so the cache key is
the one the launch computes). A candidate's ``benchmark`` waits for its own build only:
a build that failed makes the candidate ``failed`` without launching it; a built one
launches, traces and finds its binary on disk (FlyDSL traces before every cache lookup,
so that part of the first launch stays in the benchmarking process).

A variant's binary does not depend on M, N or K (they are kernel arguments), so builds
are kept per process by (template hash, config, arch, dtype, layout, op): the next shape
with the same variants waits for nothing.

Settings: ``INDUCTOR_FLYDSL_BUILD_JOBS`` = the number of worker processes (default: the
CPUs this process may use; ``0`` turns parallel builds off: candidates compile on first
launch as before). ``INDUCTOR_FLYDSL_BUILD_TIMEOUT_S`` (default 300) per build.
Test-only hook (tests/flydsl; never set it otherwise): a build whose config id equals
``INDUCTOR_FLYDSL_BUILD_TEST_CRASH`` aborts its worker.
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
BUILD_FN = "inductor_flydsl.flydsl_backend.prebuild:build_config"


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


# ---- worker side ----------------------------------------------------------------------
def build_config(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
                 op: str) -> CompileResult:
    """Compile one variant into FlyDSL's disk cache without launching it (runs in a
    worker process: it sets FlyDSL's process-global environment for good)."""
    from ..keys import stable_id
    from .cross_compile import load_template, template_source_hash
    from .toolchain import rocm_path_for_compile

    config_json = dict(config)
    if os.environ.get(ENV_TEST_CRASH) == stable_id(config_json):
        os.abort()
    result = CompileResult(template=template_name,
                           source_hash=template_source_hash(template_name),
                           config=config_json, arch=arch, dtype=dtype, layout=layout, op=op,
                           ok=False)
    template = load_template(template_name)
    try:
        cfg = template.GemmConfig.from_json(config_json)
        launcher = template.make_launcher(cfg, dtype=dtype, layout=layout, op=op, arch=arch)
        args = template.example_args(cfg, dtype=dtype, layout=layout, op=op)
    except ValueError as exc:
        result.error = f"invalid: {exc}"
        return result
    os.environ.update({"FLYDSL_GPU_ARCH": arch, "COMPILE_ONLY": "1",
                       "FLYDSL_RUNTIME_ENABLE_CACHE": "1", "ROCM_PATH": rocm_path_for_compile()})
    for name in ("FLYDSL_DUMP_IR", "FLYDSL_DEBUG_DUMP_ASM"):  # dumping bypasses the cache
        os.environ.pop(name, None)
    start = time.perf_counter()
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

    done: threading.Event = field(default_factory=threading.Event)
    result: CompileResult | None = None
    status: str = ""  # the catalog's job status: ok, failed, crashed, timeout
    deadline: float = 0.0  # time.monotonic() by which the pool must have reported it

    def wait(self) -> CompileResult | None:
        """The build's outcome; None when it is unknown (the pool failed or is late), in
        which case the launch compiles as it would without parallel builds."""
        self.done.wait(max(0.0, self.deadline - time.monotonic()))
        return self.result


@dataclass
class BuildRun:
    """One batch of builds started together; timing for reports and benchmarks."""

    jobs: int
    workers: int
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None

    @property
    def wall_s(self) -> float | None:
        return None if self.finished is None else self.finished - self.started


_lock = threading.Lock()
_builds: dict[tuple[str, ...], Build] = {}
runs: list[BuildRun] = []  # this process's build runs, newest last


def _build_cost(config: dict[str, int]) -> int:
    """A rough build-time rank: unrolled MFMA work per K step times pipeline stages."""
    return (config.get("tile_m", 1) * config.get("tile_n", 1) * config.get("tile_k", 1)
            * config.get("stages", 1))


def variant_key(template_hash: str, config_id: str, arch: str, dtype: str, layout: str,
                op: str) -> tuple[str, ...]:
    return (template_hash, config_id, arch, dtype, layout, op)


def start_builds(template: str, configs: Iterable[Any], *, arch: str, dtype: str,
                 layout: str, op: str) -> dict[str, Build]:
    """Start (in the background) the builds of ``configs`` not built or building in this
    process; returns config_id -> Build for every config. With the setting at 0, or a
    single config, nothing is started and the map is empty (first launch compiles)."""
    from ..keys import stable_id
    from .catalog import Job, _compile_all
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
                _builds[key] = Build()
                jobs.append(Job(template=template, config=tuple(config.to_json().items()),
                                arch=arch, dtype=dtype, layout=layout, op=op))
            found[config_id] = _builds[key]
    if not jobs:
        return found
    # Largest first (longest-processing-time order), so no long build starts last.
    jobs.sort(key=lambda job: -_build_cost(job.config_json))
    run = BuildRun(jobs=len(jobs), workers=build_workers(len(jobs)))
    runs.append(run)
    rounds = -(-len(jobs) // run.workers)
    deadline = time.monotonic() + _timeout_s() * rounds + 120  # + worker start-up
    for job in jobs:
        found[job.config_id].deadline = deadline

    def on_result(item: Any) -> None:
        build = found[item.job.config_id]
        build.result, build.status = item.result, item.status
        build.done.set()

    def work() -> None:
        try:
            _compile_all(jobs, run.workers, _timeout_s(), BUILD_FN, on_result)
        except Exception as exc:  # the pool itself failed: builds fall back to first launch
            log.warning("inductor_flydsl: parallel FlyDSL builds failed (%s); candidates "
                        "compile on first launch", exc)
        finally:
            for job in jobs:  # anything the pool did not report is left to the launch
                build = found[job.config_id]
                if not build.done.is_set():
                    with _lock:
                        _builds.pop(variant_key(template_hash, job.config_id, arch, dtype,
                                                layout, op), None)
                    build.done.set()
            run.finished = time.perf_counter()

    log.debug("inductor_flydsl: building %d FlyDSL candidates in %d processes", len(jobs),
              run.workers)
    threading.Thread(target=work, name="inductor-flydsl-builds", daemon=True).start()
    return found


def forget_builds() -> None:
    """Drop this process's record of finished builds (tests; a new template source)."""
    with _lock:
        _builds.clear()
        runs.clear()
