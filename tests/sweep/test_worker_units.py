"""In-process pieces of the worker and runner: operand layouts, GPU slot environments,
item selection for --resume and --shard."""

from __future__ import annotations

import pytest
import torch

from inductor_flydsl.sweep.items import SweepItem, shard
from inductor_flydsl.sweep.runner import SweepError, gpu_slot, select_items
from inductor_flydsl.sweep.worker import build


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_build_gives_the_item_layout(op: str, layout: str) -> None:
    item = SweepItem.from_values({"op": op, "m": 6, "n": 10, "k": 4, "dtype": "float32",
                                  "layout": layout, "batch": 3 if op == "bmm" else 1})
    fn, inputs = build(item, "cpu")
    a, b = inputs[-2:]
    assert a.shape[-2:] == (6, 4) and b.shape[-2:] == (4, 10)
    assert (a.stride(-1) == 1) == (layout[0] == "n")
    assert (b.stride(-1) == 1) == (layout[1] == "n")
    out = fn(*inputs)
    assert out.shape == ((3, 6, 10) if op == "bmm" else (6, 10))


def test_build_linear_is_a_bias_free_nn_linear() -> None:
    item = SweepItem.from_values({"op": "linear", "m": 5, "n": 7, "k": 3, "dtype": "float32"})
    module, (x,) = build(item, "cpu")
    assert isinstance(module, torch.nn.Linear) and module.bias is None
    assert module.weight.shape == (7, 3) and x.shape == (5, 3)


def test_gpu_slot_environment() -> None:
    assert dict(gpu_slot(1, rocm=False, environ={}).env) == {"CUDA_VISIBLE_DEVICES": "1"}
    # Indexes are this process's own: GPU 1 of CUDA_VISIBLE_DEVICES=4,6 is physical 6.
    slot = gpu_slot(1, rocm=False, environ={"CUDA_VISIBLE_DEVICES": "4,6"})
    assert slot.environ({"CUDA_VISIBLE_DEVICES": "4,6", "X": "y"}) == {
        "CUDA_VISIBLE_DEVICES": "6", "X": "y"}
    rocm = gpu_slot(0, rocm=True, environ={"HIP_VISIBLE_DEVICES": "2,3"})
    assert rocm.environ({"HIP_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}) == {
        "HIP_VISIBLE_DEVICES": "2"}
    with pytest.raises(SweepError, match="not visible"):
        gpu_slot(2, rocm=False, environ={"CUDA_VISIBLE_DEVICES": "0,1"})


def test_select_items_resume_and_shard() -> None:
    items = [SweepItem.from_values({"op": "mm", "m": m, "n": 8, "k": 8}) for m in range(1, 9)]
    previous = {items[0].item_id: "done", items[1].item_id: "failed",
                items[2].item_id: "skipped", items[3].item_id: "interrupted"}
    todo, finished = select_items(items, shard_spec=None, previous=previous, resume=False,
                                  retry_failed=False)
    assert todo == items and finished == 0
    todo, finished = select_items(items, shard_spec=None, previous=previous, resume=True,
                                  retry_failed=False)
    assert todo == items[3:] and finished == 3
    todo, _ = select_items(items, shard_spec=None, previous=previous, resume=True,
                           retry_failed=True)
    assert todo == [items[1], *items[3:]]
    mine = {i.item_id for i in shard(items, 2, 3)}
    todo, _ = select_items(items, shard_spec=(2, 3), previous={}, resume=True,
                           retry_failed=False)
    assert [i.item_id for i in todo] == [i.item_id for i in items if i.item_id in mine]
