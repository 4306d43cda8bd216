"""FlyDSL under cudagraph trees and timed the way the graph runs (issue 42), on a real
ROCm GPU (MI300/MI350): skipped elsewhere (marked ``rocm``). The checks are those of
``scripts/validate_rocm.py``'s graph section (``scripts/rocm_graphs.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.rocm
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))


@pytest.mark.parametrize("case", ["plain", "split_k", "epilogue"])
def test_flydsl_wins_inside_cudagraph_trees(case: str) -> None:
    import torch
    from rocm_graphs import cudagraph_case

    row = cudagraph_case(case, torch.device("cuda", 0), print)
    assert row["ok"], row


@pytest.mark.parametrize("shape", [(8, 4096, 4096), (32, 1024, 8192), (64, 14336, 4096)])
def test_recorded_time_is_the_kernel_time(shape: tuple[int, int, int]) -> None:
    import torch
    from rocm_graphs import TOLERANCE_US, timing_case

    row = timing_case(shape, torch.device("cuda", 0), print)
    assert row["ok"], f"recorded vs profiler kernel time off by more than {TOLERANCE_US} us: {row}"
