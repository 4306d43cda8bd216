"""Child process of test_fusion_replay_cpu.py: Inductor's deferred epilogue-fusion
decision (``Scheduler.speedup_by_fusion`` on a ``MultiTemplateBuffer``) replayed from a
recorded fusion benchmark, on this CPU through Triton's interpreter
(``triton_interpreter.py``).

1. ``relu(a @ b) * 2`` compiled with max-autotune and ``benchmark_epilogue_fusion`` off:
   the GEMM's candidates (ATen, Triton templates run by the interpreter) are benchmarked
   and recorded, and the epilogue observer records the epilogue's exact identity.
2. A fusion benchmark for that GEMM and epilogue is written to the DB as the plugin
   records one (``fusion_replay.decision_of``), with the fused template's time chosen by
   the test (``--fused-ms``) and the epilogue kernel's (``--epilogue-ms``).
3. The same function compiled again in a fresh Inductor cache with
   ``benchmark_epilogue_fusion`` on (Inductor's default): the GEMM's timings are served,
   the selection deferred, and the scheduler's fusion decision must come from the record:
   Inductor's fusion benchmark methods are counted (they call through), and must not run.

With ``--cycle cold|warm`` instead: nothing is written by the test. The function is
compiled with Inductor's default settings, its fusion benchmark timing the interpreted
modules on the CPU (``triton_interpreter.benchmark_generated_modules``); the cold process
lets Inductor benchmark the decision and the plugin record it, the warm one (a fresh
Inductor cache, the same DB) must replay it. ``--steer extern-slower`` makes the ATen
choice 1e6 times slower in Inductor's ``lookup`` (how upstream's tests steer), so a
Triton template is compiled fused and benchmarked against the unfused pair.

Prints ``RESULT <json>``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from pathlib import Path
from unittest.mock import patch

import sqlite_utils
import torch
import torch._inductor.config as inductor_config
from torch._inductor import scheduler as inductor_scheduler
from torch._inductor import select_algorithm
from torch._inductor.utils import fresh_cache, run_and_get_code

import inductor_flydsl
from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.inductor.fusion import fusion_replay
from inductor_flydsl.problems.problem import Problem
from inductor_flydsl.provenance.device import describe_device
from inductor_flydsl.provenance.software import current_software

# the stand-in Triton driver for the interpreter (a sibling file; this runs as a script)
sys.path.insert(0, str(Path(__file__).parent))
triton_interpreter = importlib.import_module("triton_interpreter")


def model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(a @ b) * 2


CALLS = {"compile_kernel": 0, "benchmark_fused_nodes": 0, "benchmark_codegened_module": 0}


def _count(name: str) -> None:
    inner = getattr(inductor_scheduler.Scheduler, name)

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        CALLS[name] += 1
        return inner(self, *args, **kwargs)

    setattr(inductor_scheduler.Scheduler, name, counted)


def _compile(a: torch.Tensor, b: torch.Tensor, *, benchmark_epilogue: bool):
    torch._dynamo.reset()
    with fresh_cache(), inductor_config.patch(
            cpu_backend="triton", max_autotune=True,
            max_autotune_gemm_backends="TRITON,ATEN",
            benchmark_epilogue_fusion=benchmark_epilogue):
        out, code = run_and_get_code(torch.compile(model), a, b)
    return out, "\n".join(code)


def _kernels(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines()
            if "extern_kernels.mm(" in line or (".run(" in line and "triton_" in line)]


def _extern_slower(self, choices, name, key, benchmark, hint_override=None):  # type: ignore[no-untyped-def]
    """Inductor's ``lookup`` with the ATen choice's times made 1e6 times slower."""
    if benchmark is None:
        return {}
    timings = benchmark(choices)
    for choice in list(timings):
        if isinstance(choice, select_algorithm.ExternKernelCaller):
            timings[choice] = timings[choice] * 1e6
    return timings


def cycle(args: argparse.Namespace) -> None:
    triton_interpreter.benchmark_generated_modules()
    torch.manual_seed(0)
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    steer = patch.object(select_algorithm.AlgorithmSelectorCache, "lookup", _extern_slower) \
        if args.steer == "extern-slower" else contextlib.nullcontext()
    with inductor_flydsl.enabled(db_path=args.db, mode="readwrite"), steer:
        for name in CALLS:
            _count(name)
        out, code = _compile(a, b, benchmark_epilogue=True)
        stats = inductor_flydsl.stats().as_dict()
    db = sqlite_utils.Database(args.db)
    rows = [json.loads(r["epilogue"]) for r in db.query(
        "select epilogue from epilogue_decisions")]
    # the fastest Triton template's GEMM-only time, as recorded (Inductor's own timing):
    # whether Inductor compiles it fused depends on it (below winner + epilogue or not)
    triton_ms = [r["t"] for r in db.query(
        "select min(time_ms) as t from results where backend = 'triton' and status = 'ok'")]
    print("RESULT " + json.dumps({
        "calls": dict(CALLS), "kernels": _kernels(code),
        "counters": {k: stats[k] for k in (
            "hits", "misses", "benchmarked", "recorded", "fusions_replayed",
            "fusions_benchmarked", "errors", "epilogue_changed")},
        "benchmarks": [r for r in rows if r.get("kind") == fusion_replay.KIND],
        "triton_ms": triton_ms[0] if triton_ms else None,
        "max_abs_err": float((out - model(a, b)).abs().max())}))


def main() -> None:
    # One intra-op thread: with two, ATen's 9 us mm ends each call at an OpenMP barrier,
    # and when another process holds the other core the call waits out the scheduler's
    # time slice: a median of 24 ms was measured under load (the interpreted Triton
    # templates take 7-20 ms), deciding the cold compile by the machine's load.
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--fused-ms", type=float)
    parser.add_argument("--epilogue-ms", type=float)
    parser.add_argument("--cycle", choices=("cold", "warm"))
    parser.add_argument("--steer", choices=("none", "extern-slower"), default="none")
    args = parser.parse_args()
    if args.cycle is not None:
        cycle(args)
        return

    torch.manual_seed(0)
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    result: dict = {}
    with inductor_flydsl.enabled(db_path=args.db, mode="readwrite"):
        _, code = _compile(a, b, benchmark_epilogue=False)
        result["cold"] = {"stats": dict(inductor_flydsl.stats().as_dict()),
                          "kernels": _kernels(code)}

        db = sqlite_utils.Database(args.db)
        (problem_row,) = db.query("select id, spec from problems")
        (observed,) = db.query("select epilogue from epilogue_decisions")
        steps = json.loads(observed["epilogue"])["steps"]
        triton = [r for r in db.query(
            "select candidate_id, time_ms from results where backend = 'triton' and"
            " status = 'ok' order by time_ms")]
        (winner,) = db.query("select candidate_id, time_ms from results where status = 'ok'"
                             " order by time_ms limit 1")
        gemm_ms = winner["time_ms"]
        fused_id = triton[0]["candidate_id"]

        # the record Inductor's benchmark would have left (fusion_replay.decision_of):
        # the templates it compiles fused are the fastest Triton one by GEMM-only time
        # (max_epilogue_benchmarked_choices = 1) if that time is below the GEMM-only
        # winner's plus the epilogue's, else none
        problem = Problem.from_spec(json.loads(problem_row["spec"]))
        assert problem.id == problem_row["id"]
        attempted = [fused_id] if triton[0]["time_ms"] < gemm_ms + args.epilogue_ms else []
        fused = bool(attempted) and args.fused_ms < gemm_ms + args.epilogue_ms
        ops = [s["op"] for s in steps]
        # the attempt: the template node alone, offered one pointwise node (relu and mul)
        # whose result is the graph's output
        identity = {"steps": steps, "nodes": [1, 1], "stored": [1]}
        decision = fusion_replay.EpilogueDecision(
            problem_id=problem.id, epilogue_id=fusion_replay.attempt_id(identity),
            epilogue={"kind": fusion_replay.KIND, "ops": ops, "fused": ops if fused else [],
                      "separate": [] if fused else ops, "steps": steps,
                      "identity": identity, "attempted": attempted,
                      "fused_ms": {fused_id: args.fused_ms} if attempted else {},
                      "epilogue_ms": args.epilogue_ms, "gemm_ms": gemm_ms,
                      "pending": bool(attempted)},
            candidate_id=fused_id if fused else winner["candidate_id"],
            backend="triton" if fused else "aten", name="", fused=fused,
            gemm_winner_id=winner["candidate_id"], gemm_ms=gemm_ms,
            fused_ms=args.fused_ms if attempted else None,
            unfused_ms=gemm_ms + args.epilogue_ms, decided_by="written by the test")
        store = TuningDB.open(args.db, writable=True, tool="test")
        store.record_epilogue_decision(describe_device("cpu"),
                                       current_software(), problem, decision)
        store.close()
        result["recorded"] = {"fused": fused, "attempted": attempted, "gemm_ms": gemm_ms,
                              "fused_id": fused_id}

        before = inductor_flydsl.stats().as_dict()
        for name in CALLS:
            _count(name)
        out, code = _compile(a, b, benchmark_epilogue=True)
        after = inductor_flydsl.stats().as_dict()
        result["warm"] = {
            "calls": dict(CALLS), "kernels": _kernels(code),
            "counters": {k: after[k] - before[k] for k in (
                "hits", "misses", "partial_hits", "benchmarked", "recorded",
                "fusions_replayed", "fusions_benchmarked", "errors", "epilogue_changed")},
            "max_abs_err": float((out - model(a, b)).abs().max()),
            # what the epilogue observer saw the final code run
            "final": [{"candidate_id": e["candidate_id"], "fused": e["fused"]}
                      for e in after["epilogues"][len(before["epilogues"]):]]}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
