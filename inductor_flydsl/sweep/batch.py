"""Many sweep items' GEMMs in ONE compiled graph, each autotuned and recorded on its own.

Most of a CPU item's time is Inductor compiling a whole graph around one GEMM (tracing,
joint-graph passes, the wrapper's C++ build). A batch compiles one graph that calls every
item's GEMM on its own inputs: Inductor still runs one ``autotune_select_algorithm`` per
GEMM, the plugin's feedback saver still records each one, and the graph-level work is paid
once. Items whose GEMMs could not be told apart afterwards never share a batch
(:func:`plan_batches`); a dynamic-M item always runs alone (``mark_dynamic`` applies to
the whole frame).

Which problem belongs to which item is read back from the DB's ``problems`` rows of the
problem ids the plugin decided (m, n, k, batch): that is the plugin's own record, so no
summary string is parsed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .items import SweepItem

MAX_BATCH = 8  # items per compiled graph; a failed batch is retried item by item


def match_key(item: SweepItem) -> tuple[int, int, int, int]:
    """What tells an item's GEMM apart from the others in its batch."""
    return (item.m, item.n, item.k, item.batch if item.op == "bmm" else 1)


def plan_batches(items: Iterable[SweepItem], size: int = MAX_BATCH) -> list[list[SweepItem]]:
    """Consecutive groups of at most ``size`` items, in order, with distinct
    :func:`match_key` within a group; dynamic-M items alone."""
    batches: list[list[SweepItem]] = []
    current: list[SweepItem] = []
    keys: set[tuple[int, int, int, int]] = set()
    for item in items:
        if item.dynamic_m or size <= 1:
            if current:
                batches.append(current)
                current, keys = [], set()
            batches.append([item])
            continue
        if len(current) >= size or match_key(item) in keys:
            batches.append(current)
            current, keys = [], set()
        current.append(item)
        keys.add(match_key(item))
    if current:
        batches.append(current)
    return batches


def batch_module(parts: list[tuple[Any, tuple[Any, ...]]]) -> tuple[Any, tuple[Any, ...]]:
    """One ``nn.Module`` that runs every ``(fn, inputs)`` part on its own slice of the flat
    inputs and returns their outputs as a tuple. Modules stay submodules, so freezing
    folds their weights as it does for a single item."""
    import torch

    class _Call(torch.nn.Module):
        def __init__(self, fn: Any) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, *args: Any) -> Any:
            return self.fn(*args)

    class _Batch(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.parts = torch.nn.ModuleList(
                [fn if isinstance(fn, torch.nn.Module) else _Call(fn) for fn, _ in parts])
            self.arity = [len(inputs) for _, inputs in parts]

        def forward(self, *flat: Any) -> tuple[Any, ...]:
            outs, start = [], 0
            for part, count in zip(self.parts, self.arity, strict=True):
                outs.append(part(*flat[start:start + count]))
                start += count
            return tuple(outs)

    flat = tuple(x for _, inputs in parts for x in inputs)
    return _Batch().eval(), flat


def problems_by_item(items: list[SweepItem], problem_ids: Iterable[str],
                     db_path: str) -> dict[str, list[str]]:
    """item_id -> the decided problem ids whose (m, n, k, batch) row matches the item."""
    from ..db.sweep_state import problem_sizes

    found: dict[str, list[str]] = {item.item_id: [] for item in items}
    by_key = {match_key(item): item.item_id for item in items}
    for row in problem_sizes(db_path, sorted(set(problem_ids))):
        key = (row["m"], row["n"], row["k"], row["batch"] or 1)
        item_id = by_key.get(key) or by_key.get((*key[:3], 1))
        if item_id is not None:
            found[item_id].append(str(row["id"]))
    return found
