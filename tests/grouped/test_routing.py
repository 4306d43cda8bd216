"""Token routings for grouped GEMMs and the best-worst-case rule, on real SQLite files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.problems import routing
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo, template_source_hash
from inductor_flydsl.settings import Mode, Settings

MI355X = DeviceInfo(kind="rocm", arch="gfx950", name="AMD Instinct MI355X", compute_units=256)
NOW = SoftwareInfo(torch="2.13.0+rocm7.0", triton="3.7.0", flydsl="0.5.0", templates="v1-x",
                   blas="hipblaslt")
PROBLEM = synthetic_problem("grouped_mm", 4096, 28672, 4096, dtype="bfloat16", layout="nt",
                            batch=8)
FLYDSL = {"template": "gemm_grouped", "template_hash": template_source_hash("gemm_grouped"),
          "tile_m": 128}


@pytest.mark.parametrize("name", routing.ROUTINGS)
def test_every_routing_splits_all_tokens(name: str) -> None:
    for tokens, groups in ((4096, 8), (256, 128), (0, 4), (5, 1)):
        sizes = routing.group_sizes(name, tokens, groups)
        assert len(sizes) == groups and sum(sizes) == tokens and min(sizes) >= 0
        assert sizes == routing.group_sizes(name, tokens, groups)  # deterministic
        offs = routing.offsets(sizes)
        assert offs.dtype == torch.int32 and (offs.tolist()[-1] if groups else 0) == tokens


def test_routings_have_their_shapes() -> None:
    # Inductor's create_offsets: near-uniform, multiples of 8 but the last
    assert routing.group_sizes("inductor", 100, 8) == [16, 8, 16, 8, 16, 8, 16, 12]
    assert routing.group_sizes("inductor", 4096, 8) == [512] * 8
    zipf = routing.group_sizes("zipf", 65536, 8)
    assert max(zipf) > 3 * 65536 / 8  # the busiest expert gets several times its share
    sparse = routing.group_sizes("sparse", 4096, 128)
    assert sparse.count(0) >= 32  # a quarter of the experts get no token
    with pytest.raises(ValueError, match="unknown routing"):
        routing.group_sizes("pareto", 8, 2)


def test_worst_case_rule() -> None:
    times = {"inductor": {"fast": 1.0, "steady": 1.1, "partial": 0.5},
             "zipf": {"fast": 3.0, "steady": 2.0},
             "sparse": {"fast": 1.0, "steady": 1.05, "broken": float("inf")}}
    winner, worst, per = routing.worst_case_winner(times)
    assert winner == "steady"  # 1.1x at worst; "fast" is 1.5x behind under zipf
    assert worst == pytest.approx(1.1) and per == {"inductor": 1.1, "sparse": 1.05,
                                                   "zipf": 1.0}
    assert routing.worst_case_winner({"zipf": {"a": float("inf")}}) is None
    assert routing.worst_case_winner({"zipf": {"a": 1.0}, "sparse": {"b": 1.0}}) is None


def _record(path: Path, problem, times: dict[str, float]) -> None:
    rows = [CandidateResult("fly-a", "flydsl", "flydsl_grouped_a", FLYDSL, times["fly-a"]),
            CandidateResult("aten", "aten", "_grouped_mm", {}, times["aten"])]
    db = TuningDB.open(path, writable=True)
    try:
        db.record_selection(MI355X, NOW, problem, rows)
    finally:
        db.close()


def test_served_winner_is_the_best_worst_case(tmp_path: Path) -> None:
    user = tmp_path / "u.db"
    db = LayeredTuningDB(Settings(db_path=user, mode=Mode.READWRITE, use_shipped=False),
                         shipped_paths=[])
    # Inductor's own (near-uniform) routing alone: its winner, no routed lookup
    _record(user, PROBLEM, {"fly-a": 1.0, "aten": 1.3})
    assert db.lookup_routed(MI355X, NOW, PROBLEM) is None
    assert db.lookup(MI355X, NOW, PROBLEM).candidate_id == "fly-a"
    # under Zipf routing FlyDSL falls 1.6x behind ATen: ATen's worst case (1.3x) is better
    zipf = routing.routed(PROBLEM, "zipf")
    assert dict(zipf.attrs) == {"routing": "zipf"} and zipf.id != PROBLEM.id
    _record(user, zipf, {"fly-a": 4.8, "aten": 3.0})
    served = db.lookup_routed(MI355X, NOW, PROBLEM)
    assert served is not None and served.candidate_id == "aten"
    assert "routings inductor,zipf" in served.source and "worst 1.30x" in served.source
    # a third routing where FlyDSL is far ahead does not change a worst case
    _record(user, routing.routed(PROBLEM, "uniform"), {"fly-a": 1.0, "aten": 1.25})
    assert db.lookup_routed(MI355X, NOW, PROBLEM).candidate_id == "aten"
    # other software: nothing exact, nothing served
    assert db.lookup_routed(MI355X, replace(NOW, torch="2.14.1+rocm7.0"), PROBLEM) is None
    db.close()


def test_report_lists_grouped_gemms_apart(tmp_path: Path) -> None:
    from inductor_flydsl.report import load_report, render_markdown

    user = tmp_path / "u.db"
    _record(user, PROBLEM, {"fly-a": 1.0, "aten": 1.3})
    _record(user, routing.routed(PROBLEM, "zipf"), {"fly-a": 4.8, "aten": 3.0})
    dense = synthetic_problem("mm", 512, 4096, 4096, dtype="bfloat16", layout="nt")
    db = TuningDB.open(user, writable=True)
    db.record_selection(MI355X, NOW, dense, [
        CandidateResult("aten-mm", "aten", "mm", {}, 2.0),
        CandidateResult("tri", "triton", "triton_mm", {"BLOCK_M": 64}, 1.6)])
    db.close()
    report = load_report(user)
    families = dict(zip(report.problems["problem"], report.problems["family"], strict=True))
    assert families == {"mm bfloat16 512x4096x4096 nt": "dense",
                        "grouped_mm bfloat16 8x4096x28672x4096 nt": "grouped",
                        "grouped_mm bfloat16 8x4096x28672x4096 nt routing=zipf": "grouped"}
    assert sorted(report.geomeans["family"]) == ["dense", "grouped"]
    assert {g["family"] for g in report.summary()["geomeans"]} == {"dense", "grouped"}
    text = render_markdown(report)
    dense_part, grouped_part = text.split("## Grouped GEMM (mixture-of-experts) winners")
    assert "mm bfloat16 512x4096x4096 nt" in dense_part and "grouped_mm" not in \
        dense_part.split("## Winners per problem")[1]
    assert "routing=zipf" in grouped_part.split("##")[0]


def test_user_plain_record_decides_over_a_shipped_routed_one(tmp_path: Path) -> None:
    user, shipped = tmp_path / "u.db", tmp_path / "s.db"
    _record(shipped, PROBLEM, {"fly-a": 1.0, "aten": 1.3})
    _record(shipped, routing.routed(PROBLEM, "zipf"), {"fly-a": 4.8, "aten": 3.0})
    _record(user, PROBLEM, {"fly-a": 1.0, "aten": 1.3})
    db = LayeredTuningDB(Settings(db_path=user, mode=Mode.READWRITE, use_shipped=True),
                         shipped_paths=[shipped])
    assert db.lookup_routed(MI355X, NOW, PROBLEM) is None  # the user's own record decides
    assert db.lookup(MI355X, NOW, PROBLEM).candidate_id == "fly-a"
    db.close()
    alone = LayeredTuningDB(Settings(db_path=tmp_path / "none.db", mode=Mode.READWRITE,
                                     use_shipped=True), shipped_paths=[shipped])
    assert alone.lookup_routed(MI355X, NOW, PROBLEM).candidate_id == "aten"
    alone.close()


def test_only_ragged_static_grouped_selections_are_routed() -> None:
    class Node:  # the two IR-node methods offs_index reads, with fixed answers
        def __init__(self, size, dtype=torch.bfloat16):
            self.size, self.dtype = size, dtype

        def get_size(self):
            return self.size

        def get_dtype(self):
            return self.dtype

    offs = Node([8], torch.int32)
    assert routing.offs_index("grouped_mm", [Node([64, 32]), Node([8, 32, 16]), offs]) == 2
    assert routing.offs_index("grouped_mm", [Node([64, 32]), Node([32, 16]), offs]) is None
    assert routing.offs_index("grouped_mm", [Node([8, 4, 32]), Node([8, 32, 16])]) is None
    assert routing.offs_index("mm", [Node([64, 32]), Node([8, 32, 16]), offs]) is None


def test_grouped_items_round_trip_through_csv(tmp_path: Path) -> None:
    from inductor_flydsl.sweep.presets import parse_shapes_csv, preset, write_shapes_csv

    items = preset("moe-qwen3-30b-a3b")
    write_shapes_csv(items, tmp_path / "moe.csv")
    again = parse_shapes_csv(tmp_path / "moe.csv")
    assert again == items and len({i.routing for i in again}) == 4
