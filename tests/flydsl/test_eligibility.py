"""Eligibility of problems for FlyDSL, on synthetic problems and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from inductor_flydsl.cli.explanation import explain
from inductor_flydsl.flydsl_backend.offer.eligibility import problem_reasons
from inductor_flydsl.flydsl_backend.offer.suites import DENSE_BF16_NT_SUITE
from inductor_flydsl.problems.problem import Problem, TensorSpec, synthetic_problem


@pytest.mark.parametrize("m,n,k", DENSE_BF16_NT_SUITE)
def test_every_reference_suite_shape_is_eligible_with_configs(m: int, n: int, k: int) -> None:
    result = explain(synthetic_problem("mm", m, n, k, dtype="bfloat16", layout="nt"), "gfx950")
    assert result.eligible, result.reasons
    assert result.configs
    assert all(c["tile_m"] <= max(16, 1 << (m - 1).bit_length()) for c in result.configs)


def test_small_m_gets_no_256_row_tiles() -> None:
    result = explain(synthetic_problem("mm", 8, 4096, 4096, dtype="bfloat16", layout="nt"),
                     "gfx950")
    assert result.configs and max(c["tile_m"] for c in result.configs) <= 16


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_all_layouts_ops_dtypes_accepted(op: str, layout: str, dtype: str) -> None:
    problem = synthetic_problem(op, 256, 512, 1024, dtype=dtype, layout=layout, batch=2)
    assert problem_reasons(problem) == []
    assert explain(problem, "gfx942").configs


@pytest.mark.parametrize("shape,layout,needle", [
    ((64, 100, 1024), "nn", "N=100"),
    ((64, 128, 100), "nn", "K=100"),
    ((63, 128, 1024), "tn", "M=63"),
    ((64, 128, 1000), "nt", "K=1000"),
])
def test_odd_sizes_rejected_with_reason(shape: tuple[int, int, int], layout: str,
                                        needle: str) -> None:
    reasons = problem_reasons(synthetic_problem("mm", *shape, dtype="bfloat16", layout=layout))
    assert any(needle in r for r in reasons), reasons


def test_odd_m_is_fine_for_row_major_a() -> None:
    assert problem_reasons(synthetic_problem("mm", 63, 128, 1024, dtype="bfloat16",
                                             layout="nt")) == []


def test_unsupported_dtype_dynamic_strided_misaligned() -> None:
    fp32 = synthetic_problem("mm", 64, 128, 1024, dtype="float32", layout="nn")
    assert any("bfloat16" in r for r in problem_reasons(fp32))
    base = synthetic_problem("mm", 64, 128, 1024, dtype="bfloat16", layout="nn")
    dynamic_k = Problem(op="mm", inputs=base.inputs, output=base.output,
                        symbolic=((0, 1), (0,), (0,)))
    assert any("M is the only symbolic dim" in r for r in problem_reasons(dynamic_k))
    strided = Problem(op="mm", inputs=(TensorSpec("bfloat16", (64, 1024), (2048, 2)),
                                       base.inputs[1]), output=base.output)
    assert any("unit stride" in r for r in problem_reasons(strided))
    assert any("aligned" in r for r in problem_reasons(base, offsets=(3, 0)))
    odd_batch = Problem(op="bmm", inputs=(TensorSpec("bfloat16", (4, 64, 1024), (65540, 1024, 1)),
                                          TensorSpec("bfloat16", (4, 1024, 128),
                                                     (131072, 128, 1))),
                        output=TensorSpec("bfloat16", (4, 64, 128), (8192, 128, 1)))
    assert any("batch stride" in r for r in problem_reasons(odd_batch))


def test_unsupported_arch_and_op() -> None:
    problem = synthetic_problem("mm", 64, 128, 1024, dtype="bfloat16", layout="nn")
    assert not explain(problem, "gfx90a").eligible
    conv = Problem(op="convolution", inputs=problem.inputs, output=problem.output)
    assert problem_reasons(conv) and "not supported" in problem_reasons(conv)[0]


def test_explain_cli_json() -> None:
    ok = subprocess.run([sys.executable, "-m", "inductor_flydsl", "explain", "--op", "mm",
                         "--shape", "8x4096x4096", "--dtype", "bf16", "--layout", "nt",
                         "--arch", "gfx950", "--json"], capture_output=True, text=True,
                        check=True)
    data = json.loads(ok.stdout)
    assert data["eligible"] and data["configs"] and data["reasons"] == []
    bad = subprocess.run([sys.executable, "-m", "inductor_flydsl", "explain", "--op", "mm",
                          "--shape", "7x4095x100", "--dtype", "fp32", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(bad.stdout)
    assert not data["eligible"] and len(data["reasons"]) >= 4


def test_explain_dynamic_m_shows_the_key_and_eligibility() -> None:
    def explain_json(layout: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "explain", "--op",
                               "mm", "--shape", "24x4096x4096", "--layout", layout,
                               "--dynamic-m", "--json"], capture_output=True, text=True,
                              check=True)
        return json.loads(proc.stdout)

    nt = explain_json("nt")  # M=24 keyed at its hint, 24
    assert nt["eligible"] and nt["problem"] == "mm bfloat16 24x4096x4096 nt dynamic[M]"
    tn = explain_json("tn")
    assert not tn["eligible"] and any("column-major A" in r for r in tn["reasons"])


@pytest.mark.parametrize("m,n,k", [(16, 8192, 8192), (32, 14336, 4096), (8, 4096, 4096)])
def test_decode_shapes_rank_a_split_k_config_with_512_workgroups_first(
        m: int, n: int, k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the performance model (top-k 0), the pruned order: split-K first."""
    from inductor_flydsl.flydsl_backend.offer.configs import GemmConfig, _tpl

    monkeypatch.setenv("INDUCTOR_FLYDSL_TOP_K", "0")
    result = explain(synthetic_problem("mm", m, n, k, dtype="bfloat16", layout="nt"), "gfx950")
    top = GemmConfig.from_json(result.configs[0])
    grid, _ = _tpl.launch_geometry(top, m, n, 1)
    assert top.split_k > 1 and grid[0] * grid[2] >= 512, (top, grid)
    for config in map(GemmConfig.from_json, result.configs):
        req = _tpl.divisibility_requirements(config, "mm", "nt")
        assert k % req["k_multiple"] == 0 and k >= req["k_min"]


def test_split_k_is_offered_for_mm_and_addmm_but_never_bmm() -> None:
    def splits(op: str) -> set[int]:
        problem = synthetic_problem(op, 16, 8192, 8192, dtype="bfloat16", layout="nt", batch=2)
        return {c["split_k"] for c in explain(problem, "gfx950").configs}

    assert splits("mm") > {1} and splits("addmm") > {1}
    assert splits("bmm") == {1}


def test_split_k_needs_whole_k_steps_per_split() -> None:
    # K = 3 * 256: no split of 256-deep steps divides it; 2 and 4 splits of 128 don't either
    result = explain(synthetic_problem("mm", 16, 8192, 768, dtype="bfloat16", layout="nt"),
                     "gfx950")
    for c in result.configs:
        assert 768 % (c["tile_k"] * c["split_k"]) == 0, c


def test_dynamic_m_only_is_eligible_for_mm_and_addmm() -> None:
    """One FlyDSL launcher serves every M: dynamic M alone, with a row-major A, is
    eligible; a symbolic K or N, a column-major A, or bmm is refused with the reason."""
    from dataclasses import replace

    mm = synthetic_problem("mm", 64, 128, 1024, dtype="bfloat16", layout="nt")
    assert problem_reasons(replace(mm, symbolic=((0,), (), (0,)))) == []
    addmm = synthetic_problem("addmm", 64, 128, 1024, dtype="bfloat16", layout="nt")
    assert problem_reasons(replace(addmm, symbolic=((0,), (0,), (), (0,)))) == []
    n_too = replace(mm, symbolic=((0,), (1,), (0, 1)))
    assert any("symbolic M,N" in r for r in problem_reasons(n_too))
    col_a = synthetic_problem("mm", 64, 128, 1024, dtype="bfloat16", layout="tn")
    assert any("column-major A" in r
               for r in problem_reasons(replace(col_a, symbolic=((0,), (), (0,)))))
    bmm = synthetic_problem("bmm", 64, 128, 1024, dtype="bfloat16", batch=2)
    assert any("mm and addmm only" in r
               for r in problem_reasons(replace(bmm, symbolic=((0, 1), (), (1,)))))


def test_candidates_per_shape_setting(monkeypatch, caplog) -> None:
    from inductor_flydsl.flydsl_backend.offer.offering import (
        CONFIGS_PER_PROBLEM,
        ENV_CANDIDATES,
        configs_per_problem,
    )

    problem = synthetic_problem("mm", 256, 1024, 512, dtype="bfloat16", layout="nt")
    monkeypatch.delenv(ENV_CANDIDATES, raising=False)
    assert configs_per_problem() == CONFIGS_PER_PROBLEM == len(explain(problem, "gfx950").configs)
    monkeypatch.setenv(ENV_CANDIDATES, "24")
    assert len(explain(problem, "gfx950").configs) == 24
    for bad in ("0", "65", "many", "-3"):
        monkeypatch.setenv(ENV_CANDIDATES, bad)
        assert configs_per_problem() == CONFIGS_PER_PROBLEM
    assert "INDUCTOR_FLYDSL_CANDIDATES" in caplog.text
