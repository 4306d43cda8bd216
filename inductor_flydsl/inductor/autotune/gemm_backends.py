"""Inductor's ``max_autotune_gemm_backends`` (``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS``)
as the plugin reads it: a comma-separated list of backend names, any case, where
``FLYDSL`` asks for the plugin's kernels."""

from __future__ import annotations

from ..adapter import internals

FLYDSL = "FLYDSL"


def _setting(value: object | None) -> str:
    return str(internals.config.max_autotune_gemm_backends if value is None else value)


def backend_tokens(value: object | None = None) -> list[str]:
    """The backends asked for, upper case, in order (``value``: the setting's text; None:
    Inductor's config now)."""
    return [t.strip().upper() for t in _setting(value).split(",") if t.strip()]


def flydsl_requested(value: object | None = None) -> bool:
    """Whether ``FLYDSL`` is among the backends asked for."""
    return FLYDSL in backend_tokens(value)


def without_flydsl(value: object | None = None) -> str:
    """The setting with ``FLYDSL`` left out (``ATEN`` when nothing else is left): what
    Inductor's own competitor of a FlyDSL choice compiles with."""
    kept = [t.strip() for t in _setting(value).split(",")
            if t.strip() and t.strip().upper() != FLYDSL]
    return ",".join(kept) or "ATEN"
