"""Per-process counters of what the plugin did."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field


@dataclass
class Decision:
    problem: str  # problem summary
    problem_id: str
    candidate_id: str
    backend: str
    # "db:<path>", "db-bucket:M=<m>:<path>", "prior:<path>" (a short list benchmarked)
    # or "autotune"
    source: str


@dataclass
class Stats:
    hits: int = 0  # a DB winner was handed to Inductor: nothing benchmarked
    # a dynamic-shape problem's own recorded winner (keyed by its symbolic dims and
    # bucketed hints) was handed to Inductor: nothing benchmarked
    dynamic_hits: int = 0
    bucket_hits: int = 0  # the winner of M's dynamic-M bucket was used (also a miss)
    # no exact winner (a miss); the nearest older record's short list was benchmarked
    prior_hits: int = 0
    misses: int = 0  # no DB winner for the problem
    stale: int = 0  # DB winner not among the current candidates: normal autotuning
    recorded: int = 0  # autotune selections written to the DB
    benchmarked: int = 0  # autotune selections Inductor benchmarked
    errors: int = 0  # plugin errors swallowed so the compile went on
    # autotune calls whose problem is outside the definition of a valid problem: not looked
    # up, not recorded; reasons in ``refusals`` and in the DB's misses table
    refused: int = 0
    decisions: list[Decision] = field(default_factory=list)
    refusals: list[dict[str, str]] = field(default_factory=list)  # {"op", "reason"}
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)

    def add_decision(self, decision: Decision) -> None:
        with self._lock:
            self.decisions.append(decision)

    def add_refusal(self, op: str, reason: str) -> None:
        with self._lock:
            self.refused += 1
            self.refusals.append({"op": op, "reason": reason})

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {
                "hits": self.hits, "dynamic_hits": self.dynamic_hits,
                "bucket_hits": self.bucket_hits, "prior_hits": self.prior_hits,
                "misses": self.misses,
                "stale": self.stale,
                "recorded": self.recorded, "benchmarked": self.benchmarked,
                "errors": self.errors, "refused": self.refused,
                "refusals": [dict(r) for r in self.refusals],
                "decisions": [asdict(d) for d in self.decisions],
            }


PROCESS_STATS = Stats()
