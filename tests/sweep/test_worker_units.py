"""In-process pieces of the worker and runner: operand layouts, GPU slot environments,
item selection for --resume and --shard."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import torch

from inductor_flydsl.sweep.items import SweepItem, shard
from inductor_flydsl.sweep.runner import (
    SweepError,
    SweepOptions,
    gpu_slot,
    run_sweep,
    select_items,
)
from inductor_flydsl.sweep.worker import build, compile_mode


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_build_gives_the_item_layout(op: str, layout: str) -> None:
    item = SweepItem.from_values({"op": op, "m": 6, "n": 10, "k": 4, "dtype": "float32",
                                  "layout": layout, "batch": 3 if op == "bmm" else 1})
    fn, inputs = build(item, "cpu")
    a, b = inputs[-2:]
    assert a.shape[-2:] == (6, 4) and b.shape[-2:] == (4, 10)
    assert (a.stride(-1) == 1) == (layout[0] == "n")
    assert (b.stride(-1) == 1) == (layout[1] == "n")
    out = fn(*inputs)
    assert out.shape == ((3, 6, 10) if op == "bmm" else (6, 10))


def test_build_linear_is_a_bias_free_nn_linear() -> None:
    item = SweepItem.from_values({"op": "linear", "m": 5, "n": 7, "k": 3, "dtype": "float32"})
    module, (x,) = build(item, "cpu")
    assert isinstance(module, torch.nn.Linear) and module.bias is None
    assert module.weight.shape == (7, 3) and x.shape == (5, 3)


def test_gpu_slot_environment() -> None:
    assert dict(gpu_slot(1, rocm=False, environ={}).env) == {"CUDA_VISIBLE_DEVICES": "1"}
    # Indexes are this process's own: GPU 1 of CUDA_VISIBLE_DEVICES=4,6 is physical 6.
    slot = gpu_slot(1, rocm=False, environ={"CUDA_VISIBLE_DEVICES": "4,6"})
    assert slot.environ({"CUDA_VISIBLE_DEVICES": "4,6", "X": "y"}) == {
        "CUDA_VISIBLE_DEVICES": "6", "X": "y"}
    rocm = gpu_slot(0, rocm=True, environ={"HIP_VISIBLE_DEVICES": "2,3"})
    assert rocm.environ({"HIP_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}) == {
        "HIP_VISIBLE_DEVICES": "2"}
    with pytest.raises(SweepError, match="not visible"):
        gpu_slot(2, rocm=False, environ={"CUDA_VISIBLE_DEVICES": "0,1"})


def test_select_items_resume_and_shard() -> None:
    items = [SweepItem.from_values({"op": "mm", "m": m, "n": 8, "k": 8}) for m in range(1, 9)]
    previous = {items[0].item_id: "done", items[1].item_id: "failed",
                items[2].item_id: "skipped", items[3].item_id: "interrupted"}
    todo, finished = select_items(items, shard_spec=None, previous=previous, resume=False,
                                  retry_failed=False)
    assert todo == items and finished == 0
    todo, finished = select_items(items, shard_spec=None, previous=previous, resume=True,
                                  retry_failed=False)
    assert todo == items[3:] and finished == 3
    todo, _ = select_items(items, shard_spec=None, previous=previous, resume=True,
                           retry_failed=True)
    assert todo == [items[1], *items[3:]]
    mine = {i.item_id for i in shard(items, 2, 3)}
    todo, _ = select_items(items, shard_spec=(2, 3), previous={}, resume=True,
                           retry_failed=False)
    assert [i.item_id for i in todo] == [i.item_id for i in items if i.item_id in mine]


def test_plan_batches_keeps_gemms_apart_and_dynamic_items_alone() -> None:
    from inductor_flydsl.sweep.batch import match_key, plan_batches

    def item(m: int, **extra: object) -> SweepItem:
        return SweepItem.from_values({"op": "linear", "m": m, "n": 32, "k": 64,
                                      "dtype": "float32", **extra})

    mm_nn = SweepItem.from_values({"op": "mm", "m": 8, "n": 32, "k": 64, "dtype": "float32",
                                   "layout": "nn"})
    items = [item(8), item(16), mm_nn, item(24, dynamic_m=True), item(32), item(40),
             item(48)]
    batches = plan_batches(items, size=2)
    assert [[i.m for i in b] for b in batches] == [[8, 16], [8], [24], [32, 40], [48]]
    assert all(len({match_key(i) for i in b}) == len(b) for b in batches)
    assert [i for b in batches for i in b] == items  # order kept, nothing lost
    assert [len(b) for b in plan_batches(items, size=1)] == [1] * len(items)


def test_shard_from_slurm_and_torchrun_environment() -> None:
    from pathlib import Path

    from inductor_flydsl.sweep.items import ItemError
    from inductor_flydsl.sweep.sharding import shard_db_path, shard_from_environment

    slurm = shard_from_environment({"SLURM_ARRAY_TASK_ID": "0",
                                    "SLURM_ARRAY_TASK_COUNT": "4"})
    assert (slurm.k, slurm.n, slurm.source) == (1, 4, "slurm")
    offset = shard_from_environment({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5",
                                     "SLURM_ARRAY_TASK_COUNT": "3", "RANK": "0",
                                     "WORLD_SIZE": "9"})
    assert (offset.k, offset.n) == (3, 3)  # SLURM first, ids need not start at 0
    torchrun = shard_from_environment({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    assert (torchrun.k, torchrun.n, torchrun.local_rank) == (6, 8, 1)
    for bad, message in [({}, "no scheduler variables"),
                         ({"SLURM_ARRAY_TASK_ID": "1"}, "must both be set"),
                         ({"RANK": "x", "WORLD_SIZE": "2"}, "not an integer"),
                         ({"RANK": "2", "WORLD_SIZE": "2"}, "out of range")]:
        with pytest.raises(ItemError, match=message):
            shard_from_environment(bad)
    assert shard_db_path(Path("/d/t-{shard}.db"), (2, 3)) == Path("/d/t-2.db")
    assert shard_db_path(Path("/d/t.db"), None) == Path("/d/t.db")
    with pytest.raises(ItemError, match="needs --shard"):
        shard_db_path(Path("/d/t-{shard}.db"), None)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_benchmarks_stop_the_background_compiler_and_resume_it() -> None:
    """The persistent worker's warm-up compiles in the background (the precompiled
    header); while Inductor's CPU benchmarker times a candidate, that compiler is
    stopped (SIGSTOP), and it runs on afterwards. Here a real g++ waits on its input in a
    registered background thread; the benchmarker is the real, wrapped one."""
    from torch._inductor.runtime.benchmarking import benchmarker

    from inductor_flydsl.sweep import warm_up

    assert warm_up._gate_cpu_benchmarks()
    started = threading.Event()
    holder: dict = {}

    def compile_in_background() -> None:
        proc = subprocess.Popen(["g++", "-x", "c++", "-fsyntax-only", "-"],
                                stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        holder["proc"] = proc
        started.set()
        proc.wait()

    thread = threading.Thread(target=compile_in_background, daemon=True)
    thread.start()
    warm_up._pausable.append(thread)
    assert started.wait(30)
    proc = holder["proc"]

    def names() -> list[str]:
        found = []
        for pid in warm_up._compiler_descendants():
            with open(f"/proc/{pid}/comm") as f:
                found.append(f.read().strip())
        return found

    # g++ has started its cc1plus (past the vfork, during which g++ cannot take a stop)
    deadline = time.monotonic() + 30
    while "cc1plus" not in names() and time.monotonic() < deadline:
        time.sleep(0.01)
    seen = {}
    try:
        def timed() -> None:  # g++ and the cc1plus it runs; one in disk sleep (D)
            deadline = time.monotonic() + 10  # takes the stop when it wakes
            while True:
                seen["during"] = {pid: _state(pid) for pid in warm_up._compiler_descendants()}
                if set(seen["during"].values()) == {"T"} or time.monotonic() > deadline:
                    return
                time.sleep(0.01)

        benchmarker.benchmark_cpu(timed, warmup=0, rep=1)
        seen["after"] = {pid: _state(pid) for pid in warm_up._compiler_descendants()}
    finally:
        proc.stdin.close()
        thread.join(30)
        warm_up._pausable.remove(thread)
        warm_up.finish()  # Inductor's own benchmark_cpu back (inductor/adapter/patches.py)
    assert proc.pid in seen["during"] and set(seen["during"]) == set(seen["after"]), seen
    assert set(seen["during"].values()) == {"T"}, seen  # stopped while timing
    assert "T" not in seen["after"].values(), seen  # running again
    assert proc.returncode == 0


FIRST_VALID_CHILD = r"""
import json, os
from torch._inductor import config, cpu_vec_isa
from inductor_flydsl.sweep import warm_up

builds = []
check_build = cpu_vec_isa.VecISA.check_build
def counting(self, code):
    builds.append(str(self))
    return check_build(self, code)
cpu_vec_isa.VecISA.check_build = counting

original = cpu_vec_isa.valid_vec_isa_list
warm_up._first_valid_isa_only()
picked = str(cpu_vec_isa.pick_vec_isa())
fast_builds = len(builds)
full = original()  # Inductor's own: every ISA the CPU reports, each test-built
os.environ["ATEN_CPU_CAPABILITY"] = "avx2"
by_capability = str(cpu_vec_isa.pick_vec_isa())
del os.environ["ATEN_CPU_CAPABILITY"]
config.cpp.simdlen = 256
by_simdlen = str(cpu_vec_isa.pick_vec_isa())
print(json.dumps({"picked": picked, "full": [str(i) for i in full],
                  "fast_built": sorted(set(builds[:fast_builds])),
                  "full_built": sorted(set(builds[fast_builds:])),
                  "by_capability": by_capability, "by_simdlen": by_simdlen,
                  "installed": cpu_vec_isa.valid_vec_isa_list is not original}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux x86-64 only")
def test_worker_vec_isa_pick_probes_only_the_isa_inductor_picks(tmp_path) -> None:
    """The persistent worker's vector-ISA probe stops at the first valid ISA: the pick is
    Inductor's own (the first of its full, every-ISA-test-built list), with fewer test
    builds when the CPU reports more than one ISA (the others are built only by the
    full list afterwards); with ATEN_CPU_CAPABILITY or
    cpp.simdlen set, Inductor's full list decides, as before. Real g++ test builds, in a
    child process with its own Inductor cache."""
    import json
    import os
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the worker keeps Inductor's own list off x86-64")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_cache")}
    env.pop("ATEN_CPU_CAPABILITY", None)
    proc = subprocess.run([sys.executable, "-c", FIRST_VALID_CHILD], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["installed"]
    if not got["full"]:
        assert got["picked"] == "INVALID_VEC_ISA"
        return
    assert got["picked"] == got["full"][0]
    assert got["fast_built"] == [got["picked"]], got  # only the picked ISA was test-built
    assert set(got["full"][1:]) <= set(got["full_built"]), got  # the rest: by Inductor's
    avx2 = [isa for isa in got["full"] if "avx2" in isa]
    assert got["by_capability"] == (avx2[0] if avx2 else got["full"][0])
    width256 = [isa for isa in got["full"] if isa == "avx2"]
    assert got["by_simdlen"] == (width256[0] if width256 else "INVALID_VEC_ISA")


def test_a_bad_setting_stops_the_sweep_before_it_starts(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers enable the plugin strictly: a bad value they would see ends the sweep at
    once, naming it, before the DB is opened; one the runner keeps from them does not."""
    item = SweepItem.from_values({"op": "mm", "m": 8, "n": 8, "k": 8})
    options = SweepOptions(db=tmp_path / "sweep.db")
    monkeypatch.setenv("INDUCTOR_FLYDSL_REPEATS", "0")
    monkeypatch.setenv("INDUCTOR_FLYDSL_ON_BUSY", "panic")
    with pytest.raises(SweepError) as caught:
        run_sweep([item], options, [], None)  # type: ignore[arg-type]
    assert "INDUCTOR_FLYDSL_REPEATS='0'" in str(caught.value)
    assert "INDUCTOR_FLYDSL_ON_BUSY='panic'" in str(caught.value)
    assert not (tmp_path / "sweep.db").exists()


def test_a_sweep_compiles_in_the_mode_whose_timing_it_records() -> None:
    """On a GPU the sweep records graph-replay timings by default (compiled as max-autotune,
    served to max-autotune compiles) and eager ones with --timing eager; a CPU has no
    graphs."""
    assert compile_mode("cuda", "graph") == "max-autotune"
    assert compile_mode("cuda", "eager") == "max-autotune-no-cudagraphs"
    assert compile_mode("cpu", "eager") == compile_mode("cpu", "graph") == "max-autotune"
    with pytest.raises(ValueError, match="not one of graph, eager"):
        compile_mode("cuda", "fast")
