"""The packages inductor-flydsl requires (``pyproject.toml``'s dependencies other than
torch, which ``inductor/adapter/torch_range.py`` covers), by the module each provides, and what to
say when one is missing: ``pip install --no-deps inductor-flydsl`` installs none of them.

This module imports nothing but the standard library, so the package can name a missing
package (and the fix) where that package's absence makes every other import fail.
"""

from __future__ import annotations

import importlib
import platform
import re
from dataclasses import dataclass

REINSTALL = "or reinstall inductor-flydsl with its dependencies (pip install without --no-deps)"


@dataclass(frozen=True)
class Requirement:
    module: str  # what the code imports
    package: str  # what pip installs: `pip install <spec>`
    spec: str
    use: str  # what the package does for the plugin
    compile: bool  # a compile with the plugin on imports it (else: some commands only)
    linux_x86_64_only: bool = False

    def applies(self) -> bool:
        """Whether this platform gets it (pyproject's environment markers)."""
        if not self.linux_x86_64_only:
            return True
        return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")

    @property
    def fix(self) -> str:
        return f"pip install {self.spec}, {REINSTALL}"


REQUIRED: tuple[Requirement, ...] = (
    Requirement("sqlite_utils", "sqlite-utils", "'sqlite-utils>=4.2'", "the tuning DB", True),
    Requirement("rich", "rich", "'rich>=13'", "the command line's output", False),
    Requirement("yaml", "pyyaml", "'pyyaml>=6'", "reading compiled kernels' metadata", True),
    Requirement("numpy", "numpy", "'numpy>=2'", "the emulator and the performance model",
                True),
    Requirement("sympy", "sympy", "'sympy>=1.13.3'", "Inductor's symbolic sizes", True),
    Requirement("flydsl", "flydsl", "'flydsl>=0.5,<0.6'", "building the FlyDSL kernels",
                False, linux_x86_64_only=True),
)
_BY_MODULE = {r.module: r for r in REQUIRED}
_NO_MODULE = re.compile(r"No module named '([^']+)'")


def requirement_of(exc: BaseException) -> Requirement | None:
    """The required package whose absence ``exc`` (an ImportError) reports, else None."""
    if not isinstance(exc, ImportError):
        return None
    name = exc.name or ""
    if not name:
        match = _NO_MODULE.search(str(exc))
        name = match.group(1) if match else ""
    return _BY_MODULE.get(name.split(".")[0])


def missing_text(requirement: Requirement, error: str) -> str:
    """One line: what is missing, what for, and the fix."""
    return (f"{requirement.package} is not installed ({error}), and inductor-flydsl needs "
            f"it for {requirement.use}: {requirement.fix}")


def explain(exc: BaseException) -> str | None:
    """:func:`missing_text` for an ImportError of a required package, else None."""
    requirement = requirement_of(exc)
    return None if requirement is None else missing_text(requirement, str(exc))


def missing(*, compile_only: bool = False) -> list[tuple[Requirement, str]]:
    """Every required package of this platform that does not import, with its error
    (``compile_only``: those a compile with the plugin on imports)."""
    found = []
    for requirement in REQUIRED:
        if not requirement.applies() or (compile_only and not requirement.compile):
            continue
        try:
            importlib.import_module(requirement.module)
        except ImportError as exc:
            found.append((requirement, str(exc)))
    return found
