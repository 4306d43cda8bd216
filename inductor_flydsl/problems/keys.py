"""Stable identifiers: the same content gives the same id in every process and machine."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal values serialize identically."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def stable_id(value: Any, length: int = 16) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]
