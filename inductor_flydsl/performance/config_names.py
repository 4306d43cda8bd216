"""How a template config is matched and shown across the model, the DBs and the CLI."""

from __future__ import annotations

from typing import Any

from ..problems.keys import canonical_json


def config_key(config: dict[str, Any]) -> str:
    """A config's identity for matching: its fields, sorted, without the template hash
    (a changed template's build of the same config is the same config)."""
    return canonical_json({k: v for k, v in config.items() if k != "template_hash"})


def config_label(config: dict[str, Any], fallback: str = "") -> str:
    """``t64x128x64 w2x2 s2 g8`` (``sk4`` with split-K, ``sk4 rl`` when the partials are
    reduced inside the launch, ``reduce_in_launch``; ``fallback`` when fields are
    missing)."""
    try:
        label = (f"t{config['tile_m']}x{config['tile_n']}x{config['tile_k']} "
                 f"w{config['waves_m']}x{config['waves_n']} s{config['stages']} "
                 f"g{config['group_m']}")
    except (KeyError, TypeError):
        return fallback or str(config)
    split = config.get("split_k", 1)
    if not split or split <= 1:
        return label
    return label + f" sk{split}" + (" rl" if config.get("reduce_in_launch") else "")
