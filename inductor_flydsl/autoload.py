"""Entry point of the ``torch.backends`` group: runs at ``import torch`` in every process
where the package is installed (unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``).

It registers the plugin's custom ops, so a graph compiled with FlyDSL candidates and
loaded from Inductor's FX cache always finds them, and enables the plugin when
``INDUCTOR_FLYDSL=1``. It must never make ``import torch`` fail: errors become a warning.

It never enables the plugin in the fork server of the plugin's own build workers (which
imports torch to preload it, and whose forks build kernels): enabling there would start
another build pool with its own fork server, which would import torch again, without end.
"""

from __future__ import annotations

import sys
import warnings

_BUILD_SERVER_MARK = "inductor_flydsl.flydsl_backend.prebuild"  # in prebuild.PRELOAD


def in_build_fork_server() -> bool:
    """Whether this ``import torch`` runs in the preload of the build pool's fork server
    (multiprocessing's forkserver ``main``, preloading ``prebuild.PRELOAD``)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith("forkserver.py"):
            preload = frame.f_locals.get("preload")
            return isinstance(preload, list | tuple) and _BUILD_SERVER_MARK in preload
        frame = frame.f_back
    return False


def load() -> None:
    try:
        from .flydsl_backend import ops  # noqa: F401  (registers torch.ops.inductor_flydsl)
        from .settings import enabled_by_env

        if enabled_by_env() and not in_build_fork_server():
            import inductor_flydsl

            if inductor_flydsl.active_settings() is None:
                inductor_flydsl.enable()
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_flydsl autoload failed: {exc}", stacklevel=2)
