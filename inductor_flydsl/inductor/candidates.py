"""Stable identity, backend and config of an Inductor ``ChoiceCaller``."""

from __future__ import annotations

import math
from typing import Any

from . import internals
from .choice_state import state_of


def candidate_id(choice: Any) -> str:
    """What the DB stores for a candidate: Inductor's ``hash_key()``, stable across
    processes (Triton: template name plus source/config hash; ATen: op name, kwargs and
    the op's code hash; FlyDSL: template source hash plus config)."""
    try:
        key = choice.hash_key()
    except Exception:  # a backend without hash_key: fall back to its name
        key = None
    return str(key) if key else str(choice.name)


def backend_of(choice: Any) -> str:
    plugin = state_of(choice)
    if plugin is not None:
        return plugin.backend
    inner = getattr(choice, "_wrapped", choice)  # DataProcessorChoiceCallerWrapper
    if isinstance(inner, internals.ExternKernelCaller):
        return "aten"
    if isinstance(inner, internals.TritonTemplateCaller):
        return "triton"
    try:
        info = choice.info_dict()
    except Exception:
        info = {}
    backend = str(info.get("backend", "")).lower() if isinstance(info, dict) else ""
    return backend or type(inner).__name__


def _jsonable(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int | bool) or value is None


def config_of(choice: Any) -> dict[str, Any]:
    """The JSON-safe part of ``info_dict()`` (tile sizes, stages, ...)."""
    plugin = state_of(choice)
    if plugin is not None:
        return dict(plugin.config)
    try:
        info = choice.info_dict()
    except Exception:
        return {}
    if not isinstance(info, dict):
        return {}
    return {str(k): v for k, v in info.items() if _jsonable(v)}
