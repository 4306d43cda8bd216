"""The prebuilt tuning DBs shipped inside the package (``tuning_db/`` in the source tree)."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

SHIPPED_PACKAGE = "inductor_flydsl_tuning_db"


def shipped_db_paths() -> list[Path]:
    """Every ``*.db`` of the shipped package, sorted by name (empty if none installed)."""
    try:
        root = importlib.resources.files(SHIPPED_PACKAGE)
    except ModuleNotFoundError:
        return []
    paths = [Path(str(entry)) for entry in root.iterdir() if entry.name.endswith(".db")]
    return sorted(p for p in paths if p.is_file())
