"""Rank a problem's FlyDSL configs by predicted time, from the shipped compile catalog.

A compile with no exact record offers only the ``INDUCTOR_FLYDSL_TOP_K`` configs the
model ranks best (default 4; 0 = every eligible config, as pruned by
``configs.prune_for_shape``). The figures come from the shipped compile catalog (each
DEFAULT config's registers, LDS and main loop, cross-compiled when the package was
built), so nothing is compiled to rank. A config with no catalog row of its own variant
borrows the row of the same config in the nearest variant (same arch and template;
same dtype first, then layout ``nt``, then op ``mm``: the main loop differs only in how
the LDS is read), and says so; a config with no row at all is ranked after the
predicted ones, in the pruned order.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import settings
from ..db.catalog import read_usable_rows
from ..db.errors import DBError
from ..db.shipped import shipped_db_paths
from .config_names import config_key
from .devices import DEFAULT_DEVICE, DeviceSpec, device_spec
from .kernel_profile import KernelProfile, profile_from_catalog_row
from .model import Prediction, predict
from .traffic import GemmShape

log = logging.getLogger("inductor_flydsl")
CATALOG_NAME = "flydsl_compile_catalog.db"


@dataclass(frozen=True)
class RankedConfig:
    config: Any
    prediction: Prediction | None  # None: no catalog figures for this config
    borrowed_from: str | None = None  # the catalog variant whose figures were used
    stored: bool = False  # from a shipped predicted short list (short_lists.py)


def shipped_catalog_path() -> Path | None:
    return next((p for p in shipped_db_paths() if p.name == CATALOG_NAME), None)


def _catalog_rows(path: str, arch: str, template: str) -> tuple[dict[str, Any], ...]:
    """The catalog's usable rows of ``arch`` and ``template`` (cached per file version: a
    rewritten catalog is read again; an unreadable one is not cached)."""
    try:
        stat = os.stat(path)
    except OSError:
        return ()
    return _read_catalog_rows(path, stat.st_mtime_ns, stat.st_size, arch, template)


@functools.lru_cache(maxsize=32)
def _read_catalog_rows(path: str, _mtime_ns: int, _size: int, arch: str, template: str
                       ) -> tuple[dict[str, Any], ...]:
    try:
        rows = read_usable_rows(path, arch, template)
    except DBError as exc:  # the catalog is optional: rank without it, read again later
        log.warning("inductor_flydsl: compile catalog %s unreadable: %s", path, exc)
        raise _Unreadable from exc
    return tuple(rows)


class _Unreadable(Exception):
    """Raised out of the cached reader so a failed read is not cached."""


def catalog_profile(config: Any, *, arch: str, template: str, op: str, dtype: str,
                    layout: str, catalog: Path | None = None
                    ) -> tuple[KernelProfile, str | None] | None:
    """The profile of ``config`` from the catalog and, when it is borrowed from another
    variant, that variant (``mm bf16 nt``); None when the catalog has no row of it."""
    path = catalog or shipped_catalog_path()
    if path is None:
        return None
    key = config_key(config.to_json() if hasattr(config, "to_json") else dict(config))
    try:
        rows = _catalog_rows(str(path), arch, template)
    except _Unreadable:
        return None
    matches = [r for r in rows if config_key(json.loads(r["config"])) == key]
    if not matches:
        return None
    best = min(matches, key=lambda r: (r["dtype"] != dtype, r["layout"] != layout,
                                       r["op"] != op, r["layout"] != "nt", r["op"] != "mm"))
    variant = f"{best['op']} {best['dtype']} {best['layout']}"
    borrowed = None if (best["op"], best["dtype"], best["layout"]) == (op, dtype, layout) \
        else variant
    return profile_from_catalog_row(best), borrowed


def top_k() -> int:
    """``INDUCTOR_FLYDSL_TOP_K`` (0: no preselection); a bad value logs and reads 4."""
    return settings.TOP_K.value()


def device_for(arch: str) -> DeviceSpec:
    return device_spec(DEFAULT_DEVICE.get(arch, "MI355X"))


def rank(configs: Sequence[Any], shape: GemmShape, *, arch: str, template: str, op: str,
         dtype: str, layout: str, device: DeviceSpec | None = None,
         catalog: Path | None = None, timing: str = "graph") -> list[RankedConfig]:
    """``configs`` fastest predicted first; unpredicted ones after, in their given order."""
    device = device or device_for(arch)
    predicted: list[RankedConfig] = []
    rest: list[RankedConfig] = []
    for config in configs:
        found = catalog_profile(config, arch=arch, template=template, op=op, dtype=dtype,
                                layout=layout, catalog=catalog)
        if found is None:
            rest.append(RankedConfig(config, None))
            continue
        profile, borrowed = found
        try:
            prediction = predict(profile, shape, device, timing)
        except ValueError as exc:  # a shape the kernel cannot take: leave it unranked
            log.debug("inductor_flydsl: no prediction for %s: %s", config, exc)
            rest.append(RankedConfig(config, None))
            continue
        predicted.append(RankedConfig(config, prediction, borrowed))
    predicted.sort(key=lambda r: r.prediction.us if r.prediction else 0.0)
    return predicted + rest


def preselect(ranked: list[RankedConfig], k: int) -> list[Any]:
    """The configs a compile offers: the ``k`` first of ``ranked`` (all when ``k`` is 0)."""
    chosen = ranked if k <= 0 else ranked[:k]
    return [r.config for r in chosen]


def stored_first(ranked: list[RankedConfig], stored: Sequence[Any]) -> list[RankedConfig]:
    """``ranked`` with the configs of a stored short list (``short_lists.StoredEntry``, best
    first) moved to the front in the stored order; a stored config that is not among
    ``ranked`` (not eligible for this problem) is ignored."""
    by_key = {config_key(r.config.to_json()): r for r in ranked}
    first: list[RankedConfig] = []
    for entry in stored:
        found = by_key.pop(config_key(entry.config), None)
        if found is not None:
            first.append(RankedConfig(found.config, entry.prediction, found.borrowed_from,
                                      stored=True))
    return first + [r for r in ranked if config_key(r.config.to_json()) in by_key]
