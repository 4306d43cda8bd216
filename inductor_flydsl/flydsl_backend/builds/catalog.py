"""Compile catalog: cross-compile a search space of FlyDSL configs and record every result.

One *job* is (template, config, arch, dtype, layout, op). :func:`build_jobs` lists them,
:func:`run_catalog` compiles them in parallel worker processes and writes one row per job
to the ``compile_catalog`` table of a tuning DB; ``catalog_summary.summarize`` condenses
the results (counts, compile seconds, VGPR/LDS ranges, MFMA counts).

Which variants are compiled (``build_jobs``):

* No ``dtypes``/``layouts``/``ops`` filter and not ``full``: every config of the search
  space for the main variant (bf16, ``nt``, ``mm``: a linear layer), plus each of the
  other 23 (dtype, layout, op) variants once with :data:`REPRESENTATIVE` (a DEFAULT
  config that fits both archs). That covers every config and every code path of the
  template at a twentieth of the cost of the cross product.
* Otherwise the cross product of configs and variants, where each axis is the given
  filter, or all values with ``full``, or the main variant's value.
* MX (``gemm_mx``): every bf16 ``mm`` variant of every layout is a main variant (all its
  DEFAULT configs): each format pairing in ``nt``, and ``e4m3xe4m3_bf16`` in ``nt_b32``
  (B's scales per 32x32 block). A layout compiles only the dtypes the template serves
  for it (``LAYOUT_DTYPES``).

Search spaces: ``DEFAULT`` is the 27-config DEFAULT list; ``EXHAUSTIVE`` every valid
config of the template's ranges (3880, before the resource model). ``limit`` keeps the
first N jobs per arch (main variant first).

Configs the resource model (:mod:`.resources`) rejects for an arch are **recorded
without compiling**, as ``ok=0`` with the error ``"rejected by resource model: ..."``,
so the catalog states why a DEFAULT config is absent on e.g. gfx942 (LDS 64 KiB).
``compile_rejected=True`` compiles them anyway (to check the model); their failures are
reported but are not counted as failures of accepted configs.

Processes: jobs run in ``spawn``-ed worker processes (:mod:`.build_pool`: one job at a
time each, each worker taking the next free job itself). A job that exceeds
``timeout_s`` has its worker killed and is recorded as ``timeout``; a worker that dies
(abort, segfault, OOM kill) is recorded as that job's ``crashed`` failure; either way a
fresh worker takes over and the run goes on. Results are committed in batches, so an
interrupted run (Ctrl-C) keeps everything that finished; the workers ignore SIGINT and
are stopped by the parent.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import itertools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...problems.keys import canonical_json, stable_id
from ...template_loader import load_template, template_source_hash
from ..specs import registry
from .build_pool import PoolEvent, run_pool
from .cross_compile import CompileResult

TEMPLATE = "gemm_dense"  # compile-check's default template
SEARCH_SPACES = ("DEFAULT", "EXHAUSTIVE")
DEFAULT_COMPILE_FN = "inductor_flydsl.flydsl_backend.builds.cross_compile:compile_config"
EMULATE_COMPILE_FN = "inductor_flydsl.flydsl_backend.builds.emulated:compile_and_emulate"
BUILD_FN = "inductor_flydsl.flydsl_backend.builds.prebuild:build_config"  # prebuild.py
_CROSS_COMPILE_FNS = (DEFAULT_COMPILE_FN, EMULATE_COMPILE_FN, BUILD_FN)
DEFAULT_TIMEOUT_S = 300.0
BATCH_ROWS = 25
BATCH_SECONDS = 5.0
REJECTED_PREFIX = "rejected by resource model: "
# Job outcomes.
OK, FAILED, REJECTED, CRASHED, TIMEOUT = "ok", "failed", "rejected", "crashed", "timeout"

@dataclass(frozen=True)
class Job:
    """One cross-compile; ``rejected`` holds the resource model's reasons, if any."""

    template: str
    config: tuple[tuple[str, int], ...]
    arch: str
    dtype: str
    layout: str
    op: str
    rejected: str | None = None
    epilogue: str = ""  # a fused epilogue's canonical JSON (epilogue_spec); "" none

    @property
    def config_json(self) -> dict[str, int]:
        return dict(self.config)

    @property
    def config_id(self) -> str:
        return stable_id(self.config_json)

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.arch, self.template, self.config_id, self.op, self.dtype, self.layout)

    def describe(self) -> str:
        c = self.config_json
        tile = f"{c['tile_m']}x{c['tile_n']}x{c['tile_k']}"
        return (f"{self.arch} {self.dtype} {self.layout} {self.op} {tile} "
                f"w{c['waves_m']}x{c['waves_n']} s{c['stages']} g{c['group_m']}")


@dataclass
class JobResult:
    job: Job
    status: str
    result: CompileResult

    @property
    def accepted(self) -> bool:
        return self.job.rejected is None

    @property
    def spilled(self) -> bool:
        r = self.result
        return bool(r.ok and ((r.vgpr_spills or 0) + (r.sgpr_spills or 0) or r.scratch_bytes))

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "arch": self.job.arch, "template": self.job.template,
            "template_hash": r.source_hash, "config_id": self.job.config_id,
            "config": self.job.config_json, "op": self.job.op, "dtype": self.job.dtype,
            "layout": self.job.layout, "status": self.status, "accepted": self.accepted,
            "ok": r.ok, "error": r.error, "vgprs": r.vgprs, "agprs": r.agprs,
            "total_vgprs": r.total_vgprs, "sgprs": r.sgprs, "lds_bytes": r.lds_bytes,
            "scratch_bytes": r.scratch_bytes, "vgpr_spills": r.vgpr_spills,
            "sgpr_spills": r.sgpr_spills, "mfma": dict(r.mfma_counts),
            "compile_s": r.compile_seconds, "loop_analysis": r.loop_analysis,
        }


# ---------------------------------------------------------------------------
# Job list
# ---------------------------------------------------------------------------


def search_space_configs(search_space: str, template: str = TEMPLATE) -> list[Any]:
    """The search space's configs before the resource model (which is per arch)."""
    space = search_space.upper()
    if space not in SEARCH_SPACES:
        raise ValueError(f"unknown search space {search_space!r}; use one of {SEARCH_SPACES}")
    return registry.spec(template).search_space(space)


def variant_axes() -> dict[str, tuple[str, ...]]:
    """Every arch, dtype, layout and op some registered template compiles (the
    command line's choices)."""
    axes: dict[str, tuple[str, ...]] = {"archs": (), "dtypes": (), "layouts": (), "ops": ()}
    for spec in registry.specs():
        tpl = load_template(spec.name)
        for axis, values in (("archs", (*tpl.ARCHS, *spec.listed_archs)),
                             ("dtypes", tpl.DTYPES), ("layouts", tpl.LAYOUTS),
                             ("ops", tpl.OPS)):
            axes[axis] = tuple(dict.fromkeys((*axes[axis], *values)))
    return axes


def _axis(given: Iterable[str] | None, allowed: tuple[str, ...], main: str, full: bool,
          name: str) -> list[str]:
    if given:
        values = list(dict.fromkeys(given))
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ValueError(f"unknown {name} {bad}; use {', '.join(allowed)}")
        return values
    return list(allowed) if full else [main]


def build_jobs(archs: Iterable[str], search_space: str = "DEFAULT", *,
               dtypes: Iterable[str] | None = None, layouts: Iterable[str] | None = None,
               ops: Iterable[str] | None = None, full: bool = False,
               limit: int | None = None, template: str = TEMPLATE) -> list[Job]:
    """List the compile jobs of one template (see the module docstring for the variant
    rules; the grouped template's main variant is bf16 ``nt`` ``grouped_mm``)."""
    spec = registry.spec(template)  # UnknownTemplate (a ValueError) names the others
    tpl = load_template(template)
    main = spec.main_variant
    archs = list(dict.fromkeys(archs))
    for arch in archs:
        # a job for an arch the template has no kernels for (MX on gfx942: no scaled
        # MFMAs) is listed, rejected with the reason, where the spec lists that arch
        if arch not in tpl.ARCHS and arch not in spec.listed_archs:
            raise ValueError(f"unknown arch {arch!r}; use {', '.join(tpl.ARCHS)}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    space = search_space_configs(search_space, template)
    sampled = not (full or dtypes or layouts or ops)
    dt = _axis(dtypes, tpl.DTYPES, main[0], full or sampled, "dtype")
    la = _axis(layouts, tpl.LAYOUTS, main[1], full or sampled, "layout")
    op = _axis(ops, tpl.OPS, main[2], full or sampled, "op")
    served = getattr(tpl, "LAYOUT_DTYPES", None)  # MX: the dtypes of each layout
    variants = [v for v in itertools.product(dt, la, op)
                if served is None or v[0] in served[v[1]]]
    if not variants:
        raise ValueError(f"no variant of {template} serves dtypes {dt} in layouts {la} "
                         f"(served: {({lay: served[lay] for lay in la})})")
    variants.sort(key=lambda v: v != main)  # main variant first, stable otherwise
    jobs: list[Job] = []
    for arch in archs:
        per_arch: list[Job] = []
        for dtype, layout, op_name in variants:
            chosen = spec.configs_of_variant(space, dtype)
            # a main variant compiles all its configs (MX: every bf16 mm format pairing
            # of every layout), every other one the representative config
            if sampled and not spec.main(dtype, layout, op_name):
                chosen = [spec.representative()]
            for config in chosen:
                reasons = spec.resource_reasons(config, dtype, arch)
                fits = not reasons
                unsupported = tpl.split_k_reason(config, op_name)
                if unsupported:
                    fits, reasons = False, [unsupported]
                per_arch.append(Job(template, tuple(config.to_json().items()), arch, dtype,
                                    layout, op_name, None if fits else "; ".join(reasons)))
        jobs += list(dict.fromkeys(per_arch))[:limit]
    return jobs


# ---------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------


def _failed_result(job: Job, error: str, seconds: float = 0.0) -> CompileResult:
    return CompileResult(template=job.template, source_hash=template_source_hash(job.template),
                         config=job.config_json, arch=job.arch, dtype=job.dtype,
                         layout=job.layout, op=job.op, ok=False, error=error,
                         compile_seconds=round(seconds, 3))


def _from_payload(job: Job, payload: dict[str, Any], seconds: float) -> JobResult:
    if "result" not in payload:
        return JobResult(job, FAILED, _failed_result(job, f"worker raised {payload['error']}",
                                                     seconds))
    result = CompileResult(**payload["result"])
    return JobResult(job, OK if result.ok else FAILED, result)


def _compile_all(jobs: list[Job], n_workers: int, timeout_s: float, compile_fn: str,
                 on_result: Callable[[JobResult], None],
                 dump_dir: str | None = None) -> None:
    """Compile ``jobs`` in ``n_workers`` processes of a pool of their own
    (:func:`.build_pool.run_pool`), reporting each through ``on_result`` from this
    thread."""
    extra = {"dump_dir": dump_dir} if dump_dir else {}

    def on_event(event: PoolEvent) -> None:
        on_result(job_result(jobs[event.index], event))

    warm_up = ["flydsl.compiler"] if compile_fn in _CROSS_COMPILE_FNS else []
    run_pool([job_payload(job, extra) for job in jobs], n_workers, timeout_s, compile_fn,
             on_event, warm_up=warm_up)


def job_payload(job: Job, extra: dict[str, Any]) -> dict[str, Any]:
    """A worker's description of ``job`` (``extra``: more keyword arguments)."""
    if job.epilogue:
        extra = {**extra, "epilogue": job.epilogue}
    return {"template": job.template, "config": job.config_json, "arch": job.arch,
            "dtype": job.dtype, "layout": job.layout, "op": job.op, "extra": extra}


def job_result(job: Job, event: PoolEvent) -> JobResult:
    """The catalog's outcome of a pool event."""
    if event.kind == "result":
        return _from_payload(job, event.detail, event.seconds)
    return JobResult(job, CRASHED if event.kind == "crashed" else TIMEOUT,
                     _failed_result(job, event.detail, event.seconds))


# ---------------------------------------------------------------------------
# DB rows
# ---------------------------------------------------------------------------


def flydsl_version() -> str:
    try:
        return importlib.metadata.version("flydsl")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def db_row(item: JobResult, *, run_id: int, recorded_at: str, flydsl: str) -> dict[str, Any]:
    r = item.result
    return {
        "arch": item.job.arch, "template": item.job.template, "template_hash": r.source_hash,
        "config_id": item.job.config_id, "config": canonical_json(item.job.config_json),
        "op": item.job.op, "dtype": item.job.dtype, "layout": item.job.layout,
        "flydsl": flydsl, "ok": int(r.ok), "error": (r.error or None) and r.error[:4000],
        "vgprs": r.vgprs, "agprs": r.agprs, "sgprs": r.sgprs, "lds_bytes": r.lds_bytes,
        "scratch_bytes": r.scratch_bytes, "vgpr_spills": r.vgpr_spills,
        "sgpr_spills": r.sgpr_spills, "mfma": canonical_json(dict(r.mfma_counts)),
        "compile_s": r.compile_seconds, "run_id": run_id, "recorded_at": recorded_at,
        **_emulation_columns(r.emulation),
        **loop_columns(r.loop_analysis),
    }


def loop_columns(analysis: dict[str, Any] | None) -> dict[str, Any]:
    """The catalog's main-loop columns: instruction mix (JSON) and llvm-mca estimate
    (``mca_note`` says why the estimate is absent)."""
    if analysis is None:
        return {"loop_found": None, "loop_mix": None, "loop_mfma": None, "loop_cycles": None,
                "mfma_model_cycles": None, "mca_ratio": None, "mca_note": None,
                "loop_outside": None}
    mca = analysis.get("mca") or {}
    found = bool(analysis.get("main_loop"))
    note = analysis.get("mca_unavailable")
    if not found:
        note = analysis.get("reason") or note
    return {
        "loop_found": int(found),
        "loop_mix": canonical_json(analysis["mix"]) if found else None,
        "loop_mfma": analysis["mix"].get("mfma_total") if found else None,
        "loop_cycles": mca.get("cycles_per_trip"),
        "mfma_model_cycles": mca.get("model_cycles_per_mfma"),
        "mca_ratio": mca.get("ratio"),
        "mca_note": note[:1000] if note else None,
        "loop_outside": analysis.get("outside_instructions") if found else None,
    }


def _emulation_columns(emulation: dict[str, Any] | None) -> dict[str, Any]:
    if emulation is None:
        return {"emulated": 0, "emulation_ok": None, "max_abs_err": None,
                "emulation_error": None}
    error = emulation.get("error")
    return {"emulated": 1, "emulation_ok": int(bool(emulation.get("ok"))),
            "max_abs_err": emulation.get("max_abs_err"),
            "emulation_error": error[:4000] if error else None}


class CatalogWriter:
    """Buffers results and upserts them into ``compile_catalog`` (``db/catalog.py``) in
    batches."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from ...db.catalog import CatalogStore

        self.store = CatalogStore(path, tool="compile-check")
        self.flydsl = flydsl_version()
        self.buffer: list[JobResult] = []
        self.last_flush = time.monotonic()
        self.written = 0
        self.run_id: int | None = None

    def add(self, item: JobResult) -> None:
        self.buffer.append(item)
        if (len(self.buffer) >= BATCH_ROWS
                or time.monotonic() - self.last_flush >= BATCH_SECONDS):
            self.flush()

    def flush(self) -> None:
        from ...db.store import utc_now

        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        now = utc_now()

        def rows(run_id: int) -> list[dict[str, Any]]:
            self.run_id = run_id
            return [db_row(i, run_id=run_id, recorded_at=now, flydsl=self.flydsl)
                    for i in self.buffer]

        self.store.write(rows)
        self.written += len(self.buffer)
        self.buffer.clear()

    def close(self) -> None:
        """Flush, then fold the WAL into the main file: the DB may be shipped as one file."""
        try:
            self.flush()
        finally:
            self.store.close()


# ---------------------------------------------------------------------------
# Running and summarizing
# ---------------------------------------------------------------------------


@dataclass
class CatalogRun:
    results: list[JobResult] = field(default_factory=list)
    wall_seconds: float = 0.0
    workers: int = 0
    db_path: str | None = None
    interrupted: bool = False


def run_catalog(jobs: list[Job], *, workers: int | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S, db_path: str | os.PathLike[str] | None,
                compile_rejected: bool = False, progress: bool = True,
                compile_fn: str = DEFAULT_COMPILE_FN,
                dump_dir: str | os.PathLike[str] | None = None) -> CatalogRun:
    """Compile ``jobs`` (rejected ones only with ``compile_rejected``) and record them.

    Returns every job's result, in completion order. With ``db_path`` results are upserted
    into ``compile_catalog`` in batches; on KeyboardInterrupt the finished ones are
    committed before the exception propagates. Raises ToolchainError up front when no
    AMDGPU linker exists (only for the default compile function). With ``dump_dir`` the
    compile function keeps each job's FlyDSL dump there (``isa_path`` is set).
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if compile_fn in _CROSS_COMPILE_FNS:
        from .toolchain import rocm_path_for_compile

        rocm_path_for_compile()
    n_workers = max(1, workers or os.cpu_count() or 1)
    run = CatalogRun(workers=n_workers, db_path=str(db_path) if db_path else None)
    writer = CatalogWriter(Path(db_path)) if db_path else None
    to_compile = [j for j in jobs if j.rejected is None or compile_rejected]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn())
    start = time.monotonic()
    # progress goes to stderr (a command's stdout may be JSON)
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    with Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task("compile-check", total=len(jobs), failed=0)
        failed = 0

        def record(item: JobResult) -> None:
            nonlocal failed
            run.results.append(item)
            if item.accepted and item.status != OK:
                failed += 1
            bar.update(task, advance=1, failed=failed)
            if writer is not None:
                writer.add(item)

        try:
            for job in jobs:
                if job.rejected is not None and not compile_rejected:
                    record(JobResult(job, REJECTED,
                                     _failed_result(job, REJECTED_PREFIX + job.rejected)))
            if to_compile:
                _compile_all(to_compile, n_workers, timeout_s, compile_fn, record,
                             str(dump_dir) if dump_dir is not None else None)
        except KeyboardInterrupt:
            run.interrupted = True
            raise
        finally:
            run.wall_seconds = round(time.monotonic() - start, 3)
            if writer is not None:
                writer.close()
    return run
