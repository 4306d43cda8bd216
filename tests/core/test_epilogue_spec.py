"""The epilogue of a fused GEMM as data: parsing untrusted JSON, the reference semantics,
and the regions the graph pass finds in real post-grad graphs."""

from __future__ import annotations

import pytest
import torch

from inductor_flydsl.inductor.fusion.epilogue_fusion import find_region
from inductor_flydsl.problems.epilogue_spec import EpilogueSpec, InvalidEpilogue, reference

SILU_MUL = {"operands": [{"kind": "tile", "dtype": "bfloat16"}],
            "steps": [["neg", "acc"], ["exp", "s0"], ["add", "s1", 1.0], ["div", "acc", "s2"],
                      ["mul", "s3", "x0"]],
            "out_dtype": "bfloat16"}


def test_round_trip_and_identity() -> None:
    spec = EpilogueSpec.from_json(SILU_MUL)
    again = EpilogueSpec.from_json(spec.text())
    assert again == spec and again.id == spec.id
    assert spec.ops() == ["neg", "exp", "add", "div", "mul"]
    assert "tile0" in spec.summary() and spec.summary().endswith("-> bfloat16")
    other = EpilogueSpec.from_json({**SILU_MUL, "out_dtype": "float32"})
    assert other.id != spec.id


@pytest.mark.parametrize("bad, reason", [
    ("not json", "not JSON"),
    ({"operands": [], "steps": []}, "operands, steps, out_dtype"),
    ({**SILU_MUL, "steps": [["pow", "acc", 2.0]]}, "not fusable"),
    ({**SILU_MUL, "steps": [["relu", "s0"]]}, "names no earlier value"),
    ({**SILU_MUL, "steps": [["add", "acc", "x7"]]}, "names no earlier value"),
    ({**SILU_MUL, "steps": [["add", "acc", float("inf")]]}, "finite"),
    ({**SILU_MUL, "steps": [["add", "acc", True]]}, "boolean"),
    ({**SILU_MUL, "steps": [["relu", "acc", "acc"]]}, "takes 1 argument"),
    ({**SILU_MUL, "steps": [["relu", "acc"]]}, "read by no step"),
    ({**SILU_MUL, "operands": [{"kind": "cube", "dtype": "bfloat16"}]}, "kind"),
    ({**SILU_MUL, "operands": [{"kind": "tile", "dtype": "int8"}]}, "dtype"),
    ({**SILU_MUL, "out_dtype": "float64"}, "out_dtype"),
    ({**SILU_MUL, "steps": [["relu", "acc"]] * 25}, "at most 24"),
])
def test_malformed_epilogues_are_refused_with_a_reason(bad: object, reason: str) -> None:
    with pytest.raises(InvalidEpilogue, match=reason):
        EpilogueSpec.from_json(bad)


def test_reference_matches_torch_ops() -> None:
    torch.manual_seed(0)
    spec = EpilogueSpec.from_json(SILU_MUL)
    acc, up = torch.randn(8, 16), torch.randn(8, 16).bfloat16()
    expected = (torch.nn.functional.silu(acc) * up.float()).bfloat16()
    torch.testing.assert_close(reference(spec, acc, [up]), expected)
    col_row = EpilogueSpec.from_json({
        "operands": [{"kind": "col", "dtype": "float32"}, {"kind": "row", "dtype": "float32"}],
        "steps": [["add", "acc", "x0"], ["mul", "s0", "x1"], ["gelu_tanh", "s1"]],
        "out_dtype": "float32"})
    bias, scale = torch.randn(16), torch.randn(8)
    got = reference(col_row, acc, [bias, scale])
    torch.testing.assert_close(got, torch.nn.functional.gelu((acc + bias) * scale[:, None],
                                                             approximate="tanh"))


def _post_grad_graph(fn, *args) -> torch.fx.Graph:
    """The post-grad graph Inductor lowers for ``fn`` (captured by a custom pass)."""
    import torch._inductor.config as config

    seen: list[torch.fx.Graph] = []

    def capture(graph: torch.fx.Graph) -> None:
        seen.append(graph)
        raise RuntimeError("captured")

    torch._dynamo.reset()
    with config.patch(post_grad_custom_post_pass=capture), pytest.raises(Exception,
                                                                          match="captured"):
        torch.compile(fn, backend="inductor")(*args)
    return seen[0]


def _gemms(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function" and n.target in
            (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)]


def test_regions_found_in_real_post_grad_graphs() -> None:
    x, w1, w2 = (torch.randn(32, 64, dtype=torch.bfloat16),
                 torch.randn(64, 64, dtype=torch.bfloat16),
                 torch.randn(64, 64, dtype=torch.bfloat16))
    swiglu = _post_grad_graph(lambda x, a, b: torch.nn.functional.silu(x @ a) * (x @ b),
                              x, w1, w2)
    gate, up = _gemms(swiglu)
    found = find_region(gate)
    assert not isinstance(found, str), found
    assert found.spec.ops() == ["neg", "exp", "add", "div", "mul"]  # silu, spelled out
    assert [o.kind for o in found.spec.operands] == ["tile"] and found.operands == [up]
    # seen alone, up's product times silu(gate) is a region too (the pass takes the
    # first GEMM first, whose region then holds that product)
    alone = find_region(up)
    assert not isinstance(alone, str) and alone.spec.ops() == ["mul"]

    gelu = _post_grad_graph(lambda x, a: torch.nn.functional.gelu(x @ a), x, w1)
    found = find_region(_gemms(gelu)[0])
    assert not isinstance(found, str) and "erf" in found.spec.ops()

    # the GEMM's result is also used outside any fusable op: the region stops before it
    def both(x: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x @ a
        return torch.relu(y), y  # the product itself is an output too

    assert isinstance(find_region(_gemms(_post_grad_graph(both, x, w1))[0]), str)

    residual = _post_grad_graph(lambda x, a: x @ a + x, x, w1)
    found = find_region(_gemms(residual)[0])
    assert not isinstance(found, str) and found.spec.ops() == ["add"]
    assert [o.kind for o in found.spec.operands] == ["tile"]

    fp32 = _post_grad_graph(lambda x, a: torch.relu(x.float() @ a.float()), x, w1)
    assert "bf16/fp16" in find_region(_gemms(fp32)[0])
