"""A real template change invalidates only that template's rows (validity per backend).

A frozen fp16 two-layer MLP is compiled with ``max-autotune`` and ``ATEN,CPP,FLYDSL`` in
fresh processes sharing one DB, with the FlyDSL provider's runtime check replaced (as in
test_inductor_integration_cpu.py) so FlyDSL's gfx950 candidates are offered for the
second layer (its input is an intermediate, so aligned), built, and refused at launch.
Then the same compile runs against a changed copy of the templates package (first on
``PYTHONPATH``, so it is what the plugin imports and hashes): the first layer (ATen and
C++ rows only) is still served exactly; the second layer's record holds FlyDSL rows of
the old template, so it only serves as a prior: its short list (the C++ template and
ATen) is benchmarked and no FlyDSL candidate is built.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from inductor_flydsl.provenance.software import templates_dir
from tests.conftest import builds_only_vars, run_for_result

pytestmark = pytest.mark.slow

COMPILE = r"""
import json, sys, torch
import torch._inductor.config as ic
import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.provenance.software import template_source_hash
provider.runtime_target = lambda device: ("gfx950", [])  # offer the candidates on CPU
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.freezing = True
ic.autotune_local_cache = False  # the test run's shared cache dir: no timings from it
ic.max_autotune_gemm_backends = "ATEN,CPP,FLYDSL"
# fp16 linears stay addmm (FlyDSL takes addmm, the C++ template competes) as on every x86
# CPU without AVX512-FP16; on one with it (Sapphire Rapids) Inductor would pack them for
# oneDNN (linear_unary), so the test says the CPU has none
import torch._inductor.fx_passes.mkldnn_fusion as mkldnn_fusion
mkldnn_fusion.is_mkldnn_fp16_supported = lambda *args: False
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 256)).to(torch.float16).eval()
x = torch.randn(64, 256, dtype=torch.float16)
with torch.no_grad():
    y = torch.compile(model, mode="max-autotune")(x)
    torch.testing.assert_close(y, model(x), rtol=2e-2, atol=2e-2)
print("RESULT " + json.dumps({"stats": inductor_flydsl.stats(),
                              "builds": sum(r.jobs for r in prebuild.runs),
                              "template_hash": template_source_hash("gemm_dense")}))
"""


def compile_once(db: Path, cache: Path, pythonpath: Path | None = None) -> dict:
    """One compile in a fresh process: FlyDSL's runtime cache in ``cache``, Inductor's
    cache dir the test run's (only its C++ builds reused: every cache that could answer
    in place of lowering or benchmarking is off)."""
    env = {**os.environ, **builds_only_vars(), "INDUCTOR_FLYDSL_SHIPPED": "0",
           "INDUCTOR_FLYDSL_PRIORS": "1",  # opt-in: the short list from the prior
           "INDUCTOR_FLYDSL_BUILD_JOBS": "2", "FLYDSL_RUNTIME_CACHE_DIR": str(cache / "fly")}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(pythonpath), *filter(None, [os.environ.get("PYTHONPATH")])])
    return run_for_result([sys.executable, "-c", COMPILE, str(db)], env, 1200, "compile")


def flydsl_rows(db: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("select problem_id, config from results"
                            " where backend = 'flydsl'").fetchall()
    finally:
        conn.close()


def test_changed_template_keeps_other_rows_exact_and_its_own_a_prior(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    first = compile_once(db, tmp_path / "c0")
    stats = first["stats"]
    assert stats["recorded"] == 2 and stats["errors"] == 0
    assert first["builds"] > 0  # the second layer's FlyDSL candidates were built
    old_rows = flydsl_rows(db)
    assert old_rows and {json.loads(c)["template_hash"] for _, c in old_rows} == {
        first["template_hash"]}
    assert len({p for p, _ in old_rows}) == 1  # only the second layer is eligible

    changed = tmp_path / "changed" / "inductor_flydsl_templates"
    shutil.copytree(templates_dir(), changed)
    with open(changed / "gemm_dense.py", "a", encoding="utf-8") as f:
        f.write("\n# a template edit: the source hash changes\n")
    second = compile_once(db, tmp_path / "c1", pythonpath=changed.parent)
    assert second["template_hash"] != first["template_hash"]
    stats = second["stats"]
    # layer 1 (ATen and C++ rows) exact; layer 2 (old FlyDSL rows) a prior
    assert (stats["hits"], stats["misses"], stats["prior_hits"]) == (1, 1, 1)
    assert stats["benchmarked"] == 1 and stats["errors"] == 0
    assert second["builds"] == 0  # the short list holds no FlyDSL candidate
    assert flydsl_rows(db) == old_rows  # the short list measured and wrote no FlyDSL row
    (prior_decision,) = [d for d in stats["decisions"] if d["source"].startswith("prior:")]
    assert prior_decision["problem_id"] == old_rows[0][0]
    conn = sqlite3.connect(db)
    try:
        (prior,) = [json.loads(p) for (p,) in conn.execute(
            "select prior from winners where prior is not null")]
    finally:
        conn.close()
    assert any(c.startswith("flydsl: template gemm_dense ") for c in prior["changes"])
    assert not any(c.startswith(("aten:", "cpp:")) for c in prior["changes"])

    # the next compile with the changed template: the short list's ATen and C++ rows are
    # served; the changed template's FlyDSL candidates, which the short list skipped, are
    # built and benchmarked (plain Inductor would benchmark them too), then recorded
    third = compile_once(db, tmp_path / "c2", pythonpath=changed.parent)
    stats = third["stats"]
    assert (stats["hits"], stats["partial_hits"], stats["benchmarked"]) == (1, 1, 1)
    assert third["builds"] > 0
    # after that every candidate has a row for this stack: served, nothing built
    fourth = compile_once(db, tmp_path / "c3", pythonpath=changed.parent)
    stats = fourth["stats"]
    assert (stats["hits"], stats["partial_hits"], stats["benchmarked"]) == (2, 0, 0)
    assert fourth["builds"] == 0
