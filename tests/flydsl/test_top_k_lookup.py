"""Top-k preselection inside a real max-autotune compile on CPU: with no record only the
model's best ``INDUCTOR_FLYDSL_TOP_K`` FlyDSL configs are benchmarked and recorded; the
next compile is served in full; a record made with every config (top-k 0, as the offline
sweep makes them) is still served whole under the default top-k.

As in test_inductor_integration_cpu.py, the provider's runtime check is replaced so
FlyDSL candidates are offered on this CPU machine (their launch is refused and recorded
``failed``; ATen wins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils
import torch
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.flydsl_backend import prebuild, provider
from inductor_flydsl.flydsl_backend.eligibility import offered_configs
from inductor_flydsl.problem import synthetic_problem

M, N, K = 64, 128, 512


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(provider, "runtime_target", lambda device: ("gfx950", []))
    monkeypatch.setenv(prebuild.ENV_BUILD_JOBS, "0")
    monkeypatch.setenv("INDUCTOR_FLYDSL_SHIPPED", "0")
    import torch._inductor.config as inductor_config

    with inductor_config.patch(max_autotune_gemm_backends="ATEN,FLYDSL"):
        yield tmp_path / "t.db"
    inductor_flydsl.disable()
    torch._dynamo.reset()


def _fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a.relu(), b.relu().t())  # operands made in the graph: aligned


COUNTERS = ("hits", "partial_hits", "misses", "benchmarked")


def _compile_once(db: Path) -> dict:
    """The process counters this compile moved (``stats()`` counts for the process)."""
    before = inductor_flydsl.stats().as_dict()
    inductor_flydsl.enable(db, "readwrite")
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16)
    with fresh_cache():
        torch._dynamo.reset()
        y = torch.compile(_fn, mode="max-autotune")(a, b)
    torch.testing.assert_close(y, _fn(a, b))
    after = inductor_flydsl.stats().as_dict()
    inductor_flydsl.disable()
    return {name: after[name] - before[name] for name in COUNTERS}


def _flydsl_configs(db: Path) -> list[dict]:
    rows = sqlite_utils.Database(db).query(
        "select config from results where backend = 'flydsl' order by candidate_id")
    return [{k: v for k, v in json.loads(r["config"]).items() if k != "template"}
            for r in rows]


def _plain(configs: list) -> list[dict]:
    return [c.to_json() for c in configs]


def _key(config: dict) -> str:
    return json.dumps({k: v for k, v in config.items() if k != "template_hash"},
                      sort_keys=True)


def test_a_miss_benchmarks_the_models_top_k_and_the_next_compile_is_served(
        offered: Path) -> None:
    problem = synthetic_problem("mm", M, N, K, dtype="bfloat16", layout="nt")
    configs, k = offered_configs(problem, "gfx950")
    assert k == 4 and len(configs) > k  # the pruned list follows the model's four
    first = _compile_once(offered)
    assert first["misses"] == 1
    recorded = _flydsl_configs(offered)
    assert sorted(map(_key, recorded)) == sorted(map(_key, _plain(configs[:k])))
    second = _compile_once(offered)
    assert (second["hits"], second["partial_hits"], second["benchmarked"]) == (1, 0, 0)
    assert sorted(map(_key, _flydsl_configs(offered))) == sorted(map(_key, recorded))


def test_a_record_of_every_config_is_served_whole_under_top_k(
        offered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOP_K", "0")  # as the offline sweep records
    problem = synthetic_problem("mm", M, N, K, dtype="bfloat16", layout="nt")
    every, k = offered_configs(problem, "gfx950")
    assert k == 0
    _compile_once(offered)
    assert len(_flydsl_configs(offered)) == len(every)
    monkeypatch.delenv("INDUCTOR_FLYDSL_TOP_K")
    served = _compile_once(offered)
    assert (served["hits"], served["partial_hits"], served["benchmarked"]) == (1, 0, 0)
