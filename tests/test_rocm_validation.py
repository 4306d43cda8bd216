"""Numerics of the FlyDSL GEMM kernels on a real AMD GPU (ROCm 7, gfx950 or gfx942).

Skipped unless ``scripts/validate_rocm.py``'s preflight finds a ROCm 7 runtime and a
supported GPU (it never launches anything to find out: a FlyDSL launch without ROCm 7
aborts the process). Every case calls ``templates.gemm_dense.launch`` directly and
compares with a float64 torch reference under ``flydsl_backend.tolerances``; torch's own
``mm``/``addmm``/``bmm`` in the same dtype is held to the same bound.

* every DEFAULT config that fits the GPU, for every dtype, layout and op, on the small
  awkward shapes of ``suites.NUMERICS_SHAPES`` (about 3500 launches, minutes: most of it
  is compiling 24 variants x up to 24 configs once);
* the 15-shape dense suite (``suites.DENSE_BF16_NT_SUITE``) for every dtype, layout and
  op, each shape with the config ``prune_for_shape`` ranks first (bmm with batch 2).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend import configs, suites
from inductor_flydsl.flydsl_backend.cross_compile import load_template

ROOT = Path(__file__).resolve().parents[1]


def _load_validate_rocm():
    spec = importlib.util.spec_from_file_location("validate_rocm",
                                                  ROOT / "scripts" / "validate_rocm.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["validate_rocm"] = module
    spec.loader.exec_module(module)
    return module


vr = _load_validate_rocm()
PREFLIGHT = vr.preflight()
pytestmark = [
    pytest.mark.rocm,
    pytest.mark.skipif(not PREFLIGHT.ok, reason=f"needs ROCm 7 + gfx950/gfx942: "
                                                f"{PREFLIGHT.message}"),
]
gemm = load_template("gemm_dense")
VARIANTS = [(d, lay, op) for d in gemm.DTYPES for lay in gemm.LAYOUTS for op in gemm.OPS]


def _ids(variant):
    return "-".join(variant)


@pytest.fixture(scope="module")
def device():
    import torch

    return torch.device("cuda", 0)


def _assert_ok(row):
    assert row["ok"], row
    assert row["torch_ok"], f"torch's own result is out of tolerance: {row}"


@pytest.mark.parametrize("variant", VARIANTS, ids=_ids)
def test_default_configs_on_awkward_shapes(device, variant):
    dtype, layout, op = variant
    failures = []
    for config in configs.default_configs(PREFLIGHT.arch, dtype):
        for i, shape in enumerate(suites.NUMERICS_SHAPES):
            row = vr.numerics_case(config, dtype=dtype, layout=layout, op=op, shape=shape,
                                   device=device, pad=8 if i % 2 else 0,
                                   batch=suites.NUMERICS_BATCH, seed=i)
            if not row["ok"]:
                failures.append(row)
    assert not failures, f"{len(failures)} failures, first: {failures[0]}"


@pytest.mark.parametrize("variant", VARIANTS, ids=_ids)
@pytest.mark.parametrize("shape", suites.DENSE_BF16_NT_SUITE,
                         ids=lambda s: "x".join(map(str, s)))
def test_dense_suite_shapes(device, variant, shape):
    dtype, layout, op = variant
    m, n, k = shape
    candidates = configs.prune_for_shape(configs.default_configs(PREFLIGHT.arch, dtype),
                                         m, n, k, limit=1)
    assert candidates, f"no DEFAULT config for {shape} on {PREFLIGHT.arch}"
    row = vr.numerics_case(candidates[0], dtype=dtype, layout=layout, op=op, shape=shape,
                           device=device, batch=2, seed=m)
    _assert_ok(row)
