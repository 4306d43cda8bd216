"""``inductor_flydsl.stats()``: a dict (JSON-ready, ``["hits"]``) whose ``str()`` is a table,
and epilogue entries that name the epilogue each GEMM really has. Real torch.compile of a
small MLP with freezing on CPU, a real SQLite DB."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.telemetry.stats_view import StatsSnapshot


def test_mlp_epilogues_and_table(tmp_path: Path) -> None:
    torch.manual_seed(0)
    # the second GEMM's input comes from the first one's relu: its FX origins hold a relu
    # that is not its epilogue (that relu used to hide its own: 'epilogue': [])
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU()).eval()
    x = torch.randn(8, 32)
    before = len(inductor_flydsl.stats()["epilogues"])
    with inductor_flydsl.enabled(db_path=tmp_path / "tuning.db", mode="readwrite"), \
            torch.no_grad(), fresh_cache(), inductor_config.patch(freezing=True):
        torch._dynamo.reset()
        torch.compile(model, mode="max-autotune")(x)
    snapshot = inductor_flydsl.stats()
    assert isinstance(snapshot, StatsSnapshot) and isinstance(snapshot, dict)
    epilogues = {e["problem"]: e for e in snapshot["epilogues"][before:]}
    assert set(epilogues) == {"packed_linear float32 8x64x32 nn",
                              "packed_linear float32 8x64x64 nn"}, list(epilogues)
    for epilogue in epilogues.values():
        assert epilogue["epilogue"] == ["relu"], epilogue
        # fused into the C++ template, or a separate kernel after the extern call
        assert epilogue["fused"] == (epilogue["backend"] == "cpp"), epilogue

    plain = snapshot.as_dict()
    assert type(plain) is dict and json.loads(json.dumps(plain)) == plain
    table = str(snapshot)
    assert repr(snapshot) == table
    lines = table.splitlines()
    assert lines[0] == "inductor_flydsl stats (this process)"
    assert any(line.split() == ["hits", str(snapshot["hits"])] for line in lines)
    assert any(line.split()[:2] == ["recorded", str(snapshot["recorded"])] for line in lines)
    header = next(line for line in lines if line.split()[:3] == ["problem", "epilogue", "fused"])
    assert header.startswith("  ")
    row = next(line for line in lines if line.strip().startswith(
        "packed_linear float32 8x64x64 nn") and " relu " in line)
    assert len(row) <= 160, row  # candidate ids are shortened in the table
    assert "refusals (0)" in table
