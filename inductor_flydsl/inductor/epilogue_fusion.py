"""FlyDSL GEMMs with their pointwise epilogue fused, decided by benchmarking against
Inductor's own handling of the same GEMM and epilogue.

How it works (only while the plugin is on, ``FLYDSL`` is among the GEMM backends and the
GEMM's device can run FlyDSL kernels; otherwise the graph is left alone):

1. A post-grad graph pass (``config.post_grad_custom_post_pass``, a ``CustomGraphPass``
   chained after a user's) finds each static bf16/fp16 ``mm``/``addmm`` whose result only
   feeds pointwise ops a fused kernel can compute (``epilogue_spec``: add, sub, mul,
   div, neg, exp, erf, tanh, relu, sigmoid, maximum, minimum, dtype conversions; extra
   operands of the output's shape, a vector over N or over M, scalars). The GEMM and the
   largest such region with a single output become one ``inductor_flydsl::gemm_epilogue``
   node; the region itself (the exact original ops) is kept in a registry under a stable
   id. Anything else is left as it was.
2. Its lowering (``user_lowerings``, the hook ``register_custom_op_autotuning`` uses) runs
   one selection, ``gemm_epilogue``, among:
   - the region as a subgraph (``SubgraphTemplate``): benchmarked as Inductor compiles it
     with the same max-autotune settings (FlyDSL left out), so its time is Inductor's own
     decision for that GEMM and epilogue: a fused Triton template or the best GEMM plus
     a separate epilogue kernel;
   - FlyDSL candidates with the epilogue fused (added by the plugin's choice provider:
     ``flydsl_backend.provider``), validated against the float64 reference first.
   The selection goes through the plugin's hooks like any GEMM: recorded with the
   epilogue in the problem key (``attrs``: its id, ops and region), served from the DB
   later. If the subgraph wins it is inlined, and Inductor lowers the original ops as it
   would have without the plugin (its own GEMM selection included).
Any failure leaves the region to Inductor unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import operator
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..epilogue_spec import EpilogueSpec, InvalidEpilogue, Operand, Step
from ..keys import stable_id
from ..version import __version__
from . import internals, user_passes

log = logging.getLogger("inductor_flydsl")

SELECTION_NAME = "gemm_epilogue"
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


# ---- the graph op ---------------------------------------------------------------------
_regions: dict[str, torch.fx.GraphModule] = {}
_regions_lock = threading.Lock()
MAX_REGIONS = 4096


def _remember(region_id: str, gm: torch.fx.GraphModule) -> None:
    with _regions_lock:
        if len(_regions) >= MAX_REGIONS:
            _regions.pop(next(iter(_regions)))
        _regions[region_id] = gm


def region_module(region_id: str) -> torch.fx.GraphModule | None:
    with _regions_lock:
        return _regions.get(region_id)


# flexible_layout: Inductor puts no stride constraint on the op's inputs (its default for
# an op it has no lowering of is to fix their stride order, realizing them: that would
# change how Inductor lowers the region's output, which must stay as without the plugin)
@torch.library.custom_op("inductor_flydsl::gemm_epilogue", mutates_args=(),
                         tags=(torch.Tag.flexible_layout,))
def gemm_epilogue(original: torch.Tensor, epilogue: str, region: str,
                  inputs: str) -> torch.Tensor:
    """``epilogue(a @ b, x0..)``, which ``original`` (the region's own output, computed
    by the original ops the graph still holds) already is: its lowering either returns
    ``original`` as Inductor lowered it or a fused FlyDSL kernel's result. ``inputs``
    names the graph nodes of ``a, b, x0, x1, x2, x3`` (JSON): named, not passed, so the
    op adds no use to them (Inductor decides whether to realize a value by its uses)."""
    return original.clone()


@gemm_epilogue.register_fake
def _gemm_epilogue_fake(original: torch.Tensor, epilogue: str, region: str,
                        inputs: str) -> torch.Tensor:
    return torch.empty_like(original)


@torch.library.custom_op("inductor_flydsl::keep_for_selection", mutates_args=(),
                         tags=(torch.Tag.flexible_layout,))
def keep_for_selection(names: str) -> torch.Tensor:
    """A marker at the top of a graph with ``gemm_epilogue`` nodes: its lowering keeps
    what Inductor lowers the nodes ``names`` (JSON) to until the selections that read
    them by name are lowered (Inductor's interpreter frees a value after its last use,
    and ``gemm_epilogue`` names its inputs instead of using them). Computes nothing."""
    return torch.zeros(())


@keep_for_selection.register_fake
def _keep_for_selection_fake(names: str) -> torch.Tensor:
    return torch.empty(())


# ---- finding a fusable region ---------------------------------------------------------
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


# ---- the pass -------------------------------------------------------------------------
def _region_module(region: Region) -> torch.fx.GraphModule:
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


def fuse_epilogues(graph: torch.fx.Graph,
                   eligible: Callable[[torch.fx.Node], bool]) -> int:
    """Replace each fusable GEMM + epilogue region by one ``gemm_epilogue`` node."""
    fused = 0
    kept: set[str] = set()
    gemms = [x for x in graph.nodes if x.op == "call_function"
             and x.target in (aten.mm.default, aten.addmm.default)]
    for gemm in gemms:
        if not eligible(gemm):
            continue
        found = find_region(gemm)
        if isinstance(found, str):
            log.debug("inductor_flydsl: %s not fused: %s", gemm.name, found)
            continue
        gm = _region_module(found)
        rid = region_id(gm)
        _remember(rid, gm)
        slots = [*found.operands, *([found.a] * (MAX_OPERANDS - len(found.operands)))]
        # The original ops stay where they are (Inductor lowers them exactly as without
        # the plugin); the selection node comes after the region's output and takes its
        # place for every later use. Whichever loses is dead code Inductor drops.
        with graph.inserting_after(found.sink):
            new = graph.call_function(
                torch.ops.inductor_flydsl.gemm_epilogue.default,
                (found.sink, found.spec.text(), rid,
                 json.dumps([x.name for x in (found.a, found.b, *slots)])))
        new.meta.update(found.sink.meta)
        found.sink.replace_all_uses_with(new, delete_user_cb=functools.partial(
            operator.is_not, new))
        fused += 1
        kept.update(x.name for x in (found.a, found.b, *found.operands))
        log.debug("inductor_flydsl: %s + epilogue %s -> gemm_epilogue", gemm.name,
                  found.spec.summary())
    if kept:
        first = next(n for n in graph.nodes if n.op != "placeholder")
        with graph.inserting_before(first):
            graph.call_function(torch.ops.inductor_flydsl.keep_for_selection.default,
                                (json.dumps(sorted(kept)),))
    return fused


class EpilogueFusionPass(internals.CustomInferenceAwareGraphPass):
    """``config.post_grad_custom_post_pass`` while the plugin is on: runs the value that
    was there before (a user's passes, in any form torch accepts: ``user_passes``) as
    Inductor would, then :func:`fuse_epilogues` where the gate allows. Inference-aware, so
    Inductor hands it ``is_inference`` for the user's inference-aware passes; a framework
    that calls it with the graph alone gets ``is_inference=False`` passed on."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner

    def __call__(self, graph: torch.fx.Graph, is_inference: bool = False) -> None:
        user_passes.run_graph_passes(self.inner, graph, is_inference)
        gate = _gate
        if gate is None:
            return
        try:
            count = fuse_epilogues(graph, gate)
        except Exception as exc:  # the graph is only changed by a complete replacement
            if _report is not None:
                _report("fusing GEMM epilogues", exc)
            return
        if count and _count is not None:
            _count(count)

    def uuid(self) -> Any:
        """The plugin's own identity and the user's passes' ``uuid()``s; ``None`` (Inductor
        bypasses its FX-graph cache) where the user's passes alone would make it bypass."""
        from ..software import template_version

        inner = user_passes.graph_passes_uuid(self.inner)
        if inner is None:
            return None
        return ("inductor_flydsl.EpilogueFusionPass", __version__, template_version(), inner)


_gate: Callable[[torch.fx.Node], bool] | None = None
_report: Callable[[str, BaseException], None] | None = None
_count: Callable[[int], None] | None = None


def install_pass(gate: Callable[[torch.fx.Node], bool],
                 report: Callable[[str, BaseException], None],
                 count: Callable[[int], None]) -> None:
    global _gate, _report, _count
    config = internals.config
    _gate, _report, _count = gate, report, count
    current = config.post_grad_custom_post_pass
    if not isinstance(current, EpilogueFusionPass):
        config.post_grad_custom_post_pass = EpilogueFusionPass(current)
    internals.user_lowerings[torch.ops.inductor_flydsl.gemm_epilogue.default] = lower_gemm_epilogue
    internals.user_lowerings[torch.ops.inductor_flydsl.keep_for_selection.default] = \
        lower_keep_for_selection


def uninstall_pass() -> None:
    global _gate
    config = internals.config
    _gate = None
    current = config.post_grad_custom_post_pass
    if isinstance(current, EpilogueFusionPass):
        config.post_grad_custom_post_pass = current.inner


# ---- the lowering ---------------------------------------------------------------------
@dataclass(frozen=True)
class ActiveEpilogue:
    spec: EpilogueSpec
    region: str


_active: contextvars.ContextVar[ActiveEpilogue | None] = contextvars.ContextVar(
    "inductor_flydsl_epilogue", default=None)


def active() -> ActiveEpilogue | None:
    """The epilogue of the ``gemm_epilogue`` selection being made (for the choice
    provider and the problem key)."""
    return _active.get()


@contextlib.contextmanager
def _selecting(spec: EpilogueSpec, region: str) -> Iterator[None]:
    token = _active.set(ActiveEpilogue(spec, region))
    try:
        yield
    finally:
        _active.reset(token)


def _inner_patches() -> dict[str, Any]:
    """Inductor's own settings for compiling the region as a competitor, FlyDSL left out."""
    config = internals.config
    tokens = [t.strip() for t in str(config.max_autotune_gemm_backends).split(",")
              if t.strip() and t.strip().upper() != "FLYDSL"]
    return {"max_autotune": config.max_autotune, "max_autotune_gemm": config.max_autotune_gemm,
            "max_autotune_gemm_backends": ",".join(tokens) or "ATEN",
            "benchmark_fusion": config.benchmark_fusion,
            "benchmark_epilogue_fusion": config.benchmark_epilogue_fusion}


def _has_fixed_layout(x: Any) -> bool:
    """A buffer already (a realized value) whose layout is fixed."""
    return bool(internals.is_storage_and_layout(x)) and isinstance(x.get_layout(),
                                                                    internals.FixedLayout)


def _benchmark_copy(x: Any) -> Any:
    """A realized copy of ``x`` (Inductor's own ``clone`` lowering): what a choice is
    benchmarked on when ``x`` itself must stay as Inductor left it (unrealized, or its
    layout not yet fixed). Unused, it is dead code Inductor drops."""
    copy = internals.lowerings[aten.clone.default](x)
    copy.realize()
    return copy


def lower_keep_for_selection(names: str) -> Any:
    """Inductor's interpreter frees each value after its last use; the values the
    selections read by name are taken off those lists (they live until the graph is
    lowered). Returns an unrealized scalar: no code is generated for it."""
    graph = internals.V.graph
    keep = set(json.loads(names))
    for freed in getattr(graph, "user_to_last_uses", {}).values():
        freed[:] = [node for node in freed if node.name not in keep]
    return internals.lowerings[aten.full.default](
        [], 0.0, dtype=torch.float32, device=torch.device("cpu"))


def _lowered(names: list[str]) -> list[Any] | None:
    """What Inductor lowered the graph nodes ``names`` to (the graph being lowered runs
    them in order: they come before the region's output), or None if one is missing."""
    graph = internals.V.graph
    by_name = {node.name: node for node in graph.module.graph.nodes}
    nodes = [by_name.get(name) for name in names]
    if any(node is None or node not in graph.env for node in nodes):
        return None
    return [graph.env[node] for node in nodes]


def lower_gemm_epilogue(original: Any, epilogue: str, region: str, inputs: str) -> Any:
    """One selection between Inductor's own handling of the region (``original``, the
    region as Inductor lowered it, untouched: benchmarked as a subgraph of the same ops)
    and FlyDSL kernels with the epilogue fused. Nothing Inductor lowered is changed: the
    choices read the inputs Inductor has already made buffers with fixed layouts (the
    GEMM's, by its own lowering) and realized copies of the others; when Inductor's own
    handling wins, ``original`` itself is the result (the copies are dead code)."""
    gm = region_module(region)
    if gm is None:
        return original
    try:
        lowered = _lowered(json.loads(inputs))
        if lowered is None:
            return original
        # Every choice reads the selection's inputs (Inductor's benchmark keys them by
        # name), and SubgraphChoiceCaller fixes its inputs' layouts: a value that is not
        # a buffer with a fixed layout yet (its layout is Inductor's to decide later) is
        # read through a realized copy, so Inductor's lowering of it stays as it was.
        nodes = [x if _has_fixed_layout(x) else _benchmark_copy(x) for x in lowered]
        spec = EpilogueSpec.from_json(epilogue)

        def original_ops(*tensors: torch.Tensor) -> torch.Tensor:
            return gm(*tensors)

        original_ops.__name__ = "inductor_region"
        template = internals.SubgraphTemplate(name=SELECTION_NAME)
        choices = template.generate_custom_op_choices(
            name=SELECTION_NAME, decompositions=[original_ops], input_nodes=nodes,
            non_tensor_args=[{}], config_patches_list=[_inner_patches()])
        for choice in choices:
            # When Inductor's own handling wins, the result is the region as Inductor
            # lowered it in the graph, not a separately compiled subgraph
            choice.output_node = functools.partial(  # type: ignore[method-assign]
                _identity, original)
        with _selecting(spec, region):
            node, _ = internals.autotune_select_algorithm(
                SELECTION_NAME, choices, nodes, choices[0].layout,
                return_multi_template=False)
    except Exception as exc:
        if _report is not None:
            _report("selecting a fused epilogue", exc)
        return original
    return node


def _identity(value: Any) -> Any:
    return value


def problem_attrs() -> tuple[tuple[str, Any], ...]:
    """The ``attrs`` of a ``gemm_epilogue`` problem key: the epilogue's id and ops and
    the region's id (the exact original ops it competes with)."""
    current = active()
    if current is None:
        return ()
    return (("epilogue", current.spec.id), ("epilogue_ops", tuple(current.spec.ops())),
            ("region", current.region))

