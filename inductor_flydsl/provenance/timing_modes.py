"""How a GEMM choice is timed, and so what a recorded or predicted time means.

The compiled graph runs a kernel one of two ways on a GPU, and each choice of a selection
is timed the way the graph will run it (issue 42):

- ``graph``: the compile uses CUDA/HIP graphs (cudagraph trees, on in
  ``mode="max-autotune"``): each choice is captured once and its replay timed, so no host
  dispatch is inside the events; back-to-back launches cost the GPU's launch gap only.
- ``eager``: the graph launches each kernel from the host: one call between two events
  after a cache-clearing fill, host dispatch included (Inductor's default GPU timing).
- ``cpu``: a CPU compile; Inductor's CPU benchmarker (wall time of repeated calls).

The DB records the mode of every result and serves a timing only to a compile of the same
mode; the performance model says which mode it predicts.
"""

from __future__ import annotations

from typing import Literal

TimingMode = Literal["graph", "eager", "cpu"]
GRAPH: TimingMode = "graph"
EAGER: TimingMode = "eager"
CPU: TimingMode = "cpu"
TIMING_MODES: tuple[TimingMode, ...] = (GRAPH, EAGER, CPU)
GPU_TIMING_MODES: tuple[TimingMode, ...] = (GRAPH, EAGER)  # what a GPU user chooses between


def check_timing_mode(value: object) -> TimingMode:
    """``value`` as a timing mode, or a ValueError naming the accepted ones."""
    if value not in TIMING_MODES:
        raise ValueError(f"timing mode {value!r} is not one of {', '.join(TIMING_MODES)}")
    return value  # type: ignore[return-value]
