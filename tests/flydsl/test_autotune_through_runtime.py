"""A real ``torch.compile(mode="max-autotune")`` on this CPU machine in which FlyDSL
candidates are offered, built by the build workers, launched through FlyDSL's runtime
into the ISA emulator (over the stand-in HIP library), validated against float64,
benchmarked by Inductor and recorded, with ATen's choice next to them.

Replaced for this test, and nothing else: the provider's runtime check (so candidates are
offered for CPU tensors) and the kernel runner's device runtime (tests/fake_hip: CPU
torch has no GPU device, stream or arch). Where CPU torch stops: Inductor times the
candidates with its CPU benchmarker (wall time of the emulated launches), not with GPU
events, and no ``MultiTemplateBuffer`` epilogue decision is taken (those are GPU-only
paths of Inductor).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils
import torch
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.flydsl_backend import kernel_runner, prebuild, provider
from tests.fake_hip.harness import FakeHipRuntime, fake_hip
from tests.flydsl.test_launch_runtime import pytestmark as needs_llvm

pytestmark = [needs_llvm, pytest.mark.slow, pytest.mark.both_releases]


@pytest.fixture
def autotuned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    hip = fake_hip(tmp_path / "fake-hip")
    monkeypatch.setattr(provider, "runtime_target", lambda device: ("gfx950", []))
    monkeypatch.setenv("INDUCTOR_FLYDSL_CANDIDATES", "2")
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(tmp_path / "flydsl"))
    db = tmp_path / "t.db"
    import torch._inductor.config as inductor_config

    with kernel_runner.use_runtime(FakeHipRuntime(hip, emulate=True)) as runner:
        inductor_flydsl.enable(db, "readwrite")
        try:
            with inductor_config.patch(max_autotune_gemm_backends="ATEN,FLYDSL"):
                yield db, runner, hip
        finally:
            inductor_flydsl.disable()
            torch._dynamo.reset()
            prebuild.shutdown_pool()
            prebuild.forget_builds()


def test_flydsl_candidates_run_in_the_emulator_inside_max_autotune(autotuned) -> None:
    db, runner, hip = autotuned
    a = torch.randn(32, 256, dtype=torch.bfloat16)
    w = torch.randn(64, 256, dtype=torch.bfloat16)

    def fn(a, w):  # operands made in the graph: Inductor treats CPU inputs as unaligned
        return torch.mm(a.relu(), w.relu().t())

    with fresh_cache():
        torch._dynamo.reset()
        y = torch.compile(fn, mode="max-autotune")(a, w)
    torch.testing.assert_close(y, fn(a, w))
    emulation = runner.runtime.emulation
    assert emulation.errors == [] and emulation.runs >= 2  # validated, then benchmarked
    assert hip.launch_count() == emulation.runs and runner.loads >= 1
    inductor_flydsl.disable()
    rows = list(sqlite_utils.Database(db).query(
        "select backend, status, time_ms, config, error from results"))
    flydsl = [r for r in rows if r["backend"] == "flydsl"]
    assert flydsl and all(r["status"] == "ok" and r["time_ms"] > 0 for r in flydsl), rows
    assert {json.loads(r["config"])["template"] for r in flydsl} == {"gemm_dense"}
    assert any(r["backend"] == "aten" for r in rows)
