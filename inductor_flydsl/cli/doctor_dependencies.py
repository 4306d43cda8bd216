"""``doctor``'s report on the packages inductor-flydsl requires (``dependencies.py``), and
the command line where one of them is missing (``pip install --no-deps``): the other
commands, and the rest of ``doctor``, import them, so ``main`` falls back to this module,
which imports only the standard library: ``doctor`` lists every missing package with the
fix and exits 1; any other command names them and exits 2. Never a traceback."""

from __future__ import annotations

import importlib.metadata
import sys
from dataclasses import dataclass

from ..dependencies import REQUIRED, Requirement, explain, missing, missing_text
from ..version import __version__

TITLE = "Dependencies (the packages inductor-flydsl requires)"
EXIT_PROBLEMS, EXIT_USAGE = 1, 2


@dataclass(frozen=True)
class DependencyState:
    label: str  # the package's name for pip
    value: str
    problem: str | None


def _version(requirement: Requirement) -> str:
    try:
        return importlib.metadata.version(requirement.package)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def dependency_states() -> list[DependencyState]:
    """Each required package of this platform: its version, or why it is missing and the
    fix (a problem)."""
    absent = dict(missing())
    states = []
    for requirement in REQUIRED:
        if not requirement.applies():
            states.append(DependencyState(requirement.package, "not needed on this platform",
                                          None))
        elif requirement in absent:
            states.append(DependencyState(
                requirement.package, f"missing ({absent[requirement]}): {requirement.fix}",
                missing_text(requirement, absent[requirement])))
        else:
            states.append(DependencyState(requirement.package, _version(requirement), None))
    return states


def run_without_dependencies(argv: list[str], failure: ImportError) -> int:
    """What ``inductor-flydsl ARGV`` does when a command's import failed (``failure``) on
    a missing required package."""
    if "--version" in argv:
        print(f"inductor-flydsl {__version__}")
        return 0
    states = dependency_states()
    problems = [s.problem for s in states if s.problem] or [explain(failure) or str(failure)]
    command = next((a for a in argv if not a.startswith("-")), None)
    if command != "doctor":
        for problem in problems:
            print(f"inductor-flydsl: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    print(TITLE)
    width = max(len(s.label) for s in states)
    for state in states:
        mark = "  ! " if state.problem else "    "
        print(f"{mark}{state.label.ljust(width)}  {state.value}")
    print()
    print("The other checks need these packages; install them and run doctor again.")
    print(f"{len(problems)} problem(s) (marked !):")
    for problem in problems:
        print(f"  - {problem}")
    return EXIT_PROBLEMS
