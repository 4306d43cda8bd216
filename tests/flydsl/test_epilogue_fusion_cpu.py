"""FlyDSL candidates with fused epilogues inside a real CPU compile.

A Llama-style MLP block (RMSNorm, gate/up/down projections, SwiGLU, residual; fp16,
frozen) is compiled with ``max-autotune`` and ``ATEN,CPP,FLYDSL`` in fresh processes, the
FlyDSL provider's runtime check replaced so gfx950 candidates are offered (as in
test_inductor_integration_cpu.py). The epilogue-fusion pass must turn the gate GEMM with
``silu(gate) * up`` and the down GEMM with its residual add into fused-epilogue
selections; the fused FlyDSL candidates are built (gfx950, in the build pool), refused at
launch (no ROCm here) and recorded ``failed``; Inductor's own handling of each region
(compiled as a subgraph) wins, and the compile ends with the same kernels (names, order,
count) and bit-equal outputs as the same compile with the plugin off: the original ops
stay in the graph and are lowered as without the plugin. A second process is served
from the DB.

Inductor's decision is steered as upstream's CPU tests steer it (extern choices 1e6x
slower in its ``lookup``), so timing noise cannot change which kernels win.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import builds_only_vars, run_for_result

pytestmark = pytest.mark.slow

COMPILE = r"""
import json, sys
from unittest.mock import patch
import torch
import torch._inductor.config as ic
import torch._inductor.fx_passes.mkldnn_fusion as mkldnn_fusion
from torch._inductor import select_algorithm
from torch._inductor.utils import run_and_get_code

def slower_externs(self, choices, name, key, benchmark, hint_override=None):
    if benchmark is None:
        return {}
    timings = benchmark(choices)
    for c in list(timings):
        if isinstance(c, select_algorithm.ExternKernelCaller):
            timings[c] *= 1e6
    return timings

def main():
    db, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
    # fp16 linears stay addmm/mm as on a CPU without AVX512-FP16 (FlyDSL takes mm)
    mkldnn_fusion.is_mkldnn_fp16_supported = lambda *args: False
    backends = "ATEN,CPP"
    stats = None
    if mode == "on":
        import inductor_flydsl
        from inductor_flydsl.flydsl_backend.autotune import provider
        from inductor_flydsl.flydsl_backend.builds import prebuild
        provider.runtime_target = lambda device: ("gfx950", [])
        inductor_flydsl.enable(db, "readwrite")
        backends = "ATEN,CPP,FLYDSL"
    ic.freezing = True

    class Block(torch.nn.Module):
        def __init__(self, h=256, f=512):
            super().__init__()
            self.norm = torch.nn.RMSNorm(h)
            self.gate = torch.nn.Linear(h, f, bias=False)
            self.up = torch.nn.Linear(h, f, bias=False)
            self.down = torch.nn.Linear(f, h, bias=False)

        def forward(self, x):
            h = x * 2.0  # the residual stream, an intermediate (graph inputs count as
            y = self.norm(h)  # unaligned on CPU, so FlyDSL would refuse them)
            return h + self.down(torch.nn.functional.silu(self.gate(y)) * self.up(y))

    torch.manual_seed(0)
    block = Block().to(torch.float16).eval()
    x = torch.randn(64, 256, dtype=torch.float16)
    with torch.no_grad(), ic.patch(max_autotune=True, max_autotune_gemm_backends=backends), \
            patch.object(select_algorithm.AlgorithmSelectorCache, "lookup", slower_externs):
        y, code = run_and_get_code(torch.compile(block), x)
    torch.save(y, out)
    result = {"code": code}
    if mode == "on":
        result["stats"] = inductor_flydsl.stats()
        result["builds"] = sum(r.jobs for r in prebuild.runs)
    print("RESULT " + json.dumps(result))

if __name__ == "__main__":
    main()
"""


def _compile(script: Path, db: Path, mode: str, root: Path, builds: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"{mode}.pt"
    # the run's C++ builds shared, every cache that could answer in place of lowering
    # off (timings come from the steered lookup, never a cache)
    env = {**os.environ, **builds_only_vars(builds), "INDUCTOR_FLYDSL_SHIPPED": "0",
           "INDUCTOR_FLYDSL_BUILD_JOBS": "2", "FLYDSL_RUNTIME_CACHE_DIR": str(root / "fly")}
    env.pop("INDUCTOR_FLYDSL", None)
    result = run_for_result([sys.executable, str(script), str(db), mode, str(out)], env, 1200,
                            f"{mode} compile")
    result["y"] = torch.load(out)
    return result


def _kernels(code: list[str]) -> list[str]:
    """What the final code runs, in order: the generated kernels by name (named after the
    ops they compute) and each extern op called."""
    # the graph's own code (run_and_get_code also returns the modules a benchmark
    # compiled: a region compiled as a subgraph, "benchmark_gemm_epilogue_...")
    text = "\n".join(c for c in code if "benchmark_gemm_epilogue" not in c)
    return re.findall(r"^(\w+) = async_compile\.\w+\(", text, re.M) + re.findall(
        r"(extern_kernels\.\w+|torch\.ops\.(?!inductor\.)\w+\.\w+)\(", text)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> dict:
    root = tmp_path_factory.mktemp("fused_epilogues")
    script = root / "compile_block.py"
    script.write_text(COMPILE)
    db = root / "tuning.db"
    return {"db": db,
            "off": _compile(script, db, "off", root / "off", shared_builds),
            "on": _compile(script, db, "on", root / "on", shared_builds),
            "warm": _compile(script, db, "on", root / "warm", shared_builds)}


def _rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_fused_candidates_offered_built_refused_and_recorded(runs: dict) -> None:
    stats = runs["on"]["stats"]
    assert stats["errors"] == 0, stats
    assert stats["epilogue_fusions"] >= 2  # gate with silu(.) * up, down with + x
    assert runs["on"]["builds"] > 0, "the fused candidates were built in the pool"
    problems = _rows(runs["db"], "select id, spec from problems where op = 'gemm_epilogue'")
    assert len(problems) >= 2
    ops_seen = set()
    for problem_id, spec in problems:
        attrs = json.loads(spec)["attrs"]
        ops_seen.add(tuple(attrs["epilogue_ops"]))
        rows = _rows(runs["db"], "select backend, status, error, config from results where"
                     " problem_id = ?", (problem_id,))
        fused = [r for r in rows if r[0] == "flydsl"]
        assert fused and all(r[1] == "failed" and "not launched" in r[2] for r in fused)
        assert all(json.loads(r[3])["epilogue"] for r in fused)
        (winner,) = _rows(runs["db"], "select backend from winners where problem_id = ?",
                          (problem_id,))
        assert winner[0] == "subgraph"  # Inductor's own handling of the region
    assert ("add",) in ops_seen, ops_seen  # the residual
    assert any("exp" in ops and "mul" in ops for ops in ops_seen), ops_seen  # silu * up


def test_nothing_else_changes(runs: dict) -> None:
    """Inductor's own handling won both selections: the final code runs the same kernels
    (names, order, count) as with the plugin off, and the output is bit-equal."""
    assert _kernels(runs["on"]["code"]) == _kernels(runs["off"]["code"])
    assert len(_kernels(runs["off"]["code"])) >= 4
    assert torch.equal(runs["on"]["y"], runs["off"]["y"])


def test_second_process_is_served(runs: dict) -> None:
    stats = runs["warm"]["stats"]
    assert stats["errors"] == 0 and stats["misses"] == 0 and stats["benchmarked"] == 0
    assert stats["hits"] >= 4  # the fused selections and the GEMMs inside the regions
    assert runs["warm"]["builds"] == 0, "a served compile builds no candidate"
    assert _kernels(runs["warm"]["code"]) == _kernels(runs["off"]["code"])
    assert torch.equal(runs["warm"]["y"], runs["off"]["y"])
