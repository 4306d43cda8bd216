"""The torch releases the plugin supports, checked at run time (the package declares no
torch requirement, so pip never replaces a user's ROCm, CUDA, CPU or nightly build:
docs/decisions.md). :func:`version_problem` is what ``enable()`` (the plugin stays off,
one warning) and ``internals_check.problems()`` (so ``inductor-flydsl doctor``) say about any
other torch; :data:`MISSING_TORCH` is what ``import inductor_flydsl`` says without one."""

from __future__ import annotations

import re

# (major, minor) of each supported release; CI tests 2.13.0 and 2.14.1
SUPPORTED: tuple[tuple[int, int], ...] = ((2, 13), (2, 14))
SUPPORTED_TEXT = " or ".join(f"{major}.{minor}" for major, minor in SUPPORTED)
INSTALL_TORCH = ("pip install 'torch>=2.13,<2.15' --index-url "
                 "https://download.pytorch.org/whl/<cpu, cu1xx or rocmX.Y>, as pytorch.org "
                 "says for your machine")
MISSING_TORCH = (f"inductor-flydsl needs torch {SUPPORTED_TEXT}: install it first "
                 f"({INSTALL_TORCH}); pip does not install torch for this package")


def release(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a torch version string (``2.14.1+rocm7.1``,
    ``2.15.0.dev20260301+cpu``, ``2.13.0a0+git1234``), or None when it has none."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def version_problem(version: str) -> str | None:
    """None for a supported torch; else one line naming the version, the supported
    releases and the fix."""
    if release(version) in SUPPORTED:
        return None
    nightly = "; a nightly of a later release is not" if ".dev" in version else ""
    return (f"torch {version} is not supported by inductor-flydsl (torch {SUPPORTED_TEXT} "
            f"is{nightly}): install a supported torch ({INSTALL_TORCH})")
