"""The model ranks a selection's configs by the selection's own timing mode (issue 50).

The mode is decided once per selection, before the providers are asked
(``timing_parity.selection_timing``): ``graph`` when the compile captures graphs and the
device's kernels can be captured, ``eager`` on a GPU otherwise, ``cpu`` on a CPU. The
offering passes it to the model, which charges a launch its host dispatch under ``eager``
(about 4 us on MI355X) and only the GPU's gap under ``graph``; a split-K config with a
workspace launches three kernels (the GEMM, the fill and the reduction)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inductor_flydsl.flydsl_backend.offer.offering import model_timing, ranked_candidates
from inductor_flydsl.inductor.adapter import internals
from inductor_flydsl.inductor.timing.timing_parity import selection_timing
from inductor_flydsl.problems.problem import synthetic_problem

DECODE = synthetic_problem("mm", 16, 4096, 4096, dtype="bfloat16", layout="nt")


class Captures:
    """A provider (the hooks' ``ChoiceProvider`` protocol) whose device kernels can, or
    cannot, be captured into graphs."""

    def __init__(self, captures: bool) -> None:
        self.captures = captures

    def captures_graphs(self, device: Any) -> bool:
        return self.captures


@pytest.mark.parametrize(("cudagraphs", "captures", "expected"), [
    (True, True, "graph"), (False, True, "eager"), (True, False, "eager")])
def test_the_selection_timing_is_decided_from_the_compile_and_the_device(
        cudagraphs: bool, captures: bool, expected: str) -> None:
    gpu = torch.device("cuda", 0)
    with internals.config.patch({"triton.cudagraphs": cudagraphs}):
        assert selection_timing(gpu, [Captures(captures)]) == expected
        # a CPU (FlyDSL's runtime captures nothing there; a test's stand-in GPU may)
        assert selection_timing(torch.device("cpu"), [Captures(False)]) == "cpu"


def test_the_model_ranks_by_the_selections_mode() -> None:
    graph = ranked_candidates(DECODE, "gfx950", timing="graph")
    eager = ranked_candidates(DECODE, "gfx950", timing="eager")
    assert graph and eager
    for ranked, mode in ((graph, "graph"), (eager, "eager")):
        predicted = [r for r in ranked if r.prediction is not None]
        assert predicted and all(r.prediction.timing == mode for r in predicted)
        times = [r.prediction.us for r in predicted]
        assert times == sorted(times)  # ranked by this mode's predictions
    by_config = {g.config: g.prediction.us for g in graph if g.prediction is not None}
    extra = {e.config: e.prediction.us - by_config[e.config]
             for e in eager if e.prediction is not None and e.config in by_config}
    one_launch = [v for c, v in extra.items() if c.split_k == 1]
    workspace = [v for c, v in extra.items() if c.split_k > 1 and not c.reduce_in_launch]
    assert one_launch and workspace
    # eager charges every launch its host dispatch: a workspace split-K pays three
    assert min(workspace) > max(one_launch) + 1.0


def test_the_shipped_graph_lists_lead_only_graph_timed_selections() -> None:
    assert any(r.stored for r in ranked_candidates(DECODE, "gfx950", timing="graph"))
    assert not any(r.stored for r in ranked_candidates(DECODE, "gfx950", timing="eager"))


def test_a_cpu_or_unknown_mode_ranks_as_graph() -> None:
    assert model_timing("cpu") == model_timing(None) == "graph"
    assert model_timing("eager") == "eager"
