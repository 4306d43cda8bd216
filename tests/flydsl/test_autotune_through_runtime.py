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

import contextlib
import json
from pathlib import Path

import pytest
import sqlite_utils
import torch
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.flydsl_backend.run import kernel_runner
from tests.fake_hip.harness import FakeHipRuntime, fake_hip
from tests.flydsl.test_launch_runtime import pytestmark as needs_llvm

pytestmark = [needs_llvm, pytest.mark.slow, pytest.mark.both_releases]


@contextlib.contextmanager
def offered_through_runtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *,
                            graphs: bool = False):
    """FlyDSL candidates offered for CPU tensors and launched into the emulator over the
    stand-in HIP library (``graphs``: the stand-in also stands for a GPU whose graphs are
    captured), the plugin recording into ``tmp_path/t.db``: ``(db, runner, hip)``."""
    hip = fake_hip(tmp_path / "fake-hip")
    monkeypatch.setattr(provider, "runtime_target", lambda device: ("gfx950", []))
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(tmp_path / "flydsl"))
    db = tmp_path / "t.db"
    import torch._inductor.config as inductor_config

    runtime = FakeHipRuntime(hip, emulate=True, graphs=graphs)
    with kernel_runner.use_runtime(runtime) as runner:
        inductor_flydsl.enable(db, "readwrite")
        try:
            with inductor_config.patch(max_autotune_gemm_backends="ATEN,FLYDSL"):
                yield db, runner, hip
        finally:
            inductor_flydsl.disable()
            torch._dynamo.reset()
            prebuild.shutdown_pool()
            prebuild.forget_builds()


@pytest.fixture
def autotuned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("INDUCTOR_FLYDSL_CANDIDATES", "2")
    with offered_through_runtime(monkeypatch, tmp_path) as offered:
        yield offered


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


def test_a_winning_fused_candidate_replaces_the_region(autotuned,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused-epilogue selection with a FlyDSL kernel winning (Inductor's own handling
    of the region made 1e6 times slower in its ``lookup``, as upstream's CPU tests steer
    their selections): the final code runs the fused FlyDSL op in the emulator, the
    region's original ops (kept in the graph for Inductor's own handling) are dead code
    Inductor drops, and the result is right."""
    from torch._inductor import select_algorithm
    from torch._inductor.utils import run_and_get_code

    original_lookup = select_algorithm.AlgorithmSelectorCache.lookup

    def slower_subgraph(self, choices, name, key, benchmark, hint_override=None):
        timings = original_lookup(self, choices, name, key, benchmark, hint_override)
        return {c: t * 1e6 if "subgraph" in type(c).__name__.lower() else t
                for c, t in timings.items()}

    monkeypatch.setattr(select_algorithm.AlgorithmSelectorCache, "lookup", slower_subgraph)
    _, runner, _ = autotuned
    a = torch.randn(32, 256, dtype=torch.bfloat16)
    w = torch.randn(64, 256, dtype=torch.bfloat16)
    bias = torch.randn(64, dtype=torch.bfloat16)

    def fn(a, w, bias):  # every operand made in the graph (CPU inputs count as unaligned)
        return torch.relu(torch.mm(a.relu(), w.relu().t()) + bias.relu())

    with fresh_cache():
        torch._dynamo.reset()
        y, code = run_and_get_code(torch.compile(fn, mode="max-autotune"), a, w, bias)
    torch.testing.assert_close(y, fn(a, w, bias), atol=2e-2, rtol=2e-2)
    text = "\n".join(code)
    stats = inductor_flydsl.stats()
    assert stats["epilogue_fusions"] >= 1, stats
    assert "inductor_flydsl_direct.gemm_epilogue_out(" in text, (stats, text[-1500:])
    # the region's own GEMM (ATen's or FlyDSL's plain kernel, whichever won it): dead
    assert "extern_kernels.mm" not in text and "inductor_flydsl_direct.mm_out" not in text
    assert runner.runtime.emulation.errors == []


def test_a_graph_loaded_from_the_cache_has_its_variants_built_before_its_first_call(
        autotuned, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42, after an FX-graph-cache hit: with FlyDSL the winner (every other choice
    1e6 times slower in the selector's lookup), a second compile of the same function in
    a process that has built nothing (its builds, compiled kernels and seen modules
    forgotten) loads the graph from the cache, and at the compile's end, before the graph
    runs, its FlyDSL variants are handed to the build pool as one batch; the first call
    then builds nothing itself and is right."""
    from torch._inductor import select_algorithm

    from inductor_flydsl.flydsl_backend.run import loaded_variants

    original_lookup = select_algorithm.AlgorithmSelectorCache.lookup

    def flydsl_wins(self, choices, name, key, benchmark, hint_override=None):
        timings = original_lookup(self, choices, name, key, benchmark, hint_override)
        return {c: t if "flydsl" in str(getattr(c, "name", "")) else t * 1e6
                for c, t in timings.items()}

    monkeypatch.setattr(select_algorithm.AlgorithmSelectorCache, "lookup", flydsl_wins)
    _, runner, hip = autotuned
    a = torch.randn(32, 256, dtype=torch.bfloat16)
    w = torch.randn(64, 256, dtype=torch.bfloat16)

    def fn(a, w):
        return torch.mm(a.relu(), w.relu().t())

    batches: list[tuple[int, int, list[int]]] = []  # (jobs, launches so far, build ids)
    start_jobs = prebuild.start_jobs

    def recording_start_jobs(jobs, **kwargs):
        launched = hip.launch_count()
        builds = start_jobs(jobs, **kwargs)
        batches.append((len(jobs), launched, [id(b) for b in builds]))
        return builds

    with fresh_cache():
        torch._dynamo.reset()
        torch.compile(fn, mode="max-autotune")(a, w)  # FlyDSL wins; the graph calls it
        # a process that built nothing yet: its builds, kernels and modules forgotten
        prebuild.forget_builds()
        runner._compiled.clear()
        runner._bound.clear()
        loaded_variants.WATCH._seen.clear()
        monkeypatch.setattr(prebuild, "start_jobs", recording_start_jobs)
        torch._dynamo.reset()  # also clears Dynamo's callbacks: the plugin puts them back
        launches = hip.launch_count()
        y = torch.compile(fn, mode="max-autotune")(a, w)  # an FX-graph-cache hit
    torch.testing.assert_close(y, fn(a, w), atol=2e-2, rtol=2e-2)
    assert batches and batches[0][:2] == (1, launches), batches  # before the first launch
    # the first launch asked for its build and got the batch's (nothing built again)
    assert [b[2] for b in batches] == [batches[0][2]] * len(batches), batches
    assert hip.launch_count() == launches + 1 and runner.runtime.emulation.errors == []
