"""Stable identity, backend and config of an Inductor ``ChoiceCaller``."""

from __future__ import annotations

import math
from typing import Any

from ...problems.keys import canonical_json
from ..adapter import internals
from ..adapter.choice_state import state_of

# what a plugin candidate timed by graph replay adds to its hash_key() (timing_parity.py)
GRAPH_TIMING_SUFFIX = "-timing=graph"


def candidate_id(choice: Any) -> str:
    """What the DB stores for a candidate: Inductor's ``hash_key()``, stable across
    processes (Triton: template name plus source/config hash; ATen: op name, kwargs and
    the op's code hash; FlyDSL: template source hash plus config, without the timing mode
    its hash_key() carries for Inductor's own cache: the problem key holds that)."""
    try:
        key = choice.hash_key()
    except Exception:  # a backend without hash_key: fall back to its name
        key = None
    key = str(key).removesuffix(GRAPH_TIMING_SUFFIX) if key else str(choice.name)
    patches = _config_patches(choice)
    # A subgraph's hash_key() names its graph only; the Inductor settings it is compiled
    # with (max-autotune, its backends, ...) change its time just as much.
    return f"{key}|config_patches={canonical_json(patches)}" if patches else key


def _config_patches(choice: Any) -> dict[str, Any]:
    patches = getattr(choice, "config_patches", None)
    if not isinstance(patches, dict):
        return {}
    return {str(k): v if _jsonable(v) else repr(v) for k, v in sorted(patches.items())}


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
    config = {str(k): v for k, v in info.items() if _jsonable(v)}
    patches = _config_patches(choice)
    if patches:
        config["config_patches"] = patches
    return config
