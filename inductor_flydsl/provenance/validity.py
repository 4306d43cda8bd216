"""Whether a recorded tuning result still holds for this process's software stack.

A result depends only on what can change it:

- ATen, the CPU C++ template and every other backend: the torch release (its BLAS comes
  with the build on CPU; on a GPU also the BLAS library ATen prefers, ``hipblaslt``,
  ``cublas``, ...);
- Triton: torch and triton;
- Inductor's own handling of a GEMM and its epilogue (a ``subgraph`` candidate): torch,
  triton and, on a GPU, the BLAS library (it may compile to either);
- FlyDSL: flydsl and the candidate's own template source hash (recorded in its config),
  so changing one template leaves every other template's rows, and ATen's, exact.

A recorded selection (the winner and every candidate measured with it, one row each) is
*exact* for this stack when every one of its results still holds: it is served without
benchmarking. Otherwise it can only be a *prior* (``priors.py``): its ranking picks a short
list that Inductor benchmarks again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .software import SoftwareInfo, template_source_hash


def _differs(label: str, old: Any, new: str) -> list[str]:
    old_text = str(old) if old not in (None, "") else "unrecorded"
    return [] if (old or "") == (new or "") else [f"{label} {old_text} -> {new or 'none'}"]


def result_changes(backend: str, config: Mapping[str, Any], recorded: Mapping[str, Any],
                   current: SoftwareInfo, device_kind: str) -> list[str]:
    """What changed, for one result, between the stack it was recorded with (a
    ``software`` row) and ``current``; empty when the result still holds."""
    if backend == "flydsl":
        changes = _differs("flydsl", recorded.get("flydsl"), current.flydsl)
        name = config.get("template")
        now = template_source_hash(name) if isinstance(name, str) else None
        then = config.get("template_hash")
        if now is None or then != now:
            changes.append(f"template {name or '?'} {then or 'unrecorded'} -> "
                           f"{now or 'absent'}")
        return changes
    changes = _differs("torch", recorded.get("torch"), current.torch)
    if backend in ("triton", "subgraph"):  # a subgraph may be compiled to Triton kernels
        changes += _differs("triton", recorded.get("triton"), current.triton)
    if backend != "triton" and device_kind != "cpu":  # ATen's BLAS (in a subgraph too)
        changes += _differs("BLAS", recorded.get("blas"), current.blas)
    return changes


def selection_changes(results: Iterable[tuple[str, Mapping[str, Any]]],
                      recorded: Mapping[str, Any], current: SoftwareInfo,
                      device_kind: str) -> list[str]:
    """Every change (``"<backend>: torch 2.13.0 -> 2.14.1"``) over the results of one
    recorded selection, given as (backend, config) pairs; empty: the selection is exact."""
    seen: dict[str, None] = {}
    for backend, config in results:
        for change in result_changes(backend, config, recorded, current, device_kind):
            seen.setdefault(f"{backend}: {change}", None)
    return list(seen)
