"""vLLM's unquantized GEMM op becomes an Inductor GEMM selection (issue 51), checked in
every torch release of the suite without vLLM: the op is registered here with vLLM
0.32.0's schema and fake (``vllm::rocm_unquantized_gemm(Tensor x, Tensor weight,
Tensor? bias=None) -> Tensor``; ``model_executor/layers/utils.py``), with a CPU body that
counts its calls. tests/vllm_client/test_vllm_rocm_linear.py runs vLLM's own op and layers
under ``VllmBackend``.

Real ``torch.compile``, plugin on with a fresh DB:
- static shapes under max-autotune: each op node is a GEMM selection whose recorded
  candidates include vLLM's op (backend ``vllm``) beside ATen; a 3-D activation too;
  the output equals eager;
- left as vLLM dispatches it: a dynamic token count, a compile without max-autotune (the
  compiled graph calls the op, nothing of it is recorded); why other nodes are left
  (dtypes, shapes, a bias that is no row, a strided 3-D activation);
- with the plugin off nothing is rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch._inductor import config

import inductor_flydsl
from inductor_flydsl.db.open import open_db
from inductor_flydsl.db.queries import export_rows
from inductor_flydsl.inductor.vllm_gemm_rewrite import unquantized_reasons

CALLS: list[tuple[int, ...]] = []


def _register_vllm_op() -> torch.library.Library | None:
    try:
        torch.ops.vllm.rocm_unquantized_gemm.default  # noqa: B018  (vLLM itself, if here)
        return None
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("vllm", "FRAGMENT")
    lib.define("rocm_unquantized_gemm(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor")

    def body(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
             ) -> torch.Tensor:
        CALLS.append(tuple(x.shape))
        return torch.nn.functional.linear(x, weight, bias)

    def fake(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
             ) -> torch.Tensor:
        return x.new_empty((*x.shape[:-1], weight.shape[0]))

    lib.impl("rocm_unquantized_gemm", body, "CPU")
    lib.impl("rocm_unquantized_gemm", fake, "Meta")
    torch.library.register_fake("vllm::rocm_unquantized_gemm", fake, lib=lib)
    return lib


_LIB = _register_vllm_op()


def linear_block(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                 w2: torch.Tensor) -> torch.Tensor:
    h = torch.relu(torch.ops.vllm.rocm_unquantized_gemm(x, w1, b1))
    return torch.ops.vllm.rocm_unquantized_gemm(h, w2, None) * 2.0


def _operands(tokens: int = 8, dtype: torch.dtype = torch.float32) -> tuple:
    g = torch.Generator().manual_seed(tokens)
    return (torch.randn(tokens, 32, generator=g, dtype=dtype),
            torch.randn(48, 32, generator=g, dtype=dtype),
            torch.randn(48, generator=g, dtype=dtype),
            torch.randn(16, 48, generator=g, dtype=dtype))


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Path]:
    db = tmp_path / "t.db"
    torch._dynamo.reset()
    inductor_flydsl.enable(db, "readwrite")
    try:
        yield db
    finally:
        inductor_flydsl.disable()
        torch._dynamo.reset()


def _compile(fn, *args: torch.Tensor, dynamic: bool = False,
             max_autotune: bool = True) -> tuple[torch.Tensor, int]:
    """The compiled output, and how often its second call called vLLM's op."""
    with config.patch(max_autotune=max_autotune, fx_graph_cache=False,
                      max_autotune_gemm_backends="ATEN"):
        compiled = torch.compile(fn, dynamic=dynamic)
        compiled(*args)
        CALLS.clear()
        out = compiled(*args)
    return out, len(CALLS)


def _rows(db: Path) -> list[dict]:
    return export_rows(open_db(db, writable=False)) if db.exists() else []


def test_static_op_is_a_selection_with_vllms_op_among_the_recorded_choices(plugin: Path
                                                                           ) -> None:
    args = _operands()
    got, calls = _compile(linear_block, *args)
    torch.testing.assert_close(got, linear_block(*args))
    assert calls == sum(r["backend"] == "vllm" and r["is_winner"] for r in _rows(plugin))
    rows = _rows(plugin)
    problems = {r["summary"] for r in rows}
    assert problems == {"addmm float32 8x48x32 nt alpha=1.0 beta=1.0",
                        "mm float32 8x16x48 nt"}, problems
    for problem in problems:
        ours = [r for r in rows if r["summary"] == problem]
        assert {r["backend"] for r in ours} == {"aten", "vllm"}, ours
        vllm = next(r for r in ours if r["backend"] == "vllm")
        assert vllm["status"] == "ok" and vllm["time_ms"] > 0
        assert json.loads(vllm["config"]) == {"op": "vllm::rocm_unquantized_gemm"}
    stats = inductor_flydsl.stats().as_dict()
    assert stats["errors"] == 0 and stats["recorded"] == 2, stats
    # the report's table of vLLM's op against each winner
    from inductor_flydsl.report import build_report, render_markdown

    report = build_report(open_db(plugin, writable=False), str(plugin))
    assert sorted(report.vllm_ops["problem"]) == sorted(problems)
    assert report.summary()["vllm_ops"]["problems"] == 2
    assert "## vLLM's own GEMM op against the winner" in render_markdown(report)
    from inductor_flydsl.cli.vllm_serving import vllm_op_rows  # the serving script's table

    assert sorted(r["problem"] for r in vllm_op_rows(plugin)) == sorted(problems)


def test_a_3d_activation_is_rewritten_through_views(plugin: Path) -> None:
    x, w1, b1, _ = _operands()
    x3 = x.view(2, 4, 32)

    def fn(x3: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor) -> torch.Tensor:
        return torch.ops.vllm.rocm_unquantized_gemm(x3, w1, b1)

    got, _ = _compile(fn, x3, w1, b1)
    assert got.shape == (2, 4, 48)
    torch.testing.assert_close(got, fn(x3, w1, b1))
    assert {r["summary"] for r in _rows(plugin)} == {
        "addmm float32 8x48x32 nt alpha=1.0 beta=1.0"}


@pytest.mark.parametrize("case", ["dynamic", "no max-autotune"])
def test_left_as_vllm_dispatches_it(plugin: Path, case: str) -> None:
    args = _operands(tokens=8)
    got, calls = _compile(linear_block, *args, dynamic=case == "dynamic",
                          max_autotune=case != "no max-autotune")
    torch.testing.assert_close(got, linear_block(*args))
    assert calls == 2  # the compiled graph calls vLLM's op for both
    assert not [r for r in _rows(plugin) if r["backend"] == "vllm"]


def test_with_the_plugin_off_nothing_changes() -> None:
    torch._dynamo.reset()
    args = _operands()
    got, calls = _compile(linear_block, *args)
    torch.testing.assert_close(got, linear_block(*args))
    assert calls == 2
    torch._dynamo.reset()


@pytest.mark.parametrize(("shapes", "why"), [
    (((8, 32), (48, 32), (48,), torch.float32, torch.bfloat16), "dtypes"),
    (((8, 32), (48, 16), None, torch.float32, torch.float32), "shapes"),
    (((8, 32), (48, 32), (8, 48), torch.float32, torch.float32), "bias of shape"),
])
def test_reasons_name_what_is_left(shapes: tuple, why: str) -> None:
    x_shape, w_shape, b_shape, x_dtype, w_dtype = shapes
    reasons = unquantized_reasons(
        torch.empty(x_shape, dtype=x_dtype), torch.empty(w_shape, dtype=w_dtype),
        torch.empty(b_shape, dtype=x_dtype) if b_shape else None)
    assert any(r.startswith(why) for r in reasons), reasons
    x = torch.empty(2, 8, 32).transpose(0, 1)
    assert unquantized_reasons(x, torch.empty(48, 32), None) == [
        "a non-contiguous activation of more than two dimensions"]
