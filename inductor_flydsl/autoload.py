"""Entry point of the ``torch.backends`` group: runs at ``import torch`` in every process
where the package is installed (unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``).

It imports the package, which registers the plugin's custom ops (so a graph compiled with
FlyDSL candidates and loaded from Inductor's FX cache always finds them) and enables the
plugin when ``INDUCTOR_FLYDSL=1`` (``inductor_flydsl.enable_from_env``: any failure there
is one warning, and the plugin stays off). It must never make ``import torch`` fail.

When ``import inductor_flydsl`` came first, torch is imported while the package is half
imported: importing it again here returns it unfinished, and the package's own import
enables the plugin when it finishes (once: this entry point does not call it again).

It never enables the plugin in the plugin's own build server (started with
``INDUCTOR_FLYDSL=0``: ``flydsl_backend/builds/build_client.py``).
"""

from __future__ import annotations

import warnings


def load() -> None:
    try:
        import inductor_flydsl  # noqa: F401  (ops registered, INDUCTOR_FLYDSL=1 honoured)
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_flydsl stays off: {_why(exc)}", stacklevel=2)


def _why(exc: Exception) -> str:
    """A package the plugin needs is missing: the package's import named it and the fix
    (``dependencies.py``, ``torch_range.MISSING_TORCH``); else part of this package is."""
    missing = getattr(exc, "name", None) or ""
    if isinstance(exc, ModuleNotFoundError) and missing and \
            not missing.startswith("inductor_flydsl") and "pip install" in str(exc):
        return str(exc)
    return (f"importing it failed: {exc}; reinstall it: pip install --force-reinstall "
            "--no-deps inductor-flydsl")
