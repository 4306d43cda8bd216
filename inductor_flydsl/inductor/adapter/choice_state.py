"""What the plugin keeps on a choice it adds: one typed object, ``choice.inductor_flydsl``.

Inductor's ``ChoiceCaller`` has no slot for a backend's own state, so a plugin choice (a
FlyDSL candidate) carries a :class:`PluginChoiceState` under a single attribute; the hooks
read it through :func:`state_of`, which also looks inside Inductor's wrappers
(``DataProcessorChoiceCallerWrapper._wrapped``). A choice without one is Inductor's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

ATTR = "inductor_flydsl"


class PendingBuild(Protocol):
    """A candidate's parallel build (``flydsl_backend/builds/prebuild.Build``)."""

    status: str

    def wait(self) -> Any: ...


@dataclass
class PluginChoiceState:
    backend: str  # the DB's backend name ("flydsl")
    config: dict[str, Any]  # JSON-safe: the candidate's config as the DB stores it
    # (status, error) once it failed to build, launch or validate: recorded as such
    failure: tuple[str, str] | None = None
    # its parallel build, once started: benchmarking waits for it
    build: PendingBuild | None = None
    # starts the builds of the provider's candidates the tuning DB leaves for Inductor to
    # run (called once per provider with those candidates, lookup._prepare)
    prepare: Callable[[Sequence[Any]], None] | None = None
    # top-k preselection (performance/ranking.py): True if the model ranks it among the
    # configs to benchmark, False if not (benchmarked only when a record serves it),
    # None when no preselection applies (lookup.preselected)
    preselected: bool | None = None
    # its kwargs are the op's own scalar arguments (vLLM's op): the problem key reads
    # them as it reads an ATen choice's (ir_problem._aten_kwargs)
    keyed_kwargs: bool = False


def state_of(choice: Any) -> PluginChoiceState | None:
    """The plugin state of ``choice`` (or of the choice it wraps); None: Inductor's own."""
    for candidate in (choice, getattr(choice, "_wrapped", None)):
        state = getattr(candidate, ATTR, None) if candidate is not None else None
        if isinstance(state, PluginChoiceState):
            return state
    return None
