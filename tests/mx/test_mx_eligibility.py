"""Which MX ``scaled_mm`` problems the MX template takes, every reason it refuses one,
the configs it would try, ``explain --op scaled_mm`` and the custom ops' guard."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from inductor_flydsl.cli.explanation import explain
from inductor_flydsl.flydsl_backend.offer.eligibility import problem_reasons
from inductor_flydsl.flydsl_backend.offer.mx_eligibility import (
    is_mx,
    synthetic_mx_problem,
    variant_dtype,
)
from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs
from inductor_flydsl.problems.problem import TensorSpec

FP8 = ("float8_e4m3fn", "float8_e4m3fn")
FP4 = ("float4_e2m1fn_x2", "float4_e2m1fn_x2")


def test_mxfp8_and_mxfp4_are_eligible_on_gfx950_only() -> None:
    for formats, variant in ((FP8, "e4m3xe4m3_bf16"), (FP4, "e2m1xe2m1_bf16"),
                             (("float8_e4m3fn", "float4_e2m1fn_x2"), "e4m3xe2m1_bf16")):
        problem = synthetic_mx_problem(4096, 4096, 4096, formats=formats)
        assert is_mx(problem) and variant_dtype(problem) == variant
        assert problem.mnk == (4096, 4096, 4096)  # FP4's packed K counted in elements
        assert problem_reasons(problem, arch="gfx950") == []
        result = explain(problem, "gfx950")
        assert result.eligible and result.configs
        (reason,) = explain(problem, "gfx942").reasons
        assert "gfx942 has no scaled MFMA" in reason


def test_every_refusal_reason() -> None:
    base = synthetic_mx_problem(100, 4100, 4000, formats=FP8, out_dtype="float16")
    reasons = " | ".join(problem_reasons(base, arch="gfx950"))
    assert "K=4000 is not a multiple of 128" in reasons
    assert "N=4100 is not a multiple of 8" in reasons
    swizzled = synthetic_mx_problem(100, 256, 256, formats=FP4, swizzled_scales=True)
    reasons = " | ".join(problem_reasons(swizzled, arch="gfx950"))
    assert "scale_a is (1024,), not (100, 8): the padded layout of torch's swizzled" in reasons
    # FP8 with fp32 tensor-wise scales is not MX
    p = synthetic_mx_problem(128, 128, 128, formats=FP8)
    fp32_scale = TensorSpec("float32", (), ())
    tensorwise = dataclasses.replace(p, inputs=(*p.inputs[:2], fp32_scale, fp32_scale))
    assert "fp32 scales: tensor-wise or row-wise FP8" in problem_reasons(tensorwise)[0]
    # B stored N-contiguous: not a @ w.t()
    a, b, sa, sb = p.inputs
    row_major_b = TensorSpec(b.dtype, b.size, (b.size[1], 1))
    reasons = problem_reasons(dataclasses.replace(p, inputs=(a, row_major_b, sa, sb)))
    assert any("B is not K-contiguous" in r for r in reasons)
    bad_bias = synthetic_mx_problem(128, 128, 128, formats=FP8, bias=True)
    wrong = TensorSpec("float32", (128,), (1,))
    reasons = problem_reasons(dataclasses.replace(bad_bias, inputs=(*bad_bias.inputs[:4], wrong)))
    assert reasons == ["bias is not a contiguous length-N vector of the output dtype"]
    out8 = dataclasses.replace(p, output=TensorSpec("float32", (128, 128), (128, 1)))
    assert "output dtype float32" in problem_reasons(out8)[0]


def test_configs_fit_the_shape() -> None:
    decode = synthetic_mx_problem(16, 8192, 2048, formats=FP4)
    configs = candidate_configs(decode, "gfx950")
    assert configs[0].tile_m == 16  # the least wasted M first
    k_only_128 = synthetic_mx_problem(4096, 4096, 384, formats=FP8)
    assert {c.tile_k for c in candidate_configs(k_only_128, "gfx950")} == {128}
    big = candidate_configs(synthetic_mx_problem(4096, 4096, 4096, formats=FP4), "gfx950")
    assert (256, 256) in {(c.tile_m, c.tile_n) for c in big}  # offered to FP4 x FP4 only
    fp8 = candidate_configs(synthetic_mx_problem(4096, 4096, 4096, formats=FP8), "gfx950")
    assert (256, 256) not in {(c.tile_m, c.tile_n) for c in fp8}


def test_explain_cli() -> None:
    def run(*args: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "explain", "--op",
                               "scaled_mm", *args, "--json"], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    ok = run("--shape", "8192x8192x8192", "--dtype", "mxfp4")
    assert ok["eligible"] and ok["configs"]
    refused = run("--shape", "8192x8192x8192", "--dtype", "e4m3xe5m2", "--arch", "gfx942",
                  "--swizzled-scales")
    assert not refused["eligible"] and len(refused["reasons"]) == 3


def test_custom_ops_refuse_to_launch_without_rocm() -> None:
    """Nothing is launched without a verified ROCm runtime: inside Inductor's benchmark
    (strict) the op raises; in a forward it computes the MX product with torch instead
    (issue 50: as the dense ops do), with the reason in one warning."""
    from inductor_flydsl.flydsl_backend.run.ops import FlydslRuntimeUnavailable, strict_launches
    from inductor_flydsl.numerics.mx import mx_reference
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    a = torch.ones(128, 128, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    scale = torch.full((128, 4), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    out = torch.empty(128, 128, dtype=torch.bfloat16)
    bias = torch.full((128,), 0.5, dtype=torch.bfloat16)
    with strict_launches(), pytest.raises(FlydslRuntimeUnavailable, match="not launched"):
        torch.ops.inductor_flydsl.scaled_mm_out(a, a.t(), scale, scale, out, "{}")
    with strict_launches(), pytest.raises(FlydslRuntimeUnavailable, match="not launched"):
        torch.ops.inductor_flydsl.scaled_mm_bias_out(a, a.t(), scale, scale, bias, out, "{}")
    with pytest.warns(TuningDBWarning, match="computed with ATen.*not launched"):
        torch.ops.inductor_flydsl.scaled_mm_bias_out(a, a.t(), scale, scale, bias, out, "{}")
    expected = mx_reference(a, a, scale, scale, bias)  # every entry 128 + 0.5
    torch.testing.assert_close(out.double(), expected.to(torch.bfloat16).double())
