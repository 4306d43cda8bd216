"""Split-K arrival counters inside cudagraph trees after a DB hit (issue 50), on a real ROCm
GPU (MI300/MI350): skipped elsewhere (marked ``rocm``).

A FlyDSL config that reduces its split-K partials inside the launch keeps one int32
counter buffer per (device, raw stream). After a DB hit (or an FX-cache hit) its first
use is inside cudagraph trees' warm-up, whose allocations go to the graph's private pool:
a buffer made there and kept across calls would be an untracked block of that pool
(``check_memory_pool`` fails the first forward). The runtime makes it on a stream of the
plugin's own instead. This compiles twice: the first records (FlyDSL's in-launch split-K
config steered to win), the second is served from the DB with the counters forgotten (as
in a new process), under ``slow_path_cudagraph_asserts``, and runs three times against
eager. The CPU half (one buffer per stream, none made inside a capture) is
``tests/flydsl/test_launch_runtime.py::test_split_k_counters_one_per_stream_made_outside_graphs``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.rocm


def _steer_to_in_launch_split_k() -> Callable[[], None]:
    """Every choice but FlyDSL's in-launch split-K configs timed 1e6 times slower (as
    PyTorch's own tests steer theirs); returns the undo."""
    from torch._inductor import select_algorithm

    original = select_algorithm.AlgorithmSelectorCache.lookup

    def pick(choice: Any) -> bool:
        state = getattr(choice, "inductor_flydsl", None)
        return (state is not None and state.config.get("split_k", 1) > 1
                and bool(state.config.get("reduce_in_launch", 0)))

    def lookup(self, choices, name, key, benchmark, hint_override=None):
        timings = original(self, choices, name, key, benchmark, hint_override)
        return {c: t if pick(c) else t * 1e6 for c, t in timings.items()}

    select_algorithm.AlgorithmSelectorCache.lookup = lookup
    return lambda: setattr(select_algorithm.AlgorithmSelectorCache, "lookup", original)


def test_in_launch_split_k_after_a_db_hit_under_cudagraph_trees(tmp_path: Path) -> None:
    import torch
    from torch._inductor import config
    from torch._inductor.utils import fresh_cache

    import inductor_flydsl
    from inductor_flydsl.template_loader import load_template

    counters = load_template("gemm_dense")._COUNTERS
    device = torch.device("cuda", 0)
    m, n, k = 16, 1024, 8192  # a decode M, a long K: split-K's home

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w.t()

    inputs = [(torch.randn(m, k, device=device, dtype=torch.bfloat16),
               torch.randn(n, k, device=device, dtype=torch.bfloat16)) for _ in range(3)]
    db = tmp_path / "t.db"
    undo = _steer_to_in_launch_split_k()
    try:
        with fresh_cache():
            inductor_flydsl.enable(db, "readwrite")
            torch._dynamo.reset()
            torch.compile(fn, mode="max-autotune")(*inputs[0])
        assert inductor_flydsl.stats()["recorded"] >= 1
    finally:
        undo()
    counters.clear()  # as in a new process
    before = inductor_flydsl.stats().as_dict()
    with fresh_cache(), config.patch({"triton.slow_path_cudagraph_asserts": True}):
        torch._dynamo.reset()
        compiled = torch.compile(fn, mode="max-autotune")
        for x, w in inputs:
            out = compiled(x, w)
            torch.testing.assert_close(out.float(), fn(x, w).float(), rtol=2e-2, atol=2e-1)
    after = inductor_flydsl.stats().as_dict()
    inductor_flydsl.disable()
    assert after["hits"] > before["hits"]  # served from the DB, nothing benchmarked
    assert counters, "the served in-launch split-K config made no counters"
    assert len({key[1] for key in counters}) == len(counters)  # one per stream
