"""Sweep items, presets, CSV parsing/validation, misses conversion and shard coverage."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.problems.keys import canonical_json
from inductor_flydsl.problems.problem import Problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo
from inductor_flydsl.sweep.items import ItemError, SweepItem, parse_shard, shard
from inductor_flydsl.sweep.presets import (
    M_BUCKETS,
    PRESETS,
    item_from_problem,
    items_from_misses,
    parse_shapes_csv,
    preset,
    write_shapes_csv,
)

HEADER = "op,M,N,K,batch,dtype,layout\n"


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "shapes.csv"
    path.write_text(text)
    return path


def test_item_id_is_stable_and_canonical() -> None:
    a = SweepItem.from_values({"op": "MM", "M": "16", "N": 32, "K": 64.0, "dtype": "bf16",
                               "layout": "NT"})
    b = SweepItem(op="mm", m=16, n=32, k=64, batch=1, dtype="bfloat16", layout="nt")
    assert a == b and a.item_id == b.item_id
    assert a.item_id == SweepItem.from_values(json.loads(canonical_json(a.to_dict()))).item_id
    assert a.item_id != SweepItem.from_values({**a.to_dict(), "layout": "nn"}).item_id
    with pytest.raises(ItemError, match="not canonical"):
        SweepItem(op="mm", m=16, n=32, k=64, dtype="bf16")


def test_csv_good_rows_aliases_comments_and_duplicates(tmp_path: Path) -> None:
    path = _csv(tmp_path, "# my shapes\nOP, m ,N,K,Batch,DType,Layout\n"
                          "mm,8,4096,4096,,bf16,NT\n\n"
                          "bmm,32,64,128,4,fp16,tn\n"
                          "linear,16,128,64,1,float32,nt\n"
                          "mm,8,4096,4096,1,bfloat16,nt\n")
    items = parse_shapes_csv(path)
    assert [i.summary() for i in items] == [
        "mm bfloat16 8x4096x4096 nt", "bmm float16 4x32x64x128 tn",
        "linear float32 16x128x64 nt"]
    write_shapes_csv(items, tmp_path / "again.csv")
    assert parse_shapes_csv(tmp_path / "again.csv") == items


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file"),
    ("op,M,N,K,dtype\n", "missing column"),
    ("op,M,N,K,batch,dtype,layout,extra\n", "unknown column"),
    ("op,M,M,N,K,dtype,layout\n", "repeated column"),
    (HEADER, "no rows"),
    (HEADER + "mm,8,16\n", "line 2: 3 fields"),
    (HEADER + "conv,8,16,32,1,bf16,nt\n", "op='conv'"),
    (HEADER + "mm,abc,16,32,1,bf16,nt\n", "M='abc' is not a positive integer"),
    (HEADER + "mm,8,-16,32,1,bf16,nt\n", "N='-16'"),
    (HEADER + "mm,8,16,0,1,bf16,nt\n", "K=0 is out of range"),
    (HEADER + "mm,8,16,2.5,1,bf16,nt\n", "K='2.5'"),
    (HEADER + "mm,99999999,16,32,1,bf16,nt\n", "M=99999999 is out of range"),
    (HEADER + "mm,8,16,32,1,int4,nt\n", "dtype='int4'"),
    (HEADER + "mm,8,16,32,1,bf16,xx\n", "layout='xx'"),
    (HEADER + "mm,8,16,32,4,bf16,nt\n", "batch=4 is only allowed with op=bmm"),
    (HEADER + "linear,8,16,32,1,bf16,nn\n", "op=linear"),
    (HEADER + "mm,,16,32,1,bf16,nt\n", "M is missing"),
    (HEADER + "bmm,65536,65536,65536,16,float32,nn\n", "exceeds"),
])
def test_csv_errors_name_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ItemError, match=message) as info:
        parse_shapes_csv(_csv(tmp_path, text))
    assert "shapes.csv" in str(info.value)


def test_db_style_values_are_validated() -> None:
    for bad in ({"op": "mm", "m": True, "n": 1, "k": 1}, {"op": "mm", "m": None, "n": 1, "k": 1},
                {"op": "mm", "m": 1, "n": 1, "k": 1, "colour": "red"},
                {"op": ["mm"], "m": 1, "n": 1, "k": 1},
                {"op": "mm", "m": float("nan"), "n": 1, "k": 1}):
        with pytest.raises(ItemError):
            SweepItem.from_values(bad)


def test_presets() -> None:
    assert set(PRESETS) == {"dense-bf16-suite", "llama3-8b", "llama3-70b", "mixtral-8x7b",
                            "moe-mixtral-8x7b", "moe-deepseek-v3", "moe-qwen3-30b-a3b",
                            "mx-llama3-8b", "mx-llama3-70b", "mx-dense-suite", "cpu-smoke"}
    dense = preset("dense-bf16-suite")
    assert len(dense) == 15
    assert all(i.op == "mm" and i.dtype == "bfloat16" and i.layout == "nt" for i in dense)
    assert {(i.m, i.n, i.k) for i in dense} >= {(8, 4096, 4096), (8192, 8192, 8192),
                                                (16, 28672, 4096), (4096, 256, 4096)}
    assert M_BUCKETS == tuple(2 ** i for i in range(14))
    llama8 = preset("llama3-8b")
    assert {(i.n, i.k) for i in llama8} == {(6144, 4096), (4096, 4096), (28672, 4096),
                                           (14336, 4096), (4096, 14336)}
    assert len(llama8) == 5 * 14 and {i.m for i in llama8} == set(M_BUCKETS)
    assert {(i.n, i.k) for i in preset("llama3-70b")} == {
        (10240, 8192), (8192, 8192), (57344, 8192), (28672, 8192), (8192, 28672)}
    assert (8, 4096) in {(i.n, i.k) for i in preset("mixtral-8x7b")}  # the router
    for name, shapes in (("moe-mixtral-8x7b", {(8, 28672, 4096), (8, 4096, 14336)}),
                         ("moe-deepseek-v3", {(32, 4096, 7168), (32, 7168, 2048)}),
                         ("moe-qwen3-30b-a3b", {(128, 1536, 2048), (128, 2048, 768)})):
        moe = preset(name)
        assert {(i.batch, i.n, i.k) for i in moe} == shapes
        assert all(i.op == "grouped_mm" and i.layout == "nt" for i in moe)
        assert len(moe) == 2 * 3 * 4  # 2 GEMMs x 3 token counts x 4 routings
        assert {i.routing for i in moe} == {"inductor", "uniform", "zipf", "sparse"}
    smoke = preset("cpu-smoke")
    assert all(i.dtype == "float32" and i.m * i.n * i.k <= 1 << 20 for i in smoke)
    assert sum(i.op == "linear" for i in smoke) >= 3
    with pytest.raises(ItemError, match="'gpt-5' is not a preset; presets: dense-bf16-suite"):
        preset("gpt-5")
    with pytest.raises(ItemError, match=r"\(did you mean 'cpu-smoke'\?\)"):
        preset("cpu_smoke")


@pytest.mark.parametrize("name", PRESETS)
def test_shards_cover_every_item_exactly_once(name: str) -> None:
    items = preset(name)
    for n in range(1, 8):
        shards = [shard(items, k, n) for k in range(1, n + 1)]
        ids = [i.item_id for s in shards for i in s]
        assert sorted(ids) == sorted(i.item_id for i in items)  # all, no repeats
        assert max(map(len, shards)) - min(map(len, shards)) <= 1  # balanced
        shuffled = items[:]
        random.Random(n).shuffle(shuffled)
        assert [shard(shuffled, k, n) for k in range(1, n + 1)] == shards  # order-free


def test_parse_shard() -> None:
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/2", "3/2", "1/0", "x", "1/2/3", "a/b"):
        with pytest.raises(ItemError):
            parse_shard(bad)


def _packed_linear(m: int, n: int, k: int) -> Problem:
    # The spec Inductor's CPU packed_linear lowering records (see inductor/hooks.py).
    return Problem.from_spec({
        "op": "packed_linear", "epilogue": {},
        "inputs": [{"dtype": "float32", "size": [m, k], "stride": [k, 1]},
                   {"dtype": "float32", "size": [12345, 1], "stride": [1, 0]},
                   {"dtype": "float32", "size": [n, k], "stride": [k, 1]}],
        "output": {"dtype": "float32", "size": [m, n]}})


def test_item_from_problem() -> None:
    assert item_from_problem(_packed_linear(16, 128, 64)).summary() == \
        "linear float32 16x128x64 nt"
    bmm = Problem.from_spec({
        "op": "bmm", "epilogue": {},
        "inputs": [{"dtype": "bfloat16", "size": [4, 32, 64], "stride": [2048, 64, 1]},
                   {"dtype": "bfloat16", "size": [4, 64, 16], "stride": [1024, 1, 64]}],
        "output": {"dtype": "bfloat16", "size": [4, 32, 16]}})
    assert item_from_problem(bmm).summary() == "bmm bfloat16 4x32x16x64 nt"
    with pytest.raises(ItemError, match="baddbmm"):
        item_from_problem(Problem.from_spec({**bmm.spec(), "op": "baddbmm"}))


def test_items_from_misses_on_a_real_db(tmp_path: Path) -> None:
    device = DeviceInfo(kind="cpu", arch="x86_64-TEST", name="test cpu", compute_units=2)
    software = SoftwareInfo(torch="t", triton="none", flydsl="none", templates="v1")
    db = TuningDB.open(tmp_path / "m.db", writable=True)
    try:
        for _ in range(3):
            db.record_miss(device, software, _packed_linear(8, 32, 16))
        db.record_miss(device, software, _packed_linear(4, 8, 8))
        weird = Problem.from_spec({**_packed_linear(4, 8, 8).spec(), "op": "int_mm"})
        db.record_miss(device, software, weird)
        found = items_from_misses(db.db, device.id, software.id)
    finally:
        db.close()
    assert [i.summary() for i in found.items] == ["linear float32 8x32x16 nt",
                                                  "linear float32 4x8x8 nt"]
    assert found.already_tuned == 0
    assert len(found.unconvertible) == 1 and "int_mm" in found.unconvertible[0]
