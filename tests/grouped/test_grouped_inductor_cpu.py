"""Grouped GEMMs (``torch._grouped_mm``, a tiny mixture-of-experts layer) through real
``torch.compile(mode="max-autotune")`` on this CPU, recorded and reused like dense GEMMs.

Inductor's CPU lowering of ``_grouped_mm`` offers one choice, ATen's, and a selection of
one is not recorded (nothing was compared). With FlyDSL requested and its provider's
runtime check replaced (as in tests/flydsl/test_inductor_integration_cpu.py; not Inductor,
not SQLite), the grouped template's candidates for gfx950 join: each is built (cross-
compiled) by the parallel build workers, its launch is refused by the custom op's own
ROCm check, it is recorded ``failed``, and ATen wins with a correct result. The recorded
problem is keyed by T, N, K, G, dtype and layout; the next compile is served from the DB
without benchmarking or building anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from tests.conftest import builds_only_vars

pytest.importorskip("flydsl")

MOE = r"""
import json, sys, torch, torch._inductor.config as ic
import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.problems import routing
if sys.argv[2] == "offer":
    provider.runtime_target = lambda device: ("gfx950", [])
routing.set_active(sys.argv[3])  # what a sweep item's routing does
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.max_autotune_gemm_backends = "ATEN,FLYDSL"
ic.autotune_local_cache = False  # the test run's shared cache dir: no timings from it
torch.manual_seed(0)
G, K, N = 4, 128, 64
w = torch.randn(G, K, N, dtype=torch.bfloat16)
x = torch.randn(160, K, dtype=torch.bfloat16)
offs = torch.tensor([32, 32, 96, 160], dtype=torch.int32)  # an empty expert included

def moe(x, w, offs):  # operands made in the graph: CPU graph inputs count as unaligned
    return torch._grouped_mm(x.relu(), w.relu(), offs=offs)

y = torch.compile(moe, mode="max-autotune")(x, w, offs)
torch.testing.assert_close(y, moe(x, w, offs))
print(json.dumps({"stats": inductor_flydsl.stats(),
                  "builds": sum(r.jobs for r in prebuild.runs)}))
"""


def _run(db: Path, mode: str, routed: str = "inductor") -> dict:
    """One compile in a fresh process; Inductor's cache dir the test run's (only its C++
    builds reused: every cache that could answer in place of lowering or benchmarking
    is off)."""
    env = {**os.environ, **builds_only_vars(), "INDUCTOR_FLYDSL_SHIPPED": "0"}
    proc = subprocess.run([sys.executable, "-c", MOE, str(db), mode, routed],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # > 20 s on 2 cores
def test_cpu_grouped_mm_alone_is_not_recorded(tmp_path: Path) -> None:
    data = _run(tmp_path / "t.db", "plain")
    assert data["stats"]["misses"] == 0 and data["stats"]["recorded"] == 0
    assert data["builds"] == 0


@pytest.mark.slow
def test_grouped_problem_recorded_then_served(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    first = _run(db, "offer")
    assert first["stats"]["misses"] == 1 and first["stats"]["recorded"] == 1
    assert first["builds"] >= 2  # the grouped candidates were cross-compiled in parallel
    (decision,) = first["stats"]["decisions"]
    assert decision["problem"] == "grouped_mm bfloat16 4x160x64x128 nn"
    assert decision["backend"] == "aten" and decision["source"] == "autotune"

    rows = list(sqlite_utils.Database(db).query(
        "select r.*, p.spec from results r join problems p on p.id = r.problem_id"))
    flydsl = [r for r in rows if r["backend"] == "flydsl"]
    assert flydsl and all(r["status"] == "failed" and "not launched" in r["error"]
                          for r in flydsl)
    assert all(json.loads(r["config"])["template"] == "gemm_grouped" for r in flydsl)
    assert all(r["candidate_id"].startswith("flydsl-gemm_grouped-") for r in flydsl)
    spec = json.loads(rows[0]["spec"])
    a, b, offs = spec["inputs"]
    assert a["size"] == [160, 128] and b["size"] == [4, 128, 64] and offs["size"] == [4]
    assert offs["dtype"] == "int32"

    second = _run(db, "offer")
    assert second["stats"]["hits"] == 1 and second["stats"]["benchmarked"] == 0
    assert second["builds"] == 0  # the served winner is ATen: no FlyDSL build
    assert second["stats"]["decisions"][0]["source"].startswith("db:")

    # A sweep measures the same GEMM under Zipf routing: Inductor benchmarks on Zipf
    # offsets and the selection is keyed with routing=zipf.
    zipf = _run(db, "offer", "zipf")
    assert zipf["stats"]["misses"] == 1 and zipf["stats"]["recorded"] == 1
    (routed,) = zipf["stats"]["decisions"]
    assert routed["problem"] == "grouped_mm bfloat16 4x160x64x128 nn routing=zipf"
    assert routed["problem_id"] != decision["problem_id"]
    # A plain compile is now served the best worst case over both routings.
    third = _run(db, "offer")
    assert third["stats"]["hits"] == 1 and third["stats"]["benchmarked"] == 0
    source = third["stats"]["decisions"][0]["source"]
    assert "routings inductor,zipf" in source and third["builds"] == 0


BATCHED = r"""
import json, sys, torch, torch._inductor.config as ic
import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
provider.runtime_target = lambda device: ("gfx950", [])
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.max_autotune_gemm_backends = "ATEN,FLYDSL"
a = torch.randn(4, 64, 128, dtype=torch.bfloat16)
b = torch.randn(4, 128, 64, dtype=torch.bfloat16)
fn = lambda a, b: torch._grouped_mm(a.relu(), b.relu())  # 3-D x 3-D: no offsets
y = torch.compile(fn, mode="max-autotune")(a, b)
torch.testing.assert_close(y, fn(a, b))
print(json.dumps(inductor_flydsl.stats()))
"""


@pytest.mark.slow  # > 20 s on 2 cores
def test_batched_grouped_mm_gets_the_dense_bmm_kernel(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c"),
           "INDUCTOR_FLYDSL_SHIPPED": "0", "INDUCTOR_FLYDSL_BUILD_JOBS": "0"}
    db = tmp_path / "t.db"
    proc = subprocess.run([sys.executable, "-c", BATCHED, str(db)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["recorded"] == 1
    assert stats["decisions"][0]["problem"] == "grouped_mm bfloat16 4x64x64x128 nn"
    rows = list(sqlite_utils.Database(db).query(
        "select * from results where backend = 'flydsl'"))
    assert rows and all(r["candidate_id"].startswith("flydsl-gemm_dense-") and
                        "-bmm-" in r["candidate_id"] and r["status"] == "failed" for r in rows)
