"""Deferred epilogue-fusion decisions recorded and replayed (issue 33, point 2), with
Inductor's real scheduler code on this CPU: ``cpu_backend = "triton"`` gives the GEMM
Triton templates and a ``MultiTemplateBuffer``, Triton's interpreter runs the kernels
(``triton_interpreter.py``; the Triton that .venv-torch-next's torch brings).

- The whole cycle: a cold process lets Inductor benchmark the fusion decision (the
  interpreted modules timed on the CPU) and the plugin record it; a warm one must end
  with the same kernels and outputs with nothing compiled or benchmarked for it.
- Per recorded decision (the fused template faster, or slower, than the GEMM-only winner
  plus the epilogue kernel; or no template worth compiling fused), a warm compile must
  end with the recorded decision's kernels (the recorded template when fused), correct
  outputs, and nothing compiled or benchmarked for the decision: Inductor's
  ``compile_kernel``, ``benchmark_fused_nodes`` and ``benchmark_codegened_module`` never
  called, the GEMM's timings served (0 benchmarked).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.inductor.fusion.fusion_replay import (
    KIND,
    RecordedBenchmark,
    recorded_benchmark,
)
from tests.conftest import isolated_env, run_for_result

CHILD = Path(__file__).with_name("fusion_replay_cpu.py")


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _child(args: list[str], env: dict[str, str]) -> dict:
    """Run the child with ``args``; its ``RESULT`` line."""
    return run_for_result([sys.executable, str(CHILD), *args], env, 900, f"child {args}")


def _run(tmp_path: Path, fused_ms: float, epilogue_ms: float) -> dict:
    return _child(["--db", str(tmp_path / "tuning.db"), "--fused-ms", repr(fused_ms),
                   "--epilogue-ms", repr(epilogue_ms)],
                  isolated_env(tmp_path, TRITON_INTERPRET="1"))


def _cycle(tmp_path: Path, phase: str, steer: str) -> dict:
    return _child(["--db", str(tmp_path / "tuning.db"), "--cycle", phase, "--steer", steer],
                  isolated_env(tmp_path / phase, TRITON_INTERPRET="1"))


def _assert_replayed(warm: dict) -> None:
    """A warm compile's decision came from the record: the GEMM served, nothing compiled
    or benchmarked for the fusion (a fusion refused in Inductor's pending round is
    offered again in its next round: replayed again)."""
    assert warm["calls"] == {"compile_kernel": 0, "benchmark_fused_nodes": 0,
                             "benchmark_codegened_module": 0}, warm["calls"]
    counters = warm["counters"]
    assert counters["fusions_replayed"] >= 1 and counters["fusions_benchmarked"] == 0
    assert counters["hits"] == 1 and counters["benchmarked"] == 0
    assert counters["errors"] == 0
    assert warm["max_abs_err"] < 1e-4


needs_triton = pytest.mark.skipif(
    not _has_triton(), reason="Triton is not installed in this environment (it comes with "
    ".venv-torch-next's torch, where scripts/run_tests.sh runs this file)")


# (fused template ms, epilogue kernel ms). On this CPU the ATen GEMM takes about 0.01 ms
# and the fastest Triton template about 10 ms through the interpreter, so an epilogue
# recorded at 0.01 ms leaves Inductor no template worth compiling fused (it would not
# fuse), and one at 1000 ms makes it compile the fastest template and compare.
CASES = {"fused-faster": (1e-6, 1000.0), "fused-slower": (5000.0, 1000.0),
         "no-template-worth-it": (1e-6, 0.01)}


@needs_triton
@pytest.mark.parametrize("case", list(CASES))
def test_warm_compile_replays_the_recorded_fusion_decision(tmp_path: Path, case: str) -> None:
    fused_ms, epilogue_ms = CASES[case]
    result = _run(tmp_path, fused_ms=fused_ms, epilogue_ms=epilogue_ms)
    cold, warm, recorded = result["cold"], result["warm"], result["recorded"]
    fuse = case == "fused-faster"
    # the first compile (no deferral): the extern GEMM won, the epilogue a separate kernel
    assert cold["stats"]["benchmarked"] == 1 and cold["stats"]["errors"] == 0
    assert any("extern_kernels.mm(" in k for k in cold["kernels"]), cold["kernels"]
    assert recorded["fused"] is fuse
    assert bool(recorded["attempted"]) is (case != "no-template-worth-it")

    _assert_replayed(warm)
    counters = warm["counters"]
    assert counters["misses"] == 0
    (final,) = warm["final"]
    # db show names the recorded fusion benchmark apart from the observer's row
    show = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "db", "show", "--db",
         str(tmp_path / "tuning.db"), "32x32x32"], env=isolated_env(tmp_path),
        capture_output=True, text=True, timeout=120, check=True).stdout
    line = next(x for x in show.splitlines() if "fusion benchmark of epilogue" in x)
    assert "[relu, mul]" in line and ("fused into the GEMM kernel" if fuse else
                                      "separate epilogue kernel") in line, line
    if fuse:  # one kernel: the recorded template with relu and mul inside
        assert len(warm["kernels"]) == 1 and "triton_tem_fused_mm_mul_relu" in \
            warm["kernels"][0], warm["kernels"]
        assert final == {"candidate_id": recorded["fused_id"], "fused": True}
        # the observer's row (first compile: not deferred, not fused) differs, as it should
        assert counters["epilogue_changed"] == 1
    else:  # the GEMM-only winner and a separate epilogue kernel, as in the first compile
        assert warm["kernels"][0].startswith("extern_kernels.mm("), warm["kernels"]
        assert any("triton_poi_fused_mul_relu" in k for k in warm["kernels"][1:])
        assert final["fused"] is False and final["candidate_id"].startswith("mm-")
        assert counters["epilogue_changed"] == 0


@needs_triton
@pytest.mark.parametrize("steer", ["none", "extern-slower"])
def test_cold_compile_records_the_fusion_benchmark_warm_replays_it(tmp_path: Path,
                                                                   steer: str) -> None:
    """The whole cycle with nothing written by the test: Inductor benchmarks the deferred
    fusion decision (timing the interpreted modules on the CPU), the plugin records it,
    and a second process with a fresh Inductor cache ends with the same kernels and
    outputs with nothing compiled or benchmarked for the decision. Unsteered, Inductor
    compiles the fastest template fused only where its GEMM-only time is below the ATen
    winner's plus the epilogue kernel's: the interpreted epilogue kernel takes 1-10 ms on
    CPUs like this one, about what an interpreted template takes, so either outcome is
    Inductor's to choose and the record must say which (CI recorded one attempt where
    this machine recorded none); steered, a template is compiled fused and benchmarked."""
    cold = _cycle(tmp_path, "cold", steer)
    assert cold["counters"]["fusions_benchmarked"] >= 1 and cold["counters"]["errors"] == 0
    assert cold["calls"]["benchmark_fused_nodes"] >= 1  # the epilogue kernel alone
    (record,) = cold["benchmarks"]
    assert record["epilogue_ms"] > 0 and record["ops"] == ["relu", "mul"]
    if steer == "extern-slower":
        assert len(record["attempted"]) == 1 and set(record["fused_ms"]) == \
            set(record["attempted"]) and record["pending"] is True, record
        assert cold["calls"]["compile_kernel"] >= 1
    else:  # Inductor's rule (max_epilogue_benchmarked_choices = 1) on the recorded times
        worth_it = cold["triton_ms"] < record["gemm_ms"] + record["epilogue_ms"]
        assert len(record["attempted"]) == (1 if worth_it else 0), (cold["triton_ms"], record)
        assert set(record["fused_ms"]) == set(record["attempted"]), record

    warm = _cycle(tmp_path, "warm", steer)
    assert warm["kernels"] == cold["kernels"]
    _assert_replayed(warm)
    assert warm["counters"]["epilogue_changed"] == 0
    assert cold["max_abs_err"] < 1e-4


def test_recorded_benchmarks_are_validated() -> None:
    good = {"epilogue": {"kind": KIND, "attempted": ["triton_mm-a", "triton_mm-b"],
                         "fused_ms": {"triton_mm-a": 0.5}, "epilogue_ms": 0.1,
                         "pending": True}}
    assert recorded_benchmark(good) == RecordedBenchmark(
        ("triton_mm-a", "triton_mm-b"), {"triton_mm-a": 0.5}, 0.1, True)
    none = {"epilogue": {**good["epilogue"], "attempted": [], "fused_ms": {},
                         "pending": False}}
    assert recorded_benchmark(none) == RecordedBenchmark((), {}, 0.1, False)
    bad = [
        {"epilogue": None},
        {"epilogue": {**good["epilogue"], "kind": "observed"}},  # the observer's own rows
        {"epilogue": {**good["epilogue"], "epilogue_ms": math.nan}},
        {"epilogue": {**good["epilogue"], "epilogue_ms": -1.0}},
        {"epilogue": {**good["epilogue"], "epilogue_ms": "0.1"}},
        {"epilogue": {**good["epilogue"], "fused_ms": {"triton_mm-a": math.inf}}},
        {"epilogue": {**good["epilogue"], "fused_ms": {"triton_mm-a": True}}},
        {"epilogue": {**good["epilogue"], "fused_ms": [0.5]}},
        {"epilogue": {**good["epilogue"], "fused_ms": {"triton_mm-c": 0.5}}},  # not attempted
        {"epilogue": {**good["epilogue"], "attempted": "triton_mm-a"}},
        {"epilogue": {**good["epilogue"], "attempted": ["triton_mm-a", "triton_mm-a"]}},
        {"epilogue": {**good["epilogue"], "pending": 1}},
    ]
    for row in bad:
        assert recorded_benchmark(row) is None, row
