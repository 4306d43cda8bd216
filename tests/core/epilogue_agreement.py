"""The rule: with the plugin on, the final code uses the kernels plain Inductor picks;
recorded timings only replace benchmarking.

Each failure kind PyTorch's own CPU select-algorithm tests caught (linear + relu/gelu/add
epilogues, linear + unary + binary, bmm + pointwise, weight-only int8, a bf16 linear with
an activation, a dynamic-shape linear) is compiled through real
``torch.compile(mode="max-autotune")`` with freezing in three fresh processes: plugin
off, plugin on with a fresh DB, plugin on with that DB warm. Inductor's decision is
steered as upstream's tests steer it (one kind of choice made 1e6 times slower in its
``lookup``), once towards the C++ GEMM template (the epilogue fused into it) and once
towards the extern kernel (the epilogue in a separate kernel), so it does not depend on
timing noise. All three must generate the same kernels, report the same kernel counters
and compute the same outputs; the warm one must benchmark nothing.

The checks, shared by test_epilogue_agreement_template.py and
test_epilogue_agreement_extern.py (one steering each: two files, so that the two run on
two test workers at once). The processes share the test run's Inductor cache directory
(conftest ``shared_builds``) with the FX graph and AOTAutograd caches off, and Inductor's
benchmark timings never cached (the steering's ``lookup`` benchmarks every time): each
lowers its graphs and benchmarks itself (plugin off, fresh, warm, exactly as with caches
of their own), and only the C++ builds of identical kernel sources are reused
(Inductor's code cache is keyed by the source), which is most of a cold process's time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import sqlite_utils
import torch

from tests.conftest import isolated_env, run_for_result
from tests.core.epilogue_cases import CASES

CHILD = Path(__file__).with_name("epilogue_cases.py")
MODES = ("off", "fresh", "warm")
# the marks of both test files: slow, and the strongest check of the rule: run under both
# torch releases
MARKS = [pytest.mark.slow, pytest.mark.both_releases]


def _run(prefer: str, mode: str, root: Path, db: Path, builds: Path) -> dict:
    out = root / mode
    args = [sys.executable, str(CHILD), "--prefer", prefer, "--out", str(out)]
    if mode != "off":
        args += ["--plugin", "--db", str(db)]
    return run_for_result(args, isolated_env(out, builds), 900, f"{prefer}/{mode}")


def run_modes(prefer: str, tmp_path_factory: pytest.TempPathFactory, builds: Path) -> dict:
    """The three processes, steered towards ``prefer`` (``template`` or ``extern``): what
    each test file's module fixture ``runs`` returns."""
    root = tmp_path_factory.mktemp(prefer)
    db = root / "tuning.db"
    results = {mode: _run(prefer, mode, root, db, builds) for mode in MODES}
    return {"prefer": prefer, "root": root, "db": db, **results}


@pytest.mark.parametrize("case", CASES)
def test_same_kernels_counters_and_outputs(runs: dict, case: str) -> None:
    off, fresh, warm = (runs[m][case] for m in MODES)
    assert fresh["kernels"] == off["kernels"], "fresh DB: another kernel than Inductor's"
    assert warm["kernels"] == off["kernels"], "warm DB: another kernel than Inductor's"
    assert fresh["counters"] == off["counters"]
    assert warm["counters"] == off["counters"]
    assert warm["autotune"] == 0, "a warm DB benchmarks nothing"
    expected = torch.load(runs["root"] / "off" / f"{case}.pt")
    for mode in ("fresh", "warm"):
        got = torch.load(runs["root"] / mode / f"{case}.pt")
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)), mode


def test_the_steered_kernel_really_ran(runs: dict) -> None:
    """The steering works: towards the template every float32 epilogue is fused into the
    C++ GEMM template; towards the extern kernel none is."""
    fused = {case: runs["off"][case]["counters"]["cpp_epilogue_fusion_counter"]
             for case in ("linear_relu", "linear_relu_add", "bmm_div", "bmm_mul_add")}
    if runs["prefer"] == "template":
        assert all(count == 1 for count in fused.values()), fused
    else:
        assert not any(fused.values()), fused
        assert any("extern_kernels.bmm" in k for k in runs["off"]["bmm_div"]["kernels"][0])


def test_warm_db_serves_every_gemm_and_repeats_every_epilogue_decision(runs: dict) -> None:
    fresh, warm = runs["fresh"]["stats"], runs["warm"]["stats"]
    assert fresh["errors"] == 0 and warm["errors"] == 0
    assert fresh["recorded"] == fresh["misses"] > 0
    # linear_gelu/_add/_relu_add and bmm_mul_add repeat a GEMM recorded earlier in the
    # same fresh process: served there already, with the kernels Inductor picks
    assert fresh["hits"] >= 4
    assert warm["misses"] == 0 and warm["recorded"] == 0 and warm["benchmarked"] == 0
    assert warm["hits"] + warm["dynamic_hits"] == fresh["hits"] + fresh["misses"] \
        + fresh["dynamic_hits"]
    assert warm["epilogue_changed"] == 0
    assert {e["record"] for e in warm["epilogues"]} == {"same"}
    assert len(warm["epilogues"]) == len(fresh["epilogues"])


def test_recorded_winner_is_inductors_choice_and_both_timings_are_kept(runs: dict) -> None:
    """The winner is the choice Inductor made with the timings it used (here steered
    1e6x), never the re-measure's: time_ms holds Inductor's timing, measured_ms what
    the benchmark returned, and the re-measured spread sits beside them."""
    db = sqlite_utils.Database(runs["db"])
    winning = "aten" if runs["prefer"] == "extern" else "cpp"
    steered = "cpp" if runs["prefer"] == "extern" else "aten"
    for w in db.query("select * from winners"):
        assert w["backend"] == winning, w
        rows = {r["backend"]: r for r in db.query(
            "select * from results where problem_id = ?", [w["problem_id"]])}
        slowed = rows[steered]
        assert slowed["time_ms"] == pytest.approx(slowed["measured_ms"] * 1e6, rel=1e-6)
        assert rows[winning]["time_ms"] == pytest.approx(rows[winning]["measured_ms"])
        if w["confidence"] == "low" and "disagrees" in (w["confidence_reason"] or ""):
            assert rows[winning]["median_ms"] > rows[steered]["median_ms"]


def test_epilogue_decisions_recorded_per_epilogue(runs: dict) -> None:
    db = sqlite_utils.Database(runs["db"])
    rows = list(db.query("select e.*, p.op from epilogue_decisions e join problems p on"
                         " p.id = e.problem_id"))
    # an epilogue id names one exact epilogue, and one epilogue has one id (no address or
    # order-dependent part in it): ids and identities pair up one to one
    pairs = {(r["problem_id"], r["epilogue_id"],
              json.dumps(json.loads(r["epilogue"])["steps"], sort_keys=True)) for r in rows}
    assert len({(p, i) for p, i, _ in pairs}) == len({(p, s) for p, _, s in pairs}) \
        == len(pairs), pairs
    linear = [r for r in rows if r["op"] == "packed_linear" and "384x384" in
              db.execute("select summary from problems where id = ?",
                         [r["problem_id"]]).fetchone()[0]]
    # one GEMM (linear 384x384x196), four epilogues: four decisions, not one
    epilogues = {json.loads(r["epilogue"])["ops"].__repr__() for r in linear}
    assert len(epilogues) >= 3, epilogues
    for r in rows:
        ops = json.loads(r["epilogue"])
        if runs["prefer"] == "template" and r["op"] in ("packed_linear", "bmm") and ops["ops"]:
            assert r["fused"] == 1 and ops["fused"] == ops["ops"], r
        if runs["prefer"] == "extern":
            assert r["fused"] == 0 and r["backend"] == "aten", r
