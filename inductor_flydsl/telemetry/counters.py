"""Per-process counters of what the plugin did."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field

from .stats_view import StatsSnapshot


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
    # hints) was served: nothing benchmarked
    dynamic_hits: int = 0
    bucket_hits: int = 0  # the winner of M's dynamic-M bucket was used (also a miss)
    # no exact winner (a miss); the nearest older record's short list was benchmarked
    prior_hits: int = 0
    misses: int = 0  # no DB winner for the problem
    # an exact record served some candidates; the ones it lacks were benchmarked
    partial_hits: int = 0
    stale: int = 0  # an exact record holds none of the current candidates: autotuning
    # a served compile whose scheduler ran another kernel or fusion for an epilogue than
    # the one recorded (should stay 0: served timings reproduce Inductor's decision)
    epilogue_changed: int = 0
    # deferred epilogue-fusion decisions (GPU, ``MultiTemplateBuffer``) made from recorded
    # timings: nothing compiled or benchmarked for them (``inductor/fusion/fusion_replay.py``)
    fusions_replayed: int = 0
    # such decisions Inductor benchmarked (no record yet), recorded for the next compile
    fusions_benchmarked: int = 0
    # GEMM + epilogue regions the graph pass turned into a fused-epilogue selection
    epilogue_fusions: int = 0
    recorded: int = 0  # autotune selections written to the DB
    benchmarked: int = 0  # autotune selections Inductor benchmarked
    errors: int = 0  # plugin errors swallowed so the compile went on
    # FlyDSL kernel calls from a compiled graph that failed at run time (build, load,
    # launch) and were computed with ATen instead (flydsl_backend/run/ops.py)
    runtime_fallbacks: int = 0
    # autotune calls whose problem is outside the definition of a valid problem: not looked
    # up, not recorded; reasons in ``refusals`` and in the DB's misses table
    refused: int = 0
    decisions: list[Decision] = field(default_factory=list)
    refusals: list[dict[str, str]] = field(default_factory=list)  # {"op", "reason"}
    # what the scheduler ran per selected GEMM: problem, epilogue ops, fused, kernel,
    # served, record ("new", "same", "changed", None: not written)
    epilogues: list[dict[str, object]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)

    def add_decision(self, decision: Decision) -> None:
        with self._lock:
            self.decisions.append(decision)

    def add_epilogue(self, entry: dict[str, object]) -> None:
        with self._lock:
            self.epilogues.append(entry)

    def add_refusal(self, op: str, reason: str) -> None:
        with self._lock:
            self.refused += 1
            self.refusals.append({"op": op, "reason": reason})

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            return StatsSnapshot({
                "hits": self.hits, "dynamic_hits": self.dynamic_hits,
                "bucket_hits": self.bucket_hits, "prior_hits": self.prior_hits,
                "misses": self.misses, "partial_hits": self.partial_hits,
                "stale": self.stale, "epilogue_changed": self.epilogue_changed,
                "fusions_replayed": self.fusions_replayed,
                "fusions_benchmarked": self.fusions_benchmarked,
                "epilogue_fusions": self.epilogue_fusions,
                "recorded": self.recorded, "benchmarked": self.benchmarked,
                "errors": self.errors, "runtime_fallbacks": self.runtime_fallbacks,
                "refused": self.refused,
                "refusals": [dict(r) for r in self.refusals],
                "decisions": [asdict(d) for d in self.decisions],
                "epilogues": [dict(e) for e in self.epilogues],
            })


PROCESS_STATS = Stats()
