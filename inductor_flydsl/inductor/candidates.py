"""Stable identity, backend and config of an Inductor ``ChoiceCaller``."""

from __future__ import annotations

import math
from typing import Any

BACKEND_ATTR = "inductor_flydsl_backend"  # plugin choices set this on themselves


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
    plugin_backend = getattr(choice, BACKEND_ATTR, None)
    if plugin_backend:
        return str(plugin_backend)
    from torch._inductor.select_algorithm import ExternKernelCaller, TritonTemplateCaller

    inner = getattr(choice, "_wrapped", choice)  # DataProcessorChoiceCallerWrapper
    if isinstance(inner, ExternKernelCaller):
        return "aten"
    if isinstance(inner, TritonTemplateCaller):
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
    plugin_config = getattr(choice, "inductor_flydsl_config", None)
    if isinstance(plugin_config, dict):
        return dict(plugin_config)
    try:
        info = choice.info_dict()
    except Exception:
        return {}
    if not isinstance(info, dict):
        return {}
    return {str(k): v for k, v in info.items() if _jsonable(v)}
