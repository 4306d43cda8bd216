"""Entry point of the ``torch.backends`` group: runs at ``import torch`` in every process
where the package is installed (unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``).

It registers the plugin's custom ops, so a graph compiled with FlyDSL candidates and
loaded from Inductor's FX cache always finds them, and enables the plugin when
``INDUCTOR_FLYDSL=1``. It must never make ``import torch`` fail: errors become a warning.

It never enables the plugin in the fork server of the plugin's own build workers
(``settings.enabled_by_env``).
"""

from __future__ import annotations

import warnings


def load() -> None:
    try:
        from .flydsl_backend import ops  # noqa: F401  (registers torch.ops.inductor_flydsl)
        from .settings import enabled_by_env

        if enabled_by_env():
            import inductor_flydsl

            if inductor_flydsl.active_settings() is None:
                inductor_flydsl.enable()
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_flydsl autoload failed: {exc}", stacklevel=2)
