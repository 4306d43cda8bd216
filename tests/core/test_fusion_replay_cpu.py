"""A deferred epilogue-fusion decision replayed from its record (issue 33, point 2), with
Inductor's real scheduler code on this CPU: ``cpu_backend = "triton"`` gives the GEMM
Triton templates and a ``MultiTemplateBuffer``, Triton's interpreter runs the kernels
(``triton_interpreter.py``; the Triton that .venv-torch-next's torch brings).

Per recorded decision (the fused template faster, or slower, than the GEMM-only winner
plus the epilogue kernel), a warm compile must end with the recorded decision's kernels,
correct outputs, and nothing compiled or benchmarked for the decision: Inductor's
``compile_kernel``, ``benchmark_fused_nodes`` and ``benchmark_codegened_module`` never
called, the GEMM's timings served (0 benchmarked). Inductor's own fusion benchmark, which
the record stands in for, cannot run here (the interpreter has no compiled launcher):
recording it is covered by the GPU test (test_epilogue_agreement_gpu.py).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.inductor.fusion_replay import KIND, recorded_timings
from tests.conftest import isolated_env

CHILD = Path(__file__).with_name("fusion_replay_cpu.py")


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _run(tmp_path: Path, fused_ms: float, epilogue_ms: float) -> dict:
    env = isolated_env(tmp_path, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, str(CHILD), "--db", str(tmp_path / "tuning.db"),
         "--fused-ms", repr(fused_ms), "--epilogue-ms", repr(epilogue_ms)],
        env=env, capture_output=True, text=True, timeout=900, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise AssertionError(f"child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")


needs_triton = pytest.mark.skipif(
    not _has_triton(), reason="Triton is not installed in this environment (it comes with "
    ".venv-torch-next's torch, where scripts/run_tests.sh runs this file)")


@needs_triton
@pytest.mark.parametrize("fuse", [True, False], ids=["fused-faster", "fused-slower"])
def test_warm_compile_replays_the_recorded_fusion_decision(tmp_path: Path, fuse: bool) -> None:
    result = _run(tmp_path, fused_ms=1e-6 if fuse else 10.0, epilogue_ms=0.01)
    cold, warm = result["cold"], result["warm"]
    # the first compile (no deferral): the extern GEMM won, the epilogue a separate kernel
    assert cold["stats"]["benchmarked"] == 1 and cold["stats"]["errors"] == 0
    assert any("extern_kernels.mm(" in k for k in cold["kernels"]), cold["kernels"]
    assert result["recorded"]["fused"] is fuse

    assert warm["calls"] == {"compile_kernel": 0, "benchmark_fused_nodes": 0,
                             "benchmark_codegened_module": 0}, warm["calls"]
    counters = warm["counters"]
    # (a refused fusion is offered again in Inductor's next fusion round: replayed again)
    assert counters["fusions_replayed"] >= 1 and counters["fusions_benchmarked"] == 0
    assert counters["hits"] == 1 and counters["benchmarked"] == 0
    assert counters["misses"] == 0 and counters["errors"] == 0
    assert warm["max_abs_err"] < 1e-4
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
        # the observer's row (first compile: not deferred, not fused) differs, as it should
        assert counters["epilogue_changed"] == 1
    else:  # the GEMM-only winner and a separate epilogue kernel, as in the first compile
        assert warm["kernels"][0].startswith("extern_kernels.mm("), warm["kernels"]
        assert any("triton_poi_fused_mul_relu" in k for k in warm["kernels"][1:])
        assert counters["epilogue_changed"] == 0


def test_recorded_timings_are_validated() -> None:
    good = {"epilogue": {"kind": KIND, "fused_ms": {"triton_mm-a": 0.5}, "epilogue_ms": 0.1}}
    assert recorded_timings(good) == ({"triton_mm-a": 0.5}, 0.1)
    assert recorded_timings({"epilogue": {**good["epilogue"], "fused_ms": {}}}) == ({}, 0.1)
    bad = [
        {"epilogue": None},
        {"epilogue": {**good["epilogue"], "kind": "observed"}},  # the observer's own rows
        {"epilogue": {**good["epilogue"], "epilogue_ms": math.nan}},
        {"epilogue": {**good["epilogue"], "epilogue_ms": -1.0}},
        {"epilogue": {**good["epilogue"], "epilogue_ms": "0.1"}},
        {"epilogue": {**good["epilogue"], "fused_ms": {"triton_mm-a": math.inf}}},
        {"epilogue": {**good["epilogue"], "fused_ms": {"triton_mm-a": True}}},
        {"epilogue": {**good["epilogue"], "fused_ms": [0.5]}},
    ]
    for row in bad:
        assert recorded_timings(row) is None, row
