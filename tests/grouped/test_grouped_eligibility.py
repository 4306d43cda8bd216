"""Which grouped GEMMs FlyDSL takes, with every reason it refuses one, and the configs it
tries; through the library and the ``explain`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from inductor_flydsl.cli.explanation import config_fields, explain
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_GROUPED
from inductor_flydsl.flydsl_backend.offer.offering import candidate_configs
from inductor_flydsl.problems.problem import Problem, TensorSpec, synthetic_problem


def _problem(t=512, n=256, k=128, g=8, layout="nt", dtype="bfloat16") -> Problem:
    return synthetic_problem("grouped_mm", t, n, k, dtype=dtype, layout=layout, batch=g)


def test_eligible_problem_gets_grouped_configs() -> None:
    for layout in ("nt", "nn"):
        result = explain(_problem(layout=layout), "gfx950")
        assert result.eligible and result.reasons == []
        assert result.configs and all(c["split_k"] == 1 for c in result.configs)
        assert {tuple(sorted(config_fields(c).items())) for c in result.configs} <= {
            tuple(sorted(c.to_json().items())) for c in DEFAULT_GROUPED}
    assert _problem().summary() == "grouped_mm bfloat16 8x512x256x128 nt"


def test_configs_suit_the_average_group() -> None:
    # 8 tokens per expert (decode): the smallest M tiles first
    few = candidate_configs(_problem(t=64, n=1024, k=1024, g=8), "gfx950")
    assert few[0].tile_m == 16
    # 2048 tokens per expert (prefill): large tiles are offered too
    many = candidate_configs(_problem(t=16384, n=4096, k=1024, g=8), "gfx950")
    assert max(c.tile_m for c in many) >= 128


@pytest.mark.parametrize(("problem", "reason"), [
    (_problem(n=100), "N=100 is not a multiple of 8"),
    (_problem(k=100), "K=100 is not a multiple of 64"),
    (_problem(layout="tn"), "A is not row-major"),
    (_problem(dtype="float32"), "not all bfloat16 or all float16"),
    (_problem(t=4096, n=4096, k=7168, g=256), "over the kernel's int32 offsets"),
    (_problem(g=5000), "G=5000 groups"),
])
def test_refusal_reasons(problem: Problem, reason: str) -> None:
    result = explain(problem, "gfx950")
    assert not result.eligible and result.configs == []
    assert any(reason in r for r in result.reasons), result.reasons


def test_other_grouped_forms_are_refused() -> None:
    a = TensorSpec("bfloat16", (4, 64, 128), (8192, 128, 1))
    b = TensorSpec("bfloat16", (4, 128, 64), (8192, 64, 1))
    out = TensorSpec("bfloat16", (4, 64, 64), (0, 0, 0))
    batched = Problem(op="grouped_mm", inputs=(a, b), output=out)
    # 3-D x 3-D without offsets: equal groups, a bmm: the dense template's bmm configs
    result = explain(batched, "gfx950")
    assert result.eligible and result.configs and all(
        c["split_k"] == 1 for c in result.configs)
    odd = Problem(op="grouped_mm", inputs=(a, replace(b, size=(4, 128, 60),
                                                       stride=(7680, 60, 1))),
                  output=replace(out, size=(4, 64, 60)))
    assert any("N=60" in r for r in explain(odd, "gfx950").reasons)
    a2 = TensorSpec("bfloat16", (64, 128), (128, 1))
    b2 = TensorSpec("bfloat16", (128, 64), (64, 1))
    offs = TensorSpec("int32", (4,), (1,))
    k_grouped = Problem(op="grouped_mm", inputs=(a2, b2, offs),
                        output=TensorSpec("bfloat16", (4, 64, 64), (0, 0, 0)))
    assert "2-D ragged activations and 3-D weights" in explain(k_grouped, "gfx950").reasons[0]
    assert explain(_problem(), "gfx90a").reasons == [
        "arch gfx90a is not supported (supported: gfx950, gfx942)"]


def test_explain_cli_grouped(tmp_path) -> None:
    def cli(*args: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "explain", "--op",
                               "grouped_mm", *args, "--json", "--db", str(tmp_path / "no.db")],
                              capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)

    ok = cli("--shape", "8x4096x14336x4096")
    assert ok["eligible"] and ok["problem"] == "grouped_mm bfloat16 8x4096x14336x4096 nt"
    refused = cli("--shape", "8x4096x14336x4104", "--layout", "tn")
    assert not refused["eligible"]
    assert any("A is not row-major" in r for r in refused["reasons"])
    assert any("K=4104" in r for r in refused["reasons"])


def test_int32_span_of_out_and_small_k() -> None:
    # Mixtral w13 over 131072 routed tokens: A and B fit int32 offsets, out does not
    big = explain(_problem(t=131072, n=28672, k=4096, g=8), "gfx950")
    assert big.reasons == ["out spans 3758096384 elements, over the kernel's int32 offsets"]
    # K a multiple of 64 but not of 128, with tiny groups: the 16x64x64 config serves it
    small = explain(_problem(t=64, n=1024, k=2880, g=32), "gfx950")
    assert small.eligible and {c["tile_k"] for c in small.configs} == {64}
    assert "K=2848 is not a multiple of 64" in explain(_problem(k=2848), "gfx950").reasons[0]
