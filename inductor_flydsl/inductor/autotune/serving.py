"""Recorded timings in place of benchmarking.

A compile that finds an exact record of a GEMM problem hands Inductor every candidate it
would have benchmarked anyway, each with the time recorded for it, instead of benchmarking
them. Inductor then makes its own decision as always: its ``lookup`` (and any user or
test customisation of it), its minimum, ``min_speedup_threshold``,
``override_best_choice`` and, on a GPU, the deferred choice between the best template with
its epilogue fused and the best choice plus a separate epilogue kernel
(``MultiTemplateBuffer``). So the final code uses the kernels plain Inductor would pick
with those timings, epilogue fusion included, and nothing is benchmarked or precompiled
for a served candidate. A candidate the record lacks is benchmarked as usual.

The timing served is what the benchmark measured when the candidate was recorded
(``CandidateResult.served_ms``), so a ``lookup`` that adjusts timings adjusts them again
the same way; a failed or invalid candidate is served as ``inf``.

Served and measured timings are kept per choice object (weak references: choices live as
long as the lowering that made them), because Inductor may ask for the timings after the
selection returned (a ``MultiTemplateBuffer`` benchmarks lazily, from the scheduler).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from ...db.store import RecordedSelection
from .candidates import candidate_id


class ChoiceTimes:
    """choice -> milliseconds, held weakly (by identity when a choice refuses weakrefs)."""

    def __init__(self) -> None:
        self._weak: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._strong: dict[int, tuple[Any, float]] = {}
        self._lock = threading.Lock()

    def set(self, choice: Any, ms: float) -> None:
        with self._lock:
            try:
                self._weak[choice] = ms
            except TypeError:
                self._strong[id(choice)] = (choice, ms)

    def get(self, choice: Any) -> float | None:
        with self._lock:
            try:
                if choice in self._weak:
                    return self._weak[choice]
            except TypeError:
                pass
            held = self._strong.get(id(choice))
            return held[1] if held is not None and held[0] is choice else None

    def __contains__(self, choice: Any) -> bool:
        return self.get(choice) is not None

    def pick(self, choices: Iterable[Any]) -> dict[Any, float]:
        found = {}
        for choice in choices:
            ms = self.get(choice)
            if ms is not None:
                found[choice] = ms
        return found


SERVED = ChoiceTimes()  # recorded timings handed to Inductor instead of benchmarking
MEASURED = ChoiceTimes()  # what Inductor's benchmark returned in this process


def recorded_timings(selection: RecordedSelection, choices: Sequence[Any]) -> dict[Any, float]:
    """The recorded time of each current choice the selection holds a result for."""
    by_id = {r.candidate_id: r for r in selection.results}
    timings = {}
    for choice in choices:
        result = by_id.get(candidate_id(choice))
        if result is not None:
            timings[choice] = result.served_ms
    return timings


def servable(timings: dict[Any, float]) -> bool:
    """Serve only when at least one recorded time is usable: a record of failures alone
    would make Inductor fail where benchmarking again might not."""
    return any(math.isfinite(t) for t in timings.values())


def serve(timings: dict[Any, float]) -> None:
    for choice, ms in timings.items():
        SERVED.set(choice, ms)


def unserved(choices: Sequence[Any]) -> list[Any]:
    return [c for c in choices if c not in SERVED]
