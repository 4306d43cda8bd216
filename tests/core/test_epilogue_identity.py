"""An epilogue's identity is exact (issue 33, point 3): ops in order, operand kinds,
dtypes, broadcast patterns and constants. Epilogues with the same op names but other
constants or operands are recorded apart; the same epilogue compiled again keeps its id.
Real torch.compile (CPU, freezing, max-autotune), plugin on, real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import sqlite_utils
import torch
from torch._inductor import config

import inductor_flydsl

ROW = torch.randn(48)
FULL = torch.randn(16, 48)
EPILOGUES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "times2_plus1": lambda y: y * 2.0 + 1.0,
    "times3_plus1": lambda y: y * 3.0 + 1.0,
    "plus_row": lambda y: torch.relu(y + ROW),
    "plus_full": lambda y: torch.relu(y + FULL),
}


class Model(torch.nn.Module):
    def __init__(self, epilogue: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(32, 48)
        self.epilogue = epilogue

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.epilogue(self.linear(x))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    db_path = tmp_path_factory.mktemp("identity") / "t.db"
    x = torch.randn(16, 32)
    try:
        inductor_flydsl.enable(db_path, "readwrite")
        with torch.no_grad(), config.patch(freezing=True, max_autotune=True,
                                           fx_graph_cache=False,
                                           max_autotune_gemm_backends="CPP,ATEN"):
            for name in [*EPILOGUES, "times2_plus1"]:  # the first one twice
                torch._dynamo.reset()
                model = Model(EPILOGUES[name]).eval()
                torch.testing.assert_close(torch.compile(model)(x), model(x))
    finally:
        inductor_flydsl.disable()
        torch._dynamo.reset()
    rows = list(sqlite_utils.Database(db_path).query(
        "select epilogue_id, epilogue from epilogue_decisions"))
    by_ops: dict[str, list[dict]] = {}
    for row in rows:
        epilogue = json.loads(row["epilogue"])
        by_ops.setdefault(" ".join(epilogue["ops"]), []).append(
            {"id": row["epilogue_id"], **epilogue})
    return by_ops


def test_same_ops_other_constants_are_other_epilogues(recorded: dict) -> None:
    rows = recorded["mul add"]
    assert len({r["id"] for r in rows}) == 2, rows  # x*2+1 and x*3+1, the first twice
    constants = sorted(r["steps"][0]["args"][1]["const"] for r in rows)
    assert constants == ["2.0", "3.0"]


def test_same_ops_other_broadcast_are_other_epilogues(recorded: dict) -> None:
    rows = recorded["add relu"]
    assert len({r["id"] for r in rows}) == 2, rows
    patterns = sorted(str(r["steps"][0]["args"][1]["broadcast"]) for r in rows)
    assert patterns == ["['n', 'n']", "['n']"]


def test_steps_name_the_gemm_result_and_dtypes(recorded: dict) -> None:
    step = recorded["add relu"][0]["steps"]
    assert step[0]["args"][0] == {"gemm": True}
    assert step[1] == {"op": "relu", "args": [{"step": 0}], "kwargs": {},
                       "dtype": "float32"}
