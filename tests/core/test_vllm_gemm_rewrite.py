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
from inductor_flydsl.inductor.vllm.vllm_gemm_rewrite import unquantized_reasons
from inductor_flydsl.numerics.mx import mx_reference

CALLS: list[tuple[int, ...]] = []


def _register_vllm_op(name: str, schema: str, body, fake
                      ) -> torch.library.Library | None:
    """vLLM's op ``vllm::<name>`` with its schema, a CPU body that counts its calls and a
    fake; nothing when vLLM itself registered it."""
    try:
        getattr(torch.ops.vllm, name).default  # noqa: B018  (vLLM itself, if here)
        return None
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("vllm", "FRAGMENT")
    lib.define(f"{name}{schema}")

    def counted(*args):
        CALLS.append(tuple(args[0].shape))
        return body(*args)

    lib.impl(name, counted, "CPU")
    torch.library.register_fake(f"vllm::{name}", fake, lib=lib)
    return lib


def mxfp8_reference(x: torch.Tensor, x_scale: torch.Tensor, weight: torch.Tensor,
                    weight_scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """What vLLM's MXFP8 op computes (E8M0 bytes per row and 32 K for x, per 32x32 block
    for the weight): the project's float64 MX reference in the block layout."""
    return mx_reference(x, weight, x_scale, weight_scale, layout="nt_b32").to(out_dtype)


_LIB = _register_vllm_op(
    "rocm_unquantized_gemm", "(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
    torch.nn.functional.linear,
    lambda x, weight, bias=None: x.new_empty((*x.shape[:-1], weight.shape[0])))
_MX_LIB = _register_vllm_op(
    "rocm_mxfp8_block32_gemm", "(Tensor x, Tensor x_scale, Tensor weight, "
    "Tensor weight_scale, ScalarType out_dtype) -> Tensor", mxfp8_reference,
    lambda x, x_scale, weight, weight_scale, out_dtype: x.new_empty(
        (x.shape[0], weight.shape[0]), dtype=out_dtype))


def mxfp8_operands(m: int = 8, n: int = 96, k: int = 256) -> tuple:
    g = torch.Generator().manual_seed(m)
    x = (torch.randn(m, k, generator=g) * 4).to(torch.float8_e4m3fn)
    weight = (torch.randn(n, k, generator=g) * 4).to(torch.float8_e4m3fn)
    x_scale = torch.randint(120, 130, (m, k // 32), generator=g, dtype=torch.uint8)
    w_scale = torch.randint(120, 130, (-(-n // 32), k // 32), generator=g, dtype=torch.uint8)
    return x, x_scale, weight, w_scale


def mxfp8_linear(x: torch.Tensor, x_scale: torch.Tensor, weight: torch.Tensor,
                 w_scale: torch.Tensor) -> torch.Tensor:
    out = torch.ops.vllm.rocm_mxfp8_block32_gemm(x, x_scale, weight, w_scale, torch.bfloat16)
    return out + 1.0


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


COUNTERS = ("errors", "recorded", "epilogue_fusions")
_AT_START: dict[str, int] = {}


def _gained() -> dict[str, int]:
    """The plugin's counters since the test's fixture enabled it (they are the process's:
    other tests in this worker may have counted before)."""
    now = inductor_flydsl.stats().as_dict()
    return {k: now[k] - _AT_START.get(k, 0) for k in COUNTERS}


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Path]:
    db = tmp_path / "t.db"
    torch._dynamo.reset()
    inductor_flydsl.enable(db, "readwrite")
    now = inductor_flydsl.stats().as_dict()
    _AT_START.update({k: now[k] for k in COUNTERS})
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
    stats = _gained()
    assert stats["errors"] == 0 and stats["recorded"] == 2, stats
    # the report's table of vLLM's op against each winner
    from inductor_flydsl.report import build_report, render_markdown

    report = build_report(open_db(plugin, writable=False), str(plugin))
    assert sorted(report.vllm_ops["problem"]) == sorted(problems)
    assert report.summary()["vllm_ops"]["problems"] == 2
    assert "## vLLM's own GEMM op against the winner" in render_markdown(report)
    from inductor_flydsl.cli.vllm_serving import vllm_op_rows  # the serving script's table

    assert sorted(r["problem"] for r in vllm_op_rows(plugin)) == sorted(problems)


def test_where_vllms_op_is_chosen_the_compiled_graph_calls_it(tmp_path: Path) -> None:
    """vLLM's op picked wherever it is offered, by Inductor's own hook for that (a user's
    ``InductorChoices.override_best_choice``, under the plugin's layered class): the
    compiled graph calls it for both GEMMs (its fallback kernel over views of the
    selection's buffers) and the DB's winners are vLLM's op."""
    from torch._inductor.choices import InductorChoices

    class PreferVllm(InductorChoices):
        def override_best_choice(self, best_choice, timings):
            vllm = [c for c in timings if c.name == "vllm_rocm_unquantized_gemm"]
            return vllm[0] if vllm else best_choice

    db = tmp_path / "t.db"
    torch._dynamo.reset()
    try:
        with config.patch(inductor_choices_class=PreferVllm):
            inductor_flydsl.enable(db, "readwrite")
            args = _operands()
            got, calls = _compile(linear_block, *args)
    finally:
        inductor_flydsl.disable()
        torch._dynamo.reset()
    torch.testing.assert_close(got, linear_block(*args))
    assert calls == 2
    winners = [r for r in _rows(db) if r["is_winner"]]
    assert len(winners) == 2 and {r["backend"] for r in winners} == {"vllm"}, winners


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


def test_the_rewritten_gemm_and_its_epilogue_become_a_fused_epilogue_selection(
        plugin: Path) -> None:
    """As an ``addmm`` does: with the pass's gate open (as on a device where FlyDSL fuses
    epilogues; on CPU none does), a bf16 op + relu * 2 region is one ``gemm_epilogue``
    selection; the output equals eager."""
    from inductor_flydsl.inductor.fusion import epilogue_pass

    hooks = epilogue_pass.hooks()
    assert hooks is not None
    epilogue_pass.set_hooks(epilogue_pass.FusionHooks(lambda gemm: True, hooks.report,
                                                      hooks.count))
    try:
        args = _operands(dtype=torch.bfloat16)
        got, _ = _compile(linear_block, *args)
    finally:
        epilogue_pass.set_hooks(hooks)
    torch.testing.assert_close(got, linear_block(*args), rtol=2e-2, atol=2e-2)
    stats = _gained()
    assert stats["epilogue_fusions"] >= 1 and stats["errors"] == 0, stats


@pytest.mark.parametrize("case", ["dynamic", "no max-autotune"])
def test_left_as_vllm_dispatches_it(plugin: Path, case: str) -> None:
    args = _operands(tokens=8)
    got, calls = _compile(linear_block, *args, dynamic=case == "dynamic",
                          max_autotune=case != "no max-autotune")
    torch.testing.assert_close(got, linear_block(*args))
    assert calls == 2  # the compiled graph calls vLLM's op for both
    assert not [r for r in _rows(plugin) if r["backend"] == "vllm"]


@pytest.mark.parametrize("dynamic", [False, True])
def test_mxfp8_block32_op_lowers_to_a_selection_with_vllms_op(plugin: Path,
                                                              dynamic: bool) -> None:
    """Static: the node became the plugin's stand-in, lowered to one ``scaled_mm``
    selection with vLLM's op as its choice (on CPU no FlyDSL choice: one choice, nothing
    benchmarked or recorded), and the compiled graph calls vLLM's op; dynamic: left."""
    from inductor_flydsl.inductor.vllm import vllm_choices

    selections = []
    original = vllm_choices.lower_mxfp8_block32

    def spy(*args, **kwargs):
        selections.append(args[0].get_size())
        return original(*args, **kwargs)

    from torch._inductor.lowering import user_lowerings

    from inductor_flydsl.inductor.vllm.vllm_ops import mxfp8_block32_op

    user_lowerings[mxfp8_block32_op()] = spy
    try:
        args = mxfp8_operands()
        got, calls = _compile(mxfp8_linear, *args, dynamic=dynamic)
    finally:
        user_lowerings[mxfp8_block32_op()] = original
    torch.testing.assert_close(got, mxfp8_linear(*args))
    assert calls == 1  # vLLM's op ran inside the compiled graph
    assert len(selections) == (0 if dynamic else 1), selections
    stats = _gained()
    assert stats["errors"] == 0, stats


def test_mxfp8_reasons_name_what_is_left() -> None:
    from inductor_flydsl.inductor.vllm.vllm_gemm_rewrite import mxfp8_reasons

    x, x_scale, weight, w_scale = mxfp8_operands(n=96)
    assert mxfp8_reasons(x, x_scale, weight, w_scale, torch.bfloat16) == []
    per_row = torch.zeros(96, 8, dtype=torch.uint8)  # scales expanded to every row
    assert any("weight_scale" in r for r in mxfp8_reasons(x, x_scale, weight, per_row,
                                                          torch.bfloat16))
    assert any("output dtype" in r for r in mxfp8_reasons(x, x_scale, weight, w_scale,
                                                          torch.float32))
    assert any("not e4m3" in r for r in mxfp8_reasons(x.float(), x_scale, weight, w_scale,
                                                      torch.bfloat16))


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
