"""Priors: a short re-tune from the nearest older record when no exact winner holds.

After a torch, triton or flydsl upgrade (or a template change), the recorded selections
of a problem no longer hold exactly (``validity.py``), but their ranking is still the
best guess there is. The nearest record of the same problem is, in order:

1. the same device (same arch, product and compute units) with other software;
2. the same arch on another product or compute-unit count (same device kind);

and within a tier the one with fewer changed results, then the more confident, then the
newest; the user's DB before the shipped ones at equal rank. Its ranking gives Inductor a
short list: the prior's best ``k`` candidates that are still among the current choices
(default 2: the winner and the runner-up), plus ATen's baseline. Inductor benchmarks the
short list (a prior never skips benchmarking: versions changed), and the feedback saver
records the fresh results as exact rows for the current stack, with the prior they came
from. Candidates that no longer exist are skipped: a candidate is matched by its id, else
by its family (backend, kernel name, config; for FlyDSL the config without the template
hash, so a changed template's build of the same config counts). When fewer than two
choices are left, Inductor autotunes everything as it would without the DB.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .db.store import RecordedSelection, rank_of
from .provenance.device import DeviceInfo
from .provenance.software import SoftwareInfo

# config entries that name a build of the code, not the candidate it builds
VERSION_KEYS = frozenset({"template_hash"})


@dataclass(frozen=True)
class Prior:
    selection: RecordedSelection
    same_device: bool
    changes: tuple[str, ...]  # per backend, what changed since it was recorded

    @property
    def source(self) -> str:
        return self.selection.source

    def describe(self) -> str:
        """``same device, torch 2.13.0+cpu, triton none, flydsl 0.5.0, recorded <when>
        (<path>); changed: aten: torch 2.13.0+cpu -> 2.14.1``."""
        s, d = self.selection.software, self.selection.device
        where = "same device" if self.same_device else (
            f"same arch {d['arch']} on {d['name']} ({d['compute_units']} CUs)")
        versions = ", ".join(f"{k} {s[k]}" for k in ("torch", "triton", "flydsl")
                             if s.get(k))
        text = (f"{where}, {versions}, recorded {self.selection.recorded_at} "
                f"({self.source})")
        return f"{text}; changed: {'; '.join(self.changes)}" if self.changes else text

    def to_json(self) -> str:
        """What ``winners.prior`` stores for a winner chosen from this prior's short list."""
        s = self.selection
        return json.dumps({"source": s.source, "device": s.device, "software": s.software,
                           "winner": s.winner.name or s.winner.candidate_id,
                           "recorded_at": s.recorded_at, "same_device": self.same_device,
                           "changes": list(self.changes)}, sort_keys=True)


def find_prior(db: Any, device: DeviceInfo, software: SoftwareInfo,
               problem: Any) -> Prior | None:
    """The nearest older record of ``problem`` in any layer of ``db`` (a
    ``LayeredTuningDB``)."""
    return nearest_prior(db.selections_by_layer(device, problem), device, software)


def nearest_prior(per_db: Sequence[list[RecordedSelection]], device: DeviceInfo,
                  software: SoftwareInfo) -> Prior | None:
    """The nearest usable prior among the recorded selections of each DB (user's first).
    Selections that are exact for ``software`` on ``device`` are not priors (they were
    served, or were stale); selections with no ``ok`` result rank nothing."""
    ranked: list[tuple[tuple[Any, ...], int, Prior]] = []
    order = 0
    for selections in per_db:
        for sel in sorted(selections, key=lambda s: s.recorded_at, reverse=True):
            same = sel.device_id == device.id
            changes = sel.changes(software)
            if (same and not changes) or not any(r.usable for r in sel.results):
                continue
            prior = Prior(sel, same, tuple(changes))
            ranked.append(((not same, len(changes), -rank_of(sel.winner.confidence)),
                           order, prior))
            order += 1
    if not ranked:
        return None
    return min(ranked, key=lambda item: (item[0], item[1]))[2]


def describe_records(selections: Sequence[RecordedSelection],
                     software: SoftwareInfo) -> list[dict[str, Any]]:
    """For ``db show`` and ``explain``: each recorded winner of a problem, the versions it
    was measured with, whether it is exact for ``software`` (on its own device) or can
    only serve as a prior (and what changed), and the prior it was itself chosen from."""
    rows = []
    for sel in selections:
        changes = sel.changes(software)
        prior = json.loads(sel.prior) if sel.prior else None
        rows.append({
            "arch": sel.device["arch"], "device": sel.device["name"],
            "compute_units": sel.device["compute_units"],
            "winner": sel.winner.name or sel.winner.candidate_id,
            "backend": sel.winner.backend, "recorded_at": sel.recorded_at,
            "software": {k: v for k, v in sel.software.items() if v},
            "exact": not changes, "changes": changes, "source": sel.source,
            "chosen_from_prior": prior,
        })
    return rows


def describe_record_line(row: dict[str, Any]) -> str:
    """One line of :func:`describe_records` output."""
    versions = ", ".join(f"{k} {v}" for k, v in row["software"].items()
                         if k in ("torch", "triton", "flydsl", "blas"))
    head = f"{row['arch']} ({row['device']}): {row['winner']} [{versions}]"
    status = ("exact for this software: served without benchmarking" if row["exact"] else
              "prior only (" + "; ".join(row["changes"]) + ")")
    text = f"{head}: {status}"
    prior = row.get("chosen_from_prior")
    if prior:
        old = prior.get("software") or {}
        text += (f"; chosen from a short list after the prior recorded with torch "
                 f"{old.get('torch')}, flydsl {old.get('flydsl')} on "
                 f"{(prior.get('device') or {}).get('name')} ({prior.get('source')})")
    return text
