"""The template registry (``flydsl_backend/specs/registry.py``): one spec per template.

A test-only template package (``tests/template_package``: one kernel file, ``gemm_tiny``,
a copy of the dense kernel offered with one config, and its spec) is named in
``INDUCTOR_FLYDSL_TEMPLATE_PACKAGES``, with no edit anywhere else, and is then:
offered (the offering's list, and a real ``torch.compile`` selection launched through
FlyDSL's runtime into the emulator), compiled by ``compile-check`` in its worker
processes, emulated there against torch, and ranked by the performance model from the
catalog rows compile-check wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from inductor_flydsl.flydsl_backend.specs import registry
from inductor_flydsl.problems.problem import synthetic_problem

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "tests.template_package"
BUILTIN = ("gemm_dense", "gemm_grouped", "gemm_mx")


def _mm(m: int = 64, n: int = 128, k: int = 256, dtype: str = "bfloat16"):
    return synthetic_problem("mm", m, n, k, dtype=dtype, layout="nt")


def test_the_shipped_templates_are_specs_and_a_name_is_checked() -> None:
    assert registry.names()[:3] == BUILTIN
    assert [s.name for s in registry.serving(_mm())][:1] == ["gemm_dense"]
    assert registry.selections()[:5] == ("mm", "addmm", "bmm", "grouped_mm", "scaled_mm")
    assert [s.name for s in registry.for_custom_op("gemm_epilogue")] == ["gemm_dense"]
    with pytest.raises(registry.UnknownTemplate, match="unknown template 'gemm_nope'"):
        registry.spec("gemm_nope")
    dense = registry.spec("gemm_dense")
    with pytest.raises(ValueError, match="serves_as"):
        registry.TemplateSpec(**{**dense.__dict__, "serves_as": "sometimes"})


def test_a_template_name_declared_twice_is_refused(monkeypatch) -> None:
    dense = registry.spec("gemm_dense")
    monkeypatch.setitem(registry._by_module, "tests.twice", [
        registry.TemplateSpec(**{**dense.__dict__})])
    monkeypatch.setenv("INDUCTOR_FLYDSL_TEMPLATE_PACKAGES", "tests.twice")
    with pytest.raises(ValueError, match="'gemm_dense' is registered twice"):
        registry.specs()


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("INDUCTOR_FLYDSL_TEMPLATE_PACKAGES", PACKAGE)
    monkeypatch.syspath_prepend(str(REPO))
    return registry.spec("gemm_tiny")


def test_a_registered_template_is_offered_beside_the_shipped_one(tiny) -> None:
    from inductor_flydsl.flydsl_backend.offer import offering
    from inductor_flydsl.provenance.software import template_source_hash
    from tests.template_package.gemm_tiny_spec import ONLY

    problem = _mm()
    assert [s.name for s in registry.serving(problem)] == ["gemm_dense", "gemm_tiny"]
    assert registry.serving(_mm(dtype="float16"))[-1].name == "gemm_dense"
    assert offering.offer(problem, "gfx950", spec=tiny).configs == [ONLY]
    assert offering.model_variant(problem, tiny) == ("gemm_tiny", "mm", "bf16", "nt")
    dense = offering.offer(problem, "gfx950").configs
    assert len(dense) > 1  # the dense template keeps its own list
    assert template_source_hash("gemm_tiny") not in (None, template_source_hash("gemm_dense"))


@pytest.mark.slow
def test_a_registered_template_is_compiled_emulated_and_ranked(tiny, tmp_path: Path) -> None:
    """``compile-check --template gemm_tiny --emulate``: its worker processes find the
    template through the setting; its row feeds the model's ranking."""
    from inductor_flydsl.performance.ranking import rank
    from inductor_flydsl.performance.traffic import model_shape
    from tests.template_package.gemm_tiny_spec import ONLY

    db = tmp_path / "catalog.db"
    env = {**os.environ, "INDUCTOR_FLYDSL_TEMPLATE_PACKAGES": PACKAGE,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "compile-check", "--template", "gemm_tiny",
         "--emulate", "--arch", "gfx950", "--dtype", "bf16", "--layout", "nt", "--op", "mm",
         "--db", str(db), "--jobs", "1", "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = list(sqlite_utils.Database(db).query(
        "select template, op, dtype, layout, ok, emulated, emulation_ok, max_abs_err"
        " from compile_catalog"))
    assert [(r["template"], r["op"], r["dtype"], r["layout"], r["ok"], r["emulated"],
             r["emulation_ok"]) for r in rows] == [
        ("gemm_tiny", "mm", "bf16", "nt", 1, 1, 1)], rows
    (ranked,) = rank([ONLY], model_shape(_mm(), None), arch="gfx950", template="gemm_tiny",
                     op="mm", dtype="bf16", layout="nt", catalog=db)
    assert ranked.prediction is not None and ranked.prediction.us > 0


@pytest.mark.slow
def test_a_registered_template_is_a_choice_of_a_real_compile(tiny, monkeypatch, tmp_path: Path
                                                             ) -> None:
    """``torch.compile(mode="max-autotune")`` on this CPU with FlyDSL offered through its
    runtime into the emulator (the harness of test_autotune_through_runtime.py): the
    selection's FlyDSL choices are the dense template's and the registered one's, each
    built, launched, validated against float64, benchmarked and recorded under its own
    template."""
    import torch
    from torch._inductor.utils import fresh_cache

    import inductor_flydsl
    from tests.flydsl.test_autotune_through_runtime import offered_through_runtime

    monkeypatch.setenv("INDUCTOR_FLYDSL_CANDIDATES", "1")
    a = torch.randn(32, 256, dtype=torch.bfloat16)
    w = torch.randn(64, 256, dtype=torch.bfloat16)

    def fn(a, w):  # operands made in the graph: Inductor treats CPU inputs as unaligned
        return torch.mm(a.relu(), w.relu().t())

    with offered_through_runtime(monkeypatch, tmp_path) as (db, runner, _):
        with fresh_cache():
            torch._dynamo.reset()
            y = torch.compile(fn, mode="max-autotune")(a, w)
        torch.testing.assert_close(y, fn(a, w))
        assert runner.runtime.emulation.errors == []
        inductor_flydsl.disable()
        rows = list(sqlite_utils.Database(db).query(
            "select status, time_ms, config from results where backend = 'flydsl'"))
    templates = sorted(json.loads(r["config"])["template"] for r in rows)
    assert templates == ["gemm_dense", "gemm_tiny"], rows
    assert all(r["status"] == "ok" and r["time_ms"] > 0 for r in rows), rows


def test_a_template_package_that_does_not_load_is_said_once_and_skipped(monkeypatch) -> None:
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    monkeypatch.setenv("INDUCTOR_FLYDSL_TEMPLATE_PACKAGES", "tests.no_such_template_package")
    with pytest.warns(TuningDBWarning, match="no_such_template_package.*not loaded"):
        assert registry.names()[:3] == BUILTIN
    assert "gemm_tiny" not in registry.names()
