"""The short list a prior hands Inductor (opt-in, ``INDUCTOR_FLYDSL_PRIORS=1``): the
prior's best candidates that are still among the current choices, plus ATen's baseline
(``priors.py`` ranks the priors; this matches their rows to Inductor's choices)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...priors import VERSION_KEYS, Prior
from ...problems.buckets import family_id
from .candidates import backend_of, candidate_id, config_of


def _family(backend: str, name: str, config: dict[str, Any]) -> str:
    return family_id(backend, name, {k: v for k, v in config.items()
                                     if k not in VERSION_KEYS})


def short_list(prior: Prior, choices: Sequence[Any], top_k: int) -> list[Any] | None:
    """The choices Inductor benchmarks under ``prior``: its best ``top_k`` still present,
    then ATen's baseline; None when fewer than two choices would be left."""
    by_id = {candidate_id(c): c for c in choices}
    by_family: dict[str, Any] = {}
    for c in choices:
        by_family.setdefault(_family(backend_of(c), str(c.name), config_of(c)), c)
    picked: list[Any] = []
    for r in prior.selection.results:  # ok results fastest first
        if len(picked) >= top_k:
            break
        if not r.usable:
            continue
        choice = by_id.get(r.candidate_id) or by_family.get(
            _family(r.backend, r.name, r.config))
        if choice is not None and choice not in picked:
            picked.append(choice)
    if not picked:
        return None
    aten = next((c for c in choices if backend_of(c) == "aten"), None)
    if aten is not None and aten not in picked:
        picked.append(aten)
    return picked if len(picked) >= 2 else None
