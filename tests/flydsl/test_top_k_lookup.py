"""Top-k preselection inside a real max-autotune compile on CPU: with no record only the
model's best ``INDUCTOR_FLYDSL_TOP_K`` FlyDSL configs are benchmarked and recorded; the
next compile is served in full; a record made with every config (top-k 0, as the offline
sweep makes them) is still served whole under the default top-k.

As in test_inductor_integration_cpu.py, the provider's runtime check is replaced so
FlyDSL candidates are offered on this CPU machine (their launch is refused and recorded
``failed``; ATen wins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils
import torch
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.settings import DEFAULT_CANDIDATES
from tests.conftest import REPO

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


def _key(config: dict) -> str:
    return json.dumps({k: v for k, v in config.items() if k != "template_hash"},
                      sort_keys=True)


def _predicted_times() -> dict[str, float]:
    """Every eligible config's predicted time on gfx950 (MI355X) for the shape, as the
    ``predict`` command reports the model's figures (its own ``offered`` column, which
    comes from the selection under test, is not read)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "predict", "--op", "mm",
                           "--shape", f"{M}x{N}x{K}", "--arch", "gfx950", "--json"],
                          env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=300, check=True)
    rows = json.loads(proc.stdout)["predictions"]
    return {_key(r["config"]): r.get("predicted_us", float("inf")) for r in rows}


def test_a_miss_benchmarks_the_models_top_k_and_the_next_compile_is_served(
        offered: Path) -> None:
    """The expected four come from the model's predicted times (``predict``), not from
    the selection code: the four fastest, ties at the fourth place either way."""
    times = _predicted_times()
    k = 4  # INDUCTOR_FLYDSL_TOP_K's default
    fourth = sorted(times.values())[k - 1]
    assert len(times) > k and fourth < float("inf")
    first = _compile_once(offered)
    assert first["misses"] == 1
    recorded = _flydsl_configs(offered)
    keys = set(map(_key, recorded))
    assert len(keys) == len(recorded) == k, recorded
    assert {c for c, us in times.items() if us < fourth} <= keys, (times, keys)
    assert all(times.get(c, float("inf")) <= fourth for c in keys), (times, keys)
    second = _compile_once(offered)
    assert (second["hits"], second["partial_hits"], second["benchmarked"]) == (1, 0, 0)
    assert sorted(map(_key, _flydsl_configs(offered))) == sorted(map(_key, recorded))


def test_a_record_of_every_config_is_served_whole_under_top_k(
        offered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Top-k 0 offers the pruned list: INDUCTOR_FLYDSL_CANDIDATES' default of the configs
    eligible for the shape (those ``predict`` lists)."""
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOP_K", "0")  # as the offline sweep records
    eligible = _predicted_times()
    _compile_once(offered)
    recorded = {_key(c) for c in _flydsl_configs(offered)}
    assert len(recorded) == min(DEFAULT_CANDIDATES, len(eligible)) > 4
    assert recorded <= set(eligible)
    monkeypatch.delenv("INDUCTOR_FLYDSL_TOP_K")
    served = _compile_once(offered)
    assert (served["hits"], served["partial_hits"], served["benchmarked"]) == (1, 0, 0)
