"""Predicted short lists: the model's best configs per reference shape, stored in a DB.

The package ships ``tuning_db/mi355x_predicted.db`` (built by
``scripts/build_predicted_db.py``): for the dense BF16 suite and common LLM shapes (Llama-3
8B/70B and Mixtral linear layers, Mixtral and DeepSeek-V3 expert-parallel grouped GEMMs;
decode and prefill token counts), the model's best :data:`STORED_RANKS` configs on MI355X,
each row marked ``kind = 'predicted'``, and beside each shape AITER's published best time
for it where AITER's tuned tables have it (with the source). The rows live in their own
table (:data:`TABLE`), apart from the measured ``results``: they are never served as
timings, only as the short list a compile offers (top-k preselection), and only while the
model version that wrote them is the running one. A stored config is used only if it is one
of the problem's eligible configs (values read from the DB select among the configs the
template already allows; they never reach kernel generation themselves).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..db import short_lists as stored_rows
from ..db.errors import DBError
from ..db.shipped import shipped_db_paths
from .devices import DEFAULT_DEVICE
from .model import MODEL_VERSION, Prediction

log = logging.getLogger("inductor_flydsl")
TABLE = stored_rows.TABLE  # its columns: db/schema.py's PREDICTED_SHORT_LISTS
PREDICTED_DB_NAME = "mi355x_predicted.db"
STORED_RANKS = 8


@dataclass(frozen=True)
class StoredEntry:
    rank: int
    config: dict[str, int]
    prediction: Prediction


def _valid_config(text: str) -> dict[str, int] | None:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in value.items()):
        return None
    return value


def stored_version() -> str:
    """What stored predictions must have been written by: the model's version and the
    shipped catalog's content (the figures the model ranked from)."""
    return f"{MODEL_VERSION}-{_catalog_digest()}"


def _catalog_digest() -> str:
    from .ranking import shipped_catalog_path

    path = shipped_catalog_path()
    if path is None:
        return "no-catalog"
    stat = path.stat()
    return _digest(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _digest(path: str, _mtime_ns: int, _size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:8]


def read_short_list(path: str | Path, problem_id: str, device: str
                    ) -> list[StoredEntry]:
    """The stored short list of ``problem_id`` on ``device`` in the DB at ``path``, best
    first; empty when there is none, the table is missing, or it was written by another
    model version or from another catalog (:func:`stored_version`). Malformed rows are
    skipped with a log line."""
    try:
        stat = os.stat(path)
    except OSError:
        return []
    try:
        return list(_read(str(path), stat.st_mtime_ns, stat.st_size, problem_id, device,
                          stored_version()))
    except DBError:  # unreadable now: nothing cached, read again next time
        return []


@functools.lru_cache(maxsize=1024)
def _read(path: str, _mtime_ns: int, _size: int, problem_id: str, device: str,
          version: str) -> tuple[StoredEntry, ...]:
    rows = stored_rows.read_list(path, problem_id, device)
    out = []
    for row in rows:
        rank, config_text, us, tflops, share, bound, written_by = (
            row["rank"], row["config"], row["predicted_us"], row["tflops"],
            row["roofline_share"], row["bound"], row["model_version"])
        if written_by != version:
            return ()  # another model or catalog: stale as a whole
        config = _valid_config(config_text)
        if config is None or not isinstance(us, int | float) or us <= 0:
            log.warning("inductor_flydsl: skipping a malformed predicted row in %s", path)
            continue
        out.append(StoredEntry(int(rank), config, Prediction(
            us=float(us), tflops=float(tflops or 0), roofline_share=float(share or 0),
            bound=str(bound), device=device, parts={"from": f"stored short list ({path})"})))
    return tuple(out)


def shipped_short_list(problem_id: str, arch: str) -> list[StoredEntry]:
    """The shipped predicted short list of ``problem_id`` on ``arch``'s reference device
    (empty when no shipped DB holds one)."""
    device = DEFAULT_DEVICE.get(arch)
    if device is None:
        return []
    for path in shipped_db_paths():
        found = read_short_list(path, problem_id, device)
        if found:
            return found
    return []


def write_short_lists(db_path: str | Path, rows: Iterable[dict[str, Any]],
                      problems: Iterable[Any] = ()) -> int:
    """Store ``rows`` in :data:`TABLE` of the tuning DB at ``db_path`` (created if
    missing), with the ``problems`` (``Problem``) they key; returns how many rows were
    written."""
    return stored_rows.write_rows(db_path, rows, [p.as_row() for p in problems])


def stored_lists(db_path: str | Path) -> list[dict[str, Any]]:
    """Every stored row of :data:`TABLE` (empty if the DB has none), for reports; each
    with ``current``: written by the running model from the shipped catalog."""
    rows = stored_rows.read_all(db_path)
    current = stored_version()
    for row in rows:  # a stale row is shown as such, and never used
        row["current"] = row.get("model_version") == current
    return rows


def shipped_stored_lists() -> list[dict[str, Any]]:
    return [row for path in shipped_db_paths() for row in stored_lists(path)]
