"""Re-measure an autotune's finalists to learn how far their timings can be trusted.

The re-measure decides the confidence of a selection, never its winner: the winner is
the choice Inductor made with the timings it used. Inductor's feedback saver receives one
time per candidate and no spread (its CPU benchmarker returns the median of the calls made
in 100 ms; its GPU one a single statistic). So Inductor's choice and its runner-up are
benchmarked ``repeats - 1`` more rounds
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

from ...db.store import CandidateResult
from ...provenance.noise import (
    LOW,
    Confidence,
    MachineLoad,
    Spread,
    decide,
    repeats_setting,
    watch_machine,
)
from ..adapter import internals

log = logging.getLogger("inductor_flydsl")


def _finalists(timings: dict[Any, float]) -> list[Any]:
    """Inductor's choice and its runner-up, by the timings Inductor selected with."""
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


def remeasure(finalists: list[Any], first: dict[Any, float], input_nodes: Sequence[Any],
              layout: Any, input_gen_fns: dict[int, Callable[[Any], Any]] | None = None,
              ) -> tuple[dict[Any, Spread], MachineLoad | None]:
    """Samples of ``finalists``: ``first`` (the benchmark's own time) plus re-measured
    rounds.

    ``input_gen_fns`` are the selection's own input generators (a CPU qlinear's packed
    weight, scales and zero-points are real constants; random stand-ins crash oneDNN).
    The thunk Inductor hands feedback savers is not used: it forces profiler-based
    timing, which synchronizes CUDA and fails on a CPU-only build."""
    samples: dict[Any, list[float]] = {c: [float(first[c])] for c in finalists}
    rounds = repeats_setting() - 1
    machine = None
    if finalists and rounds > 0:
        with watch_machine(_gpu_index(layout)) as machine:
            for _ in range(rounds):
                again = internals.AlgorithmSelectorCache.benchmark_in_current_process(
                    finalists, list(input_nodes), layout, input_gen_fns)
                for choice, t in again.items():
                    samples[choice].append(float(t))
    spreads = {c: s for c, s in ((c, Spread.of(v)) for c, v in samples.items()) if s}
    return spreads, machine


def with_confidence(results: list[CandidateResult], choices: list[Any],
                    timings: dict[Any, float], measured: dict[Any, float],
                    input_nodes: Sequence[Any], layout: Any,
                    input_gen_fns: dict[int, Callable[[Any], Any]] | None = None,
                    ) -> tuple[list[CandidateResult], Confidence | None]:
    """``results`` (one per choice, same order) with the finalists' spread attached, and
    the selection's confidence; ``None`` (unknown) when re-measuring is turned off
    (``INDUCTOR_FLYDSL_REPEATS=1``), failed, or the finalists were not benchmarked here.

    The finalists are Inductor's choice and its runner-up by the timings Inductor
    selected with (``timings``); their samples start from what the benchmark measured
    (``measured``). Re-measuring decides confidence only, never the winner: when the
    re-measured medians rank the two the other way round, the selection is ``low`` with
    both rankings in the reason (and in the rows: ``time_ms`` is Inductor's, the spread
    columns the re-measure's)."""
    if repeats_setting() < 2:
        return results, None
    finalists = _finalists(timings)
    if len(finalists) == 2 and not all(c in measured for c in finalists):
        return results, None  # a finalist's time was served or cached: nothing to repeat
    first = {c: measured.get(c, timings[c]) for c in finalists}
    try:
        spreads, machine = remeasure(finalists, first, input_nodes, layout, input_gen_fns)
    except Exception as exc:  # a candidate that benchmarked once may fail again
        log.info("inductor_flydsl: re-measuring the finalists failed (%s: %s); confidence "
                 "not recorded", type(exc).__name__, exc)
        return results, None
    updated = []
    for choice, result in zip(choices, results, strict=True):
        spread = spreads.get(choice)
        updated.append(CandidateResult(**{**result.__dict__, "spread": spread})
                       if spread is not None and result.usable else result)
    winner = spreads.get(finalists[0]) if finalists else None
    runner_up = spreads.get(finalists[1]) if len(finalists) > 1 else None
    confidence = decide(winner, runner_up, machine)
    busy = machine is not None and bool(machine.busy_reasons)
    if (winner is not None and runner_up is not None and not busy
            and runner_up.median < winner.median):
        names = [str(getattr(c, "name", "?")) for c in finalists]
        confidence = Confidence(
            LOW, f"the re-measure disagrees with Inductor's selection: Inductor selected "
                 f"{names[0]} ({timings[finalists[0]]:.4g} ms against "
                 f"{timings[finalists[1]]:.4g} ms for {names[1]}); re-measured medians "
                 f"{winner.median:.4g} ms and {runner_up.median:.4g} ms",
            machine, runner_up.median)
    log.debug("inductor_flydsl: confidence %s (%s)", confidence.level, confidence.reason)
    return updated, confidence
