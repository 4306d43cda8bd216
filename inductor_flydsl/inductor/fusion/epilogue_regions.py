"""Finding a GEMM's fusable epilogue region in a post-grad FX graph: the largest set of
pointwise ops after a static bf16/fp16 ``mm``/``addmm`` that a fused kernel can compute
(``epilogue_spec``), with a single output; and the region's own ops as a module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ...problems.epilogue_spec import EpilogueSpec, InvalidEpilogue, Operand, Step
from ...problems.keys import stable_id

MAX_OPERANDS = 4  # extra operand slots of the fused op (unused ones repeat ``a``)


aten = torch.ops.aten


prims = torch.ops.prims

_BINARY = {aten.add.Tensor: "add", aten.sub.Tensor: "sub", aten.mul.Tensor: "mul",
           aten.div.Tensor: "div", aten.maximum.default: "maximum",
           aten.minimum.default: "minimum"}

_UNARY = {aten.neg.default: "neg", aten.exp.default: "exp", aten.erf.default: "erf",
          aten.tanh.default: "tanh", aten.relu.default: "relu",
          aten.sigmoid.default: "sigmoid"}

_CONVERT = prims.convert_element_type.default

_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@dataclass
class Region:
    gemm: torch.fx.Node
    a: torch.fx.Node
    b: torch.fx.Node
    nodes: list[torch.fx.Node]  # the epilogue nodes, in graph order (gemm excluded)
    sink: torch.fx.Node
    operands: list[torch.fx.Node]
    spec: EpilogueSpec


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _static_shape(node: Any) -> tuple[int, ...] | None:
    val = _val(node)
    if not isinstance(val, torch.Tensor):
        return None
    # never int() a SymInt: that would guard on it and specialize a dynamic shape
    if not all(type(s) is int for s in val.shape):
        return None
    return tuple(val.shape)


def _operand_kind(node: torch.fx.Node, m: int, n: int) -> str | None:
    shape, val = _static_shape(node), _val(node)
    if shape is None or val.dtype not in _DTYPES:
        return None
    if shape in ((n,), (1, n)):
        return "col"
    if shape == (m, 1):
        return "row"
    if shape == (m, n) and type(val.stride()[-1]) is int and val.stride()[-1] == 1:
        return "tile"
    return None


def _descendants(start: torch.fx.Node) -> set[torch.fx.Node]:
    seen, todo = {start}, [start]
    while todo:
        for user in todo.pop().users:
            if user not in seen:
                seen.add(user)
                todo.append(user)
    return seen


def find_region(gemm: torch.fx.Node) -> Region | str:
    """The largest fusable epilogue region after ``gemm`` with a single output, or why
    there is none."""
    if gemm.target == aten.addmm.default:
        if set(gemm.kwargs) - {"alpha", "beta"} or gemm.kwargs.get("alpha", 1) != 1 \
                or gemm.kwargs.get("beta", 1) != 1:
            return "addmm with alpha/beta"
        bias, a, b = gemm.args[:3]
    elif gemm.target == aten.mm.default:
        a, b = gemm.args[:2]
        bias = None
    else:
        return "not mm/addmm"
    shape, val = _static_shape(gemm), _val(gemm)
    if shape is None or len(shape) != 2 or val.dtype not in (torch.bfloat16, torch.float16):
        return "not a static 2-D bf16/fp16 GEMM"
    m, n = shape
    downstream = _descendants(gemm)
    region: list[torch.fx.Node] = []
    inside = {gemm}
    for node in gemm.graph.nodes:
        if node not in downstream or node is gemm:
            continue
        if node.op != "call_function" or not _fusable(node, inside, downstream, m, n):
            continue
        region.append(node)
        inside.add(node)
    return _close(gemm, a, b, bias, region, m, n)


def _fusable(node: torch.fx.Node, inside: set, downstream: set, m: int, n: int) -> bool:
    target = node.target
    if target not in _BINARY and target not in _UNARY and target != _CONVERT:
        return False
    if target == _CONVERT and node.args[1] not in _DTYPES:
        return False
    if target in (aten.add.Tensor, aten.sub.Tensor) and node.kwargs.get("alpha", 1) != 1:
        return False
    if _static_shape(node) != (m, n):
        return False
    reads_region = False
    for arg in node.args[:2] if target in _BINARY else node.args[:1]:
        if isinstance(arg, torch.fx.Node):
            if arg in inside:
                reads_region = True
            elif arg in downstream or _operand_kind(arg, m, n) is None:
                return False  # depends on the GEMM outside the region, or not broadcastable
        elif isinstance(arg, bool) or not isinstance(arg, int | float):
            return False
    return reads_region


def _close(gemm: torch.fx.Node, a: Any, b: Any, bias: Any, region: list[torch.fx.Node],
           m: int, n: int) -> Region | str:
    """Shrink ``region`` to the largest prefix-closed part with one output, and build its
    spec. An ``addmm`` whose bias is not a vector over N (a residual tile, a per-row
    vector) is an epilogue by itself: with nothing after it, it is fused alone."""
    if bias is not None and isinstance(bias, torch.fx.Node) \
            and _operand_kind(bias, m, n) in ("tile", "row"):
        if not region:
            try:
                return _build(gemm, a, b, bias, [], gemm, m, n)
            except InvalidEpilogue as exc:
                return f"epilogue not fusable: {exc}"
    for end in range(len(region), 0, -1):
        sink = region[end - 1]
        part = _ancestors_within(sink, region[:end])
        members = {gemm, *part}
        if all(u in members for x in members if x is not sink for u in x.users):
            try:
                return _build(gemm, a, b, bias, part, sink, m, n)
            except InvalidEpilogue as exc:
                return f"epilogue not fusable: {exc}"
    return "no pointwise epilogue with a single output"


def _ancestors_within(sink: torch.fx.Node, region: list[torch.fx.Node]) -> list[torch.fx.Node]:
    allowed = set(region)
    keep, todo = {sink}, [sink]
    while todo:
        for arg in todo.pop().all_input_nodes:
            if arg in allowed and arg not in keep:
                keep.add(arg)
                todo.append(arg)
    return [x for x in region if x in keep]


def _build(gemm: torch.fx.Node, a: Any, b: Any, bias: Any, part: list[torch.fx.Node],
           sink: torch.fx.Node, m: int, n: int) -> Region:
    operands: list[torch.fx.Node] = []
    kinds: list[Operand] = []
    values: dict[torch.fx.Node, str | float] = {gemm: "acc"}
    steps: list[Step] = []

    def operand(node: torch.fx.Node) -> str:
        if node not in operands:
            kind = _operand_kind(node, m, n)
            if kind is None:
                raise InvalidEpilogue(f"operand {node.name} is not broadcastable to {m}x{n}")
            operands.append(node)
            kinds.append(Operand(kind, _DTYPES[_val(node).dtype]))
        return f"x{operands.index(node)}"

    def value(arg: Any) -> str | float:
        if isinstance(arg, torch.fx.Node):
            return values[arg] if arg in values else operand(arg)
        return float(arg)

    if bias is not None:
        steps.append(Step("add", ("acc", operand(bias))))
        values[gemm] = "s0"
    for node in part:
        if node.target == _CONVERT:  # every step computes in fp32; the sink's dtype is
            values[node] = value(node.args[0])  # the output's
            continue
        op = _BINARY.get(node.target) or _UNARY[node.target]
        args = node.args[:2] if node.target in _BINARY else node.args[:1]
        steps.append(Step(op, tuple(value(x) for x in args)))
        values[node] = f"s{len(steps) - 1}"
    if len(operands) > MAX_OPERANDS:
        raise InvalidEpilogue(f"{len(operands)} extra operands (at most {MAX_OPERANDS})")
    out_dtype = _DTYPES[_val(sink).dtype]
    if sink is not gemm and values[sink] != (f"s{len(steps) - 1}" if steps else "acc"):
        raise InvalidEpilogue("the region's output is not its last step")
    spec = EpilogueSpec.from_json(EpilogueSpec(tuple(kinds), tuple(steps),
                                               out_dtype).to_json())
    return Region(gemm, a, b, part, sink, operands, spec)


def region_module_of(region: Region) -> torch.fx.GraphModule:
    """The original ops as a module of (a, b, x0, x1, x2, x3)."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    env[region.a] = graph.placeholder("a")
    env[region.b] = graph.placeholder("b")
    slots = [graph.placeholder(f"x{i}") for i in range(MAX_OPERANDS)]
    for node, slot in zip(region.operands, slots, strict=False):
        env[node] = slot
    for node in [region.gemm, *region.nodes]:
        if node not in env:
            env[node] = graph.node_copy(node, lambda x: env[x])
    graph.output(env[region.sink])
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def region_id(gm: torch.fx.GraphModule) -> str:
    """Stable across processes: the code of the region's graph."""
    return stable_id({"region": gm.code})
