"""What an enabled plugin holds (its DBs, counters and choice providers), which one is
active, and how a hook reports its own failure (counted, warned once, never raised)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...db.layered import LayeredTuningDB
from ...provenance.device import describe_device
from ...telemetry.counters import PROCESS_STATS
from ...telemetry.user_warnings import warn_once

if TYPE_CHECKING:  # the interface the providers have (autotune/choice_provider.py)
    from ..autotune.choice_provider import ChoiceProvider

log = logging.getLogger("inductor_flydsl")


class PluginState:
    """What an enabled plugin holds: its DBs, counters and choice providers."""

    def __init__(self, tuning_db: LayeredTuningDB) -> None:
        self.tuning_db = tuning_db
        self.stats = PROCESS_STATS
        self.providers: list[ChoiceProvider] = []


_state: PluginState | None = None


def current() -> PluginState | None:
    """The active plugin's state; None while the plugin is off."""
    return _state


def activate(state: PluginState | None) -> PluginState | None:
    """Make ``state`` the active one (None: off); returns the one it replaces."""
    global _state
    previous, _state = _state, state
    return previous


def report_error(where: str, exc: BaseException) -> None:
    """A hook failed: count it, warn once, and let Inductor go on with its own choices."""
    state = _state
    if state is not None:
        state.stats.bump("errors")
    warn_once(f"hook:{where}:{type(exc).__name__}",
              f"inductor_flydsl: {where} failed ({type(exc).__name__}: {exc}); "
              "continuing with Inductor's own choices")
    log.debug("inductor_flydsl %s failed", where, exc_info=exc)


def device_of(layout: Any) -> Any:
    """The DB's description of a selection's device."""
    return describe_device(layout.device)
