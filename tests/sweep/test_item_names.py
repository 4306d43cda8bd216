"""The names ``sweep --list`` and the started lines give GPU items (``items.db_name``) are
the names of the problems the plugin keys from Inductor's IR. No GPU here: the sweep
worker's own GEMMs (``worker.build``) are compiled on this CPU with FLYDSL requested,
which the provider refuses off ROCm, logging each problem as the plugin keys it; that is
the key a GPU compile records too (its device adds no attribute to these dtypes at
default settings). A grouped item's routing is added to the key only after this point
(``routing.routed``), tests/grouped/test_grouped_inductor_cpu.py checks that name. The
CPU's own names (``packed_linear``) are checked through the real CLI in
test_sweep_progress.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from inductor_flydsl.sweep.items import SweepItem, db_name
from tests.conftest import isolated_env, run_for_result

ITEMS = {  # group -> items compiled in one graph (the sweep's batch module)
    "dense": [{"op": "mm", "m": 64, "n": 256, "k": 128, "layout": "nt"},
              {"op": "mm", "m": 64, "n": 256, "k": 128, "layout": "tn", "dtype": "fp16"},
              {"op": "mm", "m": 40, "n": 96, "k": 64, "dtype": "float32", "layout": "nn"},
              {"op": "addmm", "m": 32, "n": 128, "k": 64, "layout": "nn"},
              {"op": "bmm", "m": 32, "n": 64, "k": 128, "batch": 3, "layout": "nt"},
              {"op": "linear", "m": 16, "n": 128, "k": 64},
              {"op": "linear", "m": 24, "n": 96, "k": 64, "dtype": "float32"}],
    # MX: M a multiple of 128, so torch 2.13's padded scale count is (M, K/32)
    "mxfp8": [{"op": "scaled_mm", "m": 128, "n": 256, "k": 4096, "dtype": "mxfp8"}],
    "mxfp4": [{"op": "scaled_mm", "m": 128, "n": 256, "k": 4096, "dtype": "mxfp4"}],
    "grouped": [{"op": "grouped_mm", "m": 160, "n": 64, "k": 128, "batch": 4}],
    "dynamic": [{"op": "mm", "m": 48, "n": 256, "k": 512, "layout": "nn",
                 "dynamic_m": True}],
}

CHILD = r"""
import json, logging, sys, torch
import inductor_flydsl
from inductor_flydsl.inductor.adapter import internals
from inductor_flydsl.sweep.batch import batch_module
from inductor_flydsl.sweep.items import SweepItem
from inductor_flydsl.sweep.worker import build

seen = []
class Collect(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "no FlyDSL choices for " in text:
            seen.append(text.split("no FlyDSL choices for ", 1)[1].split(": ", 1)[0])
log = logging.getLogger("inductor_flydsl")
log.addHandler(Collect())
log.setLevel(logging.DEBUG)
inductor_flydsl.enable(sys.argv[1], "readwrite")
internals.config.max_autotune_gemm_backends = "ATEN,FLYDSL"
out = {}
for group, values in json.loads(sys.argv[2]).items():
    items = [SweepItem.from_values(v) for v in values]
    parts = [build(item, "cpu") for item in items]
    fn, inputs = parts[0] if len(parts) == 1 else batch_module(parts)
    torch._dynamo.reset()
    seen.clear()
    try:
        with torch.no_grad():
            torch.compile(fn, mode="max-autotune",
                          dynamic=None if items[0].dynamic_m else False)(*inputs)
    except Exception:  # CPU ATen has no MX matmul: the compile is what counts
        if group not in ("mxfp8", "mxfp4"):
            raise
    out[group] = sorted(set(seen))
print("RESULT " + json.dumps(out))
"""


def test_gpu_item_names_are_the_problems_inductor_presents(tmp_path: Path) -> None:
    seen = run_for_result([sys.executable, "-c", CHILD, str(tmp_path / "t.db"),
                           json.dumps(ITEMS)], isolated_env(tmp_path), 600,
                          "the item-names child")
    seen.pop("stderr")
    for kind in ("rocm", "cuda"):
        named = {group: sorted(db_name(SweepItem.from_values(v), kind) for v in values)
                 for group, values in ITEMS.items()}
        assert named == seen
    assert "mm bfloat16 16x128x64 nt" in seen["dense"]  # a GPU linear is an mm of x, W.T
    assert "addmm bfloat16 32x128x64 nn alpha=1.0 beta=1.0" in seen["dense"]
    assert seen["dynamic"] == ["mm bfloat16 48x256x512 nn dynamic[M]"]
