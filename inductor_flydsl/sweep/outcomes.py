"""What the sweep's runners share: item statuses, worker slots, the worker identity,
outcomes and the summary, and the helpers both the per-item runner (``runner.py``) and
the persistent pool (``persistent.py``) use to read a worker's result."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .items import SweepItem

DONE, FAILED, SKIPPED, INTERRUPTED = "done", "failed", "skipped", "interrupted"
POLL_S = 0.2
ERROR_TAIL = 3000



@dataclass(frozen=True)
class Slot:
    """One place a worker runs: the CPU, or one GPU made the worker's only visible one."""

    name: str  # "cpu" or the GPU index as the runner sees it
    device: str  # the worker's --device: "cpu" or "cuda"
    env: tuple[tuple[str, str | None], ...] = ()  # overrides; None removes the variable

    def environ(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        for key, value in self.env:
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env


@dataclass(frozen=True)
class Identity:
    """The device and software rows the sweep's results are keyed by."""

    device: dict[str, Any]
    software: dict[str, Any]
    kind: str  # cpu, cuda, rocm

    @property
    def device_id(self) -> str:
        return str(self.device["id"])

    @property
    def software_id(self) -> str:
        return str(self.software["id"])


@dataclass
class ItemOutcome:
    item: SweepItem
    status: str
    error: str = ""
    seconds: float = 0.0
    problem_ids: list[str] = field(default_factory=list)
    source: str = ""  # "autotune", "db" (winner reused) or ""
    slot: str = ""
    busy: str = ""  # why the machine was found busy before the item (it ran anyway)
    problems: list[str] = field(default_factory=list)  # as the DB names them (summaries)


@dataclass
class SweepSummary:
    db: str
    device: dict[str, Any]
    software: dict[str, Any]
    shard: str | None
    items_total: int = 0  # after sharding
    resumed_skip: int = 0  # finished earlier (resume)
    outcomes: list[ItemOutcome] = field(default_factory=list)
    not_started: int = 0  # left when the budget ran out or a signal stopped the sweep
    stopped: str | None = None  # "budget", "SIGINT", "SIGTERM"
    wall_s: float = 0.0
    wins_by_backend: dict[str, int] = field(default_factory=dict)
    low_confidence: list[str] = field(default_factory=list)  # problem ids, winners "low"
    busy_waited_s: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def problems_tuned(self) -> int:
        return len({p for o in self.outcomes if o.status == DONE for p in o.problem_ids})

    @property
    def problems_per_minute(self) -> float:
        return self.problems_tuned / (self.wall_s / 60) if self.wall_s > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "db": self.db, "device": self.device, "software": self.software,
            "shard": self.shard, "items_total": self.items_total,
            "already_finished": self.resumed_skip, "run": len(self.outcomes),
            "done": self.count(DONE), "failed": self.count(FAILED),
            "skipped": self.count(SKIPPED), "interrupted": self.count(INTERRUPTED),
            "not_started": self.not_started, "stopped": self.stopped,
            "reused_from_db": sum(1 for o in self.outcomes if o.status == DONE
                                  and o.source == "db"),
            "problems_tuned": self.problems_tuned, "wins_by_backend": self.wins_by_backend,
            "low_confidence_winners": len(self.low_confidence),
            "ran_on_busy_machine": sum(1 for o in self.outcomes if o.busy),
            "busy_waited_s": round(self.busy_waited_s, 1),
            "wall_s": round(self.wall_s, 2),
            "problems_per_minute": round(self.problems_per_minute, 3),
            "items": [{"item_id": o.item.item_id, "item": o.item.summary(),
                       "status": o.status, "seconds": round(o.seconds, 2),
                       "source": o.source, "problem_ids": o.problem_ids,
                       "error": o.error[-500:], "slot": o.slot, "busy": o.busy}
                      for o in self.outcomes],
        }


def _describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"worker killed by {name} (exit {128 - rc})"
    return f"worker exited with status {rc}"


def file_tail(path: Path, limit: int = ERROR_TAIL, start: int = 0) -> str:
    """The last ``limit`` bytes of ``path`` written after byte ``start``, as text."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace").strip()


def outcome_of(item: SweepItem, result: dict[str, Any] | None, *, seconds: float, slot: str,
               busy: str, rc: int | None, timed_out: float | None, stderr_tail: str,
               identity: Identity) -> ItemOutcome:
    """An item's outcome from its worker's result line (None: none came) or timeout."""
    out = ItemOutcome(item=item, status=FAILED, seconds=seconds, slot=slot, busy=busy)
    if timed_out is not None:
        out.error = f"timed out after {timed_out:g} s (worker killed)\n{stderr_tail}"
        return out
    if result is None:
        out.error = f"{_describe_exit(rc or 0)}; no result line\n{stderr_tail}"
        return out
    status = str(result.get("status"))
    out.problem_ids = [str(p) for p in result.get("problem_ids") or []]
    out.source = str(result.get("source") or "")
    out.problems = [str(p) for p in result.get("problems") or []]
    device_id = (result.get("device") or {}).get("id")
    if device_id and device_id != identity.device_id:
        out.error = (f"worker saw device {device_id}, the sweep is keyed by "
                     f"{identity.device_id}; results were recorded under the worker's id")
        return out
    if status in (DONE, SKIPPED):
        out.status = status
        out.error = str(result.get("reason") or "")
    else:
        detail = result.get("traceback") or stderr_tail
        out.error = f"{result.get('reason') or _describe_exit(rc or 0)}\n{detail}"
    return out


@contextmanager
def stop_on_signals(runner: Any, enabled: bool = True) -> Iterator[None]:
    """While inside: SIGINT/SIGTERM set ``runner.stop_signal`` and the loop then stops
    cleanly (only when ``enabled``, and only in the main thread)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        runner.stop_signal = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
