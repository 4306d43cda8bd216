"""The figures of a compile-catalog run (:func:`summarize`): per arch and overall counts,
compile seconds, register/LDS ranges, MFMA counts, the emulator's verdicts and the main
loops' llvm-mca ratios; ``clean`` is the ``compile-check`` exit status."""

from __future__ import annotations

import collections
import statistics
from typing import Any

from ...template_loader import template_source_hash
from .catalog import (
    CRASHED,
    OK,
    REJECTED,
    TEMPLATE,
    TIMEOUT,
    CatalogRun,
    JobResult,
    flydsl_version,
)


def _range(values: list[int | None]) -> list[int] | None:
    known = [v for v in values if v is not None]
    return [min(known), max(known)] if known else None


def _arch_summary(items: list[JobResult]) -> dict[str, Any]:
    ok = [i for i in items if i.result.ok]
    compiled = [i for i in items if i.status != REJECTED]
    seconds = [i.result.compile_seconds for i in compiled]
    mfma: collections.Counter[str] = collections.Counter()
    for i in ok:
        mfma.update(i.result.mfma_counts)
    problems = [f"{i.job.describe()}: {i.result.error or 'compiled'}"
                + (" (spills)" if i.spilled else "")
                for i in items if i.accepted and (i.status != OK or i.spilled)]
    emulated = [i for i in ok if i.result.emulation is not None]
    problems += [f"{i.job.describe()}: emulation: {i.result.emulation.get('error')}"
                 for i in emulated if not i.result.emulation.get("ok")]
    errors = [i.result.emulation["max_abs_err"] for i in emulated
              if i.result.emulation.get("max_abs_err") is not None]
    return {
        "jobs": len(items),
        "compiled": len(compiled),
        "ok": len(ok),
        "failed": sum(1 for i in items if i.accepted and i.status != OK),
        "crashed": sum(1 for i in items if i.status == CRASHED),
        "timeouts": sum(1 for i in items if i.status == TIMEOUT),
        "rejected": sum(1 for i in items if not i.accepted),
        "rejected_compiled_ok": sum(1 for i in items if not i.accepted and i.result.ok),
        "spilled": sum(1 for i in items if i.spilled),
        "compile_s": {
            "total": round(sum(seconds), 3),
            "min": min(seconds) if seconds else None,
            "median": round(statistics.median(seconds), 3) if seconds else None,
            "mean": round(statistics.fmean(seconds), 3) if seconds else None,
            "max": max(seconds) if seconds else None,
        },
        "vgprs": _range([i.result.vgprs for i in ok]),
        "agprs": _range([i.result.agprs for i in ok]),
        "total_vgprs": _range([i.result.total_vgprs for i in ok]),
        "sgprs": _range([i.result.sgprs for i in ok]),
        "lds_bytes": _range([i.result.lds_bytes for i in ok]),
        "mfma": dict(sorted(mfma.items())),
        "emulated": len(emulated),
        "emulated_ok": sum(1 for i in emulated if i.result.emulation.get("ok")),
        "emulation_s": round(sum(i.result.emulation.get("seconds", 0.0) for i in emulated), 3),
        "max_abs_err": max(errors) if errors else None,
        **_loop_summary(ok),
        "problems": problems,
    }


def _loop_summary(ok: list[JobResult]) -> dict[str, Any]:
    """How many ok compiles have a main loop and an llvm-mca estimate; the ratio range;
    why estimates are missing (each distinct reason once)."""
    analyses = [i.result.loop_analysis for i in ok if i.result.loop_analysis is not None]
    ratios = [a["mca"]["ratio"] for a in analyses if a.get("mca")]
    notes = sorted({a["mca_unavailable"] for a in analyses
                    if a.get("main_loop") and not a.get("mca") and a.get("mca_unavailable")})
    return {
        "main_loops": sum(1 for a in analyses if a.get("main_loop")),
        "mca_estimates": len(ratios),
        "mca_ratio": [min(ratios), max(ratios)] if ratios else None,
        "mca_notes": notes,
    }


def summarize(run: CatalogRun) -> dict[str, Any]:
    """Per-arch and overall figures; ``clean`` is False if an accepted config failed or
    spilled (the compile-check exit status)."""
    by_arch: dict[str, list[JobResult]] = collections.defaultdict(list)
    for item in run.results:
        by_arch[item.job.arch].append(item)
    archs = {arch: _arch_summary(items) for arch, items in sorted(by_arch.items())}
    template = run.results[0].job.template if run.results else TEMPLATE
    total = _arch_summary(run.results)
    return {
        "archs": archs,
        "total": {k: v for k, v in total.items() if k != "problems"},
        "clean": not total["problems"],
        "wall_s": run.wall_seconds,
        "workers": run.workers,
        "db": run.db_path,
        "flydsl": flydsl_version(),
        "template": template,
        "template_hash": template_source_hash(template),
    }
