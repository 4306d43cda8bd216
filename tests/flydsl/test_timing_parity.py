"""Every choice of a FlyDSL selection is timed the way the compiled graph will run it
(issue 42), seen from Inductor's own benchmark paths in a real
``torch.compile(mode="max-autotune")`` on this CPU machine:

- ``mode="max-autotune"`` (``triton.cudagraphs`` on: the graph will run under CUDA/HIP
  graphs): ATen's choice and the FlyDSL candidates all go through
  ``benchmarker.benchmark_gpu_with_cuda_graph`` (capture once, time the replay), none
  through the eager single-call path; the DB key says ``timing=graph``;
- ``mode="max-autotune-no-cudagraphs"``: all of them through Inductor's default timing
  (on CPU ``benchmark_cpu``; on a GPU ``benchmark_gpu``, host dispatch included), none
  through the graph path; the key has no timing attribute (as every earlier record);
- a record of one mode is never served to a compile of the other; of the same mode it is.

Replaced here, and nothing of Inductor's decisions: the provider's runtime check (so
FlyDSL candidates are offered for CPU tensors), the kernel runner's device runtime (the
stand-in HIP library, launches run in the ISA emulator), and, since CPU torch has no
CUDA graphs, what ``benchmark_gpu_with_cuda_graph`` does once Inductor has chosen it:
the stand-in runs the callable once under the stand-in HIP library's capture state (the
capture) and times further calls with Inductor's CPU benchmarker (the replays).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import sqlite_utils
import torch
from torch._inductor.runtime.benchmarking import benchmarker
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from tests.flydsl.test_autotune_through_runtime import offered_through_runtime
from tests.flydsl.test_launch_runtime import pytestmark as needs_llvm

pytestmark = [needs_llvm, pytest.mark.slow]


def _kind(fn) -> str:
    """Which choice a benchmarked callable runs: ``aten`` or ``flydsl``."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__name__", "") or repr(target)
    text = f"{name} {target!r}"
    return "flydsl" if "inductor_flydsl" in text else "aten" if "mm" in text else text


class BenchmarkPaths:
    """Records which of Inductor's benchmark paths each benchmarked callable took."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hip) -> None:
        self.graph: list[str] = []
        self.eager: list[str] = []
        self._inside_graph = False
        self.hip = hip
        original_cpu = benchmarker.benchmark_cpu

        def benchmark_cpu(fn, *args, **kwargs):
            if not self._inside_graph:
                self.eager.append(_kind(fn))
            return original_cpu(fn, *args, **kwargs)

        def benchmark_gpu_with_cuda_graph(fn, **kwargs):
            self.graph.append(_kind(fn))
            self._inside_graph = True
            try:
                with hip.capturing():  # the capture: kernels launched now are pinned
                    fn()
                return original_cpu(fn)  # the replays
            finally:
                self._inside_graph = False

        monkeypatch.setattr(benchmarker, "benchmark_cpu", benchmark_cpu)
        monkeypatch.setattr(benchmarker, "benchmark_gpu_with_cuda_graph",
                            benchmark_gpu_with_cuda_graph)

    def clear(self) -> None:
        self.graph.clear()
        self.eager.clear()


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("INDUCTOR_FLYDSL_CANDIDATES", "1")
    monkeypatch.setenv("INDUCTOR_FLYDSL_REPEATS", "1")
    with offered_through_runtime(monkeypatch, tmp_path, graphs=True) as (db, runner, hip):
        yield db, runner, BenchmarkPaths(monkeypatch, hip)


def _fn(a, w):  # operands made in the graph: Inductor treats CPU inputs as unaligned
    return torch.mm(a.relu(), w.relu().t())


def _compile(mode: str) -> None:
    a = torch.randn(32, 256, dtype=torch.bfloat16)
    w = torch.randn(64, 256, dtype=torch.bfloat16)
    with fresh_cache():
        torch._dynamo.reset()
        y = torch.compile(_fn, mode=mode)(a, w)
    torch.testing.assert_close(y, _fn(a, w))


def _problems(db: Path) -> list[dict]:
    return [json.loads(r["spec"]).get("attrs", {}) for r in
            sqlite_utils.Database(db).query("select spec from problems where op = 'mm'")]


def test_each_choice_is_timed_the_way_the_graph_runs_it(offered) -> None:
    db, runner, paths = offered
    before = inductor_flydsl.stats()  # the process's counters: earlier tests' included

    def delta(name: str) -> int:
        return inductor_flydsl.stats()[name] - before[name]

    _compile("max-autotune")  # the graph will run under CUDA/HIP graphs
    assert "flydsl" in paths.graph and "aten" in paths.graph, paths.graph
    assert paths.eager == [], paths.eager
    assert _problems(db) == [{"timing": "graph"}]
    # the kernels launched under the benchmark's captures were pinned only while those
    # graphs lived: the autotune over, none is (issue 50; cudagraph trees' pins stay)
    assert runner.pinned() == 0 and runner.cached() >= 1
    assert delta("misses") == 1 and delta("benchmarked") == 1, inductor_flydsl.stats()

    paths.clear()
    _compile("max-autotune-no-cudagraphs")  # each kernel launched from the host
    assert "flydsl" in paths.eager and "aten" in paths.eager, paths.eager
    assert paths.graph == [], paths.graph  # the graph-timed record is not served here
    assert sorted(map(json.dumps, _problems(db))) == sorted(
        map(json.dumps, [{"timing": "graph"}, {}]))
    assert delta("misses") == 2

    paths.clear()
    _compile("max-autotune")  # same mode again: served, nothing benchmarked
    assert paths.graph == [] and paths.eager == []
    assert delta("hits") == 1
    assert runner.runtime.emulation.errors == []
