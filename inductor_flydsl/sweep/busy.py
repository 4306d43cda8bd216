"""Before each sweep item: is the machine busy, and what to do about it (``--on-busy``).

The runner watches the machine for ``PROBE_S`` seconds (``noise.probe_machine``), leaving
out its own workers' process sessions. When other processes use more than
``INDUCTOR_FLYDSL_BUSY_CPU`` of the CPUs, or hold the GPU, the item is not started at once:

- ``wait``: check again every ``CHECK_EVERY_S`` until the machine is quiet;
- ``backoff``: put the item at the back of the queue and check again after a delay that
  doubles each time (``CHECK_EVERY_S`` up to ``MAX_BACKOFF_S``);
- ``record``: run it now; its selection is recorded low-confidence (the worker gets the
  reason through ``INDUCTOR_FLYDSL_BUSY_NOTE``).

With ``wait`` and ``backoff`` an item still busy after ``max_wait_s`` runs anyway, as with
``record``: a sweep always ends, and its noisy rows say so. ``INDUCTOR_FLYDSL_ON_BUSY``
sets the default policy (``wait`` otherwise).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import settings
from ..provenance.noise import probe_machine

POLICIES = settings.ON_BUSY_POLICIES
PROBE_S = 1.0
CHECK_EVERY_S = 5.0
MAX_BACKOFF_S = 120.0
RUN, HOLD, DEFER = "run", "hold", "defer"


def default_policy() -> str:
    return settings.ON_BUSY.value()


@dataclass
class _ItemState:
    first_busy: float
    attempts: int = 0
    next_check: float = 0.0


@dataclass(frozen=True)
class BusyWait:
    """An item held back because the machine is busy: what it waits for, since when."""

    item_id: str
    policy: str  # "wait" or "backoff"
    reason: str  # why the machine counts as busy
    waited_s: float  # so far, for this item
    max_wait_s: float  # after this the item runs anyway, recorded low-confidence
    next_check_s: float  # seconds until the machine is checked again


@dataclass
class BusyGate:
    policy: str = "wait"
    max_wait_s: float = 600.0
    probe_s: float = PROBE_S
    check_every_s: float = CHECK_EVERY_S
    waited_s: float = 0.0  # total time items spent held back
    # told after each busy check that holds an item back, and with None when the item
    # it held starts (a live status line: the sweep never waits in silence)
    on_wait: Callable[[BusyWait | None], None] | None = None
    _items: dict[str, _ItemState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"--on-busy {self.policy!r}: use one of {', '.join(POLICIES)}")

    def check(self, item_id: str, exclude_sessions: set[int]) -> tuple[str, str]:
        """(RUN, note) to start the item now (note: why it is noisy, or ""), HOLD to keep
        it first in line, DEFER to move it to the back of the queue."""
        now = time.monotonic()
        state = self._items.get(item_id)
        if state is not None and now < state.next_check:
            return (HOLD if self.policy == "wait" else DEFER), ""
        load = probe_machine(self.probe_s, exclude_sessions=exclude_sessions)
        reasons = load.busy_reasons
        if not reasons:
            self._release(item_id, now)
            return RUN, ""
        reason = "; ".join(reasons)
        if state is None:
            state = self._items[item_id] = _ItemState(first_busy=now)
        waited = now - state.first_busy
        if self.policy == "record" or waited >= self.max_wait_s:
            self._release(item_id, now)
            prefix = "machine busy" if self.policy == "record" else (
                f"machine still busy after {waited:.0f} s")
            return RUN, f"{prefix} before the item: {reason}"
        state.attempts += 1
        delay = self.check_every_s if self.policy == "wait" else min(
            self.check_every_s * 2 ** (state.attempts - 1), MAX_BACKOFF_S)
        state.next_check = now + delay
        if self.on_wait is not None:
            self.on_wait(BusyWait(item_id, self.policy, reason, waited, self.max_wait_s,
                                  delay))
        return (HOLD if self.policy == "wait" else DEFER), ""

    def _release(self, item_id: str, now: float) -> None:
        state = self._items.pop(item_id, None)
        if state is not None:
            self.waited_s += now - state.first_busy
            if self.on_wait is not None and not self._items:
                self.on_wait(None)
