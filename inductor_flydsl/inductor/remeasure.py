"""Re-measure an autotune's finalists to learn the spread of their timings.

Inductor's feedback saver receives one time per candidate and no spread (its CPU
benchmarker returns the median of the calls made in 100 ms; its GPU one a single
statistic). So the winner and the runner-up are benchmarked ``repeats - 1`` more rounds
through Inductor's own in-process path (``AlgorithmSelectorCache.
benchmark_in_current_process``: same inputs, same benchmarker, same choice callers), while
``noise.watch_machine`` records what other processes did meanwhile. Only two candidates
are re-measured: confidence is about whether the winner beats the runner-up, and a full
re-run would double the autotune time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from torch._inductor import select_algorithm

from ..db.store import CandidateResult
from ..noise import Confidence, MachineLoad, Spread, decide, repeats_setting, watch_machine

log = logging.getLogger("inductor_flydsl")


def _finalists(timings: dict[Any, float]) -> list[Any]:
    ok = [(t, str(getattr(c, "name", "")), c) for c, t in timings.items()
          if isinstance(t, int | float) and math.isfinite(t)]
    ok.sort(key=lambda x: (x[0], x[1]))
    return [c for _, _, c in ok[:2]]


def _gpu_index(layout: Any) -> int | None:
    device = getattr(layout, "device", None)
    if device is None or device.type != "cuda":
        return None
    import torch

    return device.index if device.index is not None else torch.cuda.current_device()


def remeasure(timings: dict[Any, float], input_nodes: Sequence[Any], layout: Any,
              input_gen_fns: dict[int, Callable[[Any], Any]] | None = None,
              ) -> tuple[dict[Any, Spread], MachineLoad | None]:
    """Samples of the two fastest candidates: Inductor's own time plus re-measured rounds.

    ``input_gen_fns`` are the selection's own input generators (a CPU qlinear's packed
    weight, scales and zero-points are real constants; random stand-ins crash oneDNN).
    The thunk Inductor hands feedback savers is not used: it forces profiler-based
    timing, which synchronizes CUDA and fails on a CPU-only build."""
    finalists = _finalists(timings)
    samples: dict[Any, list[float]] = {c: [float(timings[c])] for c in finalists}
    rounds = repeats_setting() - 1
    machine = None
    if finalists and rounds > 0:
        with watch_machine(_gpu_index(layout)) as machine:
            for _ in range(rounds):
                again = select_algorithm.AlgorithmSelectorCache.benchmark_in_current_process(
                    finalists, list(input_nodes), layout, input_gen_fns)
                for choice, t in again.items():
                    samples[choice].append(float(t))
    spreads = {c: s for c, s in ((c, Spread.of(v)) for c, v in samples.items()) if s}
    return spreads, machine


def with_confidence(results: list[CandidateResult], choices: list[Any],
                    timings: dict[Any, float], input_nodes: Sequence[Any], layout: Any,
                    input_gen_fns: dict[int, Callable[[Any], Any]] | None = None,
                    ) -> tuple[list[CandidateResult], Confidence | None]:
    """``results`` (one per choice, same order) with the finalists' spread attached, and
    the selection's confidence; ``None`` (unknown) when re-measuring is turned off
    (``INDUCTOR_FLYDSL_REPEATS=1``) or failed."""
    if repeats_setting() < 2:
        return results, None
    try:
        spreads, machine = remeasure(timings, input_nodes, layout, input_gen_fns)
    except Exception as exc:  # a candidate that benchmarked once may fail again
        log.info("inductor_flydsl: re-measuring the finalists failed (%s: %s); confidence "
                 "not recorded", type(exc).__name__, exc)
        return results, None
    updated = []
    for choice, result in zip(choices, results, strict=True):
        spread = spreads.get(choice)
        updated.append(CandidateResult(**{**result.__dict__, "spread": spread})
                       if spread is not None and result.usable else result)
    ranked = sorted((r for r in updated if r.usable and r.spread is not None),
                    key=lambda r: (r.spread.median, r.candidate_id))  # type: ignore[union-attr]
    winner = ranked[0].spread if ranked else None
    runner_up = ranked[1].spread if len(ranked) > 1 else None
    confidence = decide(winner, runner_up, machine)
    log.debug("inductor_flydsl: confidence %s (%s)", confidence.level, confidence.reason)
    return updated, confidence
