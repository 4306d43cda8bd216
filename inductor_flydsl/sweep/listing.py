"""What ``inductor-flydsl sweep --list`` prints for each item: the id of the problem the
tuning DB records for it (the id ``db show`` and ``db list`` use) and the problem's name.

The id is the one the DB's last run of the item on this device recorded, else the one
``items.db_problem_id`` knows before the run (a CPU's), else none: an item's own
``item_id`` (the hash ``--resume`` keys its progress by) is never shown in its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..db import sweep_state
from ..db.open import UnusableDB, open_db
from .items import SweepItem, always_skipped, db_name, db_problem_id

NO_ID = "(id after it runs)"  # in the id column where only the run tells the id
SKIPPED_ID = "-"  # an item the device always skips records no problem
LEGEND = ("first column: the id of the problem the tuning DB records (what `db show ID` "
          f"and `db list` use); {NO_ID}: only the run tells it (then see `db list`)")


@dataclass(frozen=True)
class ListedItem:
    ids: tuple[str, ...]  # the problem ids, () where unknown before the run
    name: str  # the problem as the DB names it, else the item as given
    skipped_on: str | None  # the device kind that always skips the item

    def line(self) -> str:
        ids = (",".join(self.ids) if self.ids
               else SKIPPED_ID if self.skipped_on else NO_ID)
        skipped = f"  (always skipped on {self.skipped_on})" if self.skipped_on else ""
        return f"{ids}  {self.name}{skipped}"


def _recorded(db_path: Path, device_id: str) -> dict[str, list[str]]:
    """item_id -> problem ids its last run on this device recorded ({} without a DB)."""
    if not db_path.is_file():
        return {}
    try:
        db = open_db(db_path, writable=False)
    except UnusableDB:
        return {}  # the sweep itself says why when it runs
    try:
        return sweep_state.recorded_problem_ids(db, device_id)
    finally:
        db.close()


def listed_items(items: list[SweepItem], device_kind: str, db_path: Path,
                 device_id: str) -> list[ListedItem]:
    recorded = _recorded(db_path, device_id)
    out = []
    for item in items:
        skipped = always_skipped(item, device_kind)
        ids = recorded.get(item.item_id) or ([] if skipped else
                                             [i for i in [db_problem_id(item, device_kind)] if i])
        out.append(ListedItem(ids=tuple(ids),
                              name=db_name(item, device_kind) or item.summary(),
                              skipped_on=device_kind if skipped else None))
    return out
