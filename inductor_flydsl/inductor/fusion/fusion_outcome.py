"""What the scheduler finally ran for a noted GEMM and the epilogue around it, read from
its (possibly fused) scheduler nodes as one ``EpilogueDecision``.

Inductor decides a GEMM together with its epilogue: the selection gives the GEMM-only
winner, then the scheduler fuses pointwise consumers into a template (the CPU C++ GEMM
template, a Triton template) or leaves them to a separate kernel behind an extern call;
on a GPU with ``benchmark_epilogue_fusion`` the selection itself is deferred
(``MultiTemplateBuffer``) and the scheduler benchmarks the best template with the
epilogue fused against the GEMM-only winner plus a separate epilogue kernel. The decision
holds the epilogue (the ops of the nodes fused into the GEMM kernel and of the consumers
left outside it, and its exact steps), the kernel the final code runs, whether the
epilogue is fused, the GEMM-only winner and, for a deferred choice, the fused kernel's
benchmarked time against the GEMM-only winner's. ``fusion_observer.py`` hands it to the
plugin; ``fusion_replay.py`` reuses the epilogue's reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...db.store import EpilogueDecision
from ...problems.keys import stable_id
from ..adapter import internals
from ..autotune.candidates import backend_of, candidate_id
from ..autotune.ir_problem import dtype_name
from ..autotune.selection_notes import DECIDED, NotedSelection


def origins(snode: Any) -> set[Any]:
    """The FX nodes (``call_function``) a scheduler node was lowered from."""
    node = getattr(snode, "node", None)
    return {o for o in getattr(node, "origins", None) or ()
            if getattr(o, "op", None) == "call_function"}


def op_name(origin: Any) -> str:
    """An FX node's ATen op, short (``relu``, ``add``)."""
    text = getattr(origin.target, "__name__", None) or str(origin.target)
    parts = str(text).split(".")
    if len(parts) > 1 and parts[-1] in ("default", "Tensor", "Scalar", "self", "out"):
        parts = parts[:-1]
    return parts[-1]


def _is_pointwise(origin: Any) -> bool:
    target = getattr(origin, "target", None)
    return "pointwise" in {str(t).rsplit(".", 1)[-1] for t in getattr(target, "tags", ())}


def _gemm_nodes(snode: Any, own: set[Any]) -> set[Any]:
    """The GEMM's own FX node: the buffer's ``origin_node`` when Inductor set it, else the
    last (in graph order) of its origins that is not a pointwise op. Its origins also hold
    the ops its inputs were computed by (inlined into it): those come before it, and the
    walk over its users never reaches them."""
    origin_node = getattr(getattr(snode, "node", None), "origin_node", None)
    if origin_node in own:
        return {origin_node}
    order = _graph_order(own)
    kernels = [o for o in own if not _is_pointwise(o)]
    if kernels:
        return {max(kernels, key=lambda o: order.get(o, -1))}
    return {o for o in own if not any(a in own for a in o.all_input_nodes)}


def _call(snode: Any, method: str) -> bool:
    try:
        return bool(getattr(snode, method)())
    except Exception:
        return False


def _graph_order(origins: set[Any]) -> dict[Any, int]:
    order: dict[Any, int] = {}
    for graph in {getattr(o, "graph", None) for o in origins} - {None}:
        for index, node in enumerate(graph.nodes):
            if node in origins:
                order[node] = index
    return order


def epilogue_nodes(snode: Any, group: Sequence[Any],
                   consumers: Sequence[Any]) -> tuple[list[Any], set[Any], set[Any]]:
    """The FX nodes of a GEMM's epilogue, in graph order, those of them fused into its
    kernel, and the GEMM's own FX nodes (the buffer's ``origin_node``; failing that, the
    roots of its origins). The epilogue is every origin of the fused nodes and of the
    consumers that uses the GEMM's result, directly or through other epilogue nodes (a
    template's origins include its fused epilogue's ops: they count as fused)."""
    own = origins(snode)
    roots = _gemm_nodes(snode, own)
    fused_origins = own.union(*(origins(n) for n in group if n is not snode)) - roots
    # a template or extern kernel reading the GEMM's result (the next GEMM) is no epilogue
    pointwise = [n for n in consumers if not _call(n, "is_template") and not _call(n, "is_extern")]
    candidates = fused_origins.union(*(origins(n) for n in pointwise)) - roots
    found: set[Any] = set()
    frontier = list(roots)
    while frontier:
        for user in frontier.pop().users:
            if user in candidates and user not in found:
                found.add(user)
                frontier.append(user)
    order = _graph_order(found)
    ordered = sorted(found, key=lambda n: order.get(n, 0))
    return ordered, {n for n in found if n in fused_origins}, roots


def _tensor_pattern(value: Any) -> list[str]:
    """A tensor operand's broadcast pattern: per dimension "1" (broadcast) or "n"."""
    shape = getattr(value, "shape", None)
    return ["1" if str(d) == "1" else "n" for d in shape] if shape is not None else []


def _constant(value: Any) -> Any:
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return repr(value)  # exact, and JSON keeps inf/nan as text
    if isinstance(value, list | tuple):
        return [_constant(v) for v in value]
    return f"{type(value).__name__}:{value}"  # a dtype, a device, a layout, a memory format


def epilogue_steps(nodes: Sequence[Any], gemm: set[Any]) -> list[dict[str, Any]]:
    """The exact identity of an epilogue: each op in order with its operands (the GEMM's
    result, an earlier step, an outside tensor's dtype and broadcast pattern, or a
    constant) and its result's dtype."""
    index = {node: i for i, node in enumerate(nodes)}

    def operand(arg: Any) -> Any:
        if hasattr(arg, "op") and hasattr(arg, "meta"):  # an FX node
            if arg in index:
                return {"step": index[arg]}
            if arg in gemm:
                return {"gemm": True}
            val = arg.meta.get("val")
            return {"tensor": dtype_name(getattr(val, "dtype", "?")),
                    "broadcast": _tensor_pattern(val)} if hasattr(val, "shape") else \
                {"value": _constant(val)}
        if isinstance(arg, list | tuple):
            return [operand(a) for a in arg]
        return {"const": _constant(arg)}

    steps = []
    for node in nodes:
        val = node.meta.get("val")
        steps.append({"op": op_name(node), "args": [operand(a) for a in node.args],
                      "kwargs": {k: operand(v) for k, v in sorted(node.kwargs.items())},
                      "dtype": dtype_name(getattr(val, "dtype", "?"))})
    return steps


def _consumers(snode: Any, group: Sequence[Any]) -> list[Any]:
    inside = {id(n) for n in group}
    found = []
    for buf in getattr(snode, "get_outputs", lambda: [])():
        for user in getattr(buf, "users", ()):
            node = getattr(user, "node", None)
            if node is None or id(node) in inside or not hasattr(node, "get_nodes"):
                continue
            found.append(node)
    return found


def _is_multi_template(snode: Any) -> bool:
    return isinstance(getattr(snode, "node", None), internals.MultiTemplateBuffer)


def decide(note: NotedSelection, snode: Any, group: Sequence[Any]) -> EpilogueDecision:
    """The decision for one noted GEMM node inside its (possibly fused) scheduler node."""
    consumers = _consumers(snode, group)
    nodes, fused_set, gemm = epilogue_nodes(snode, group, consumers)
    fused_ops = [op_name(n) for n in nodes if n in fused_set]
    separate_ops = [op_name(n) for n in nodes if n not in fused_set]
    steps = epilogue_steps(nodes, gemm)
    epilogue = {"ops": [op_name(n) for n in nodes], "fused": fused_ops,
                "separate": separate_ops, "steps": steps}
    fused = bool(fused_ops)  # the epilogue's ops run in the GEMM kernel (not a bias)
    if note.chosen is not None or not _is_multi_template(snode):
        chosen = note.chosen
        gemm_ms = DECIDED.get(chosen) if chosen is not None else None
        kind = "template" if getattr(snode, "is_template", lambda: False)() else "extern"
        decided_by = (f"Inductor's GEMM-only selection ({kind}); the scheduler "
                      + ("fused the epilogue into it" if fused else
                         "left the epilogue to separate kernels" if separate_ops else
                         "found no epilogue"))
        return _decision(note, epilogue, chosen, chosen, fused=fused, gemm_ms=gemm_ms,
                         unfused_ms=gemm_ms, decided_by=decided_by)
    # Deferred: the scheduler benchmarked the best template fused with its epilogue
    # (its timings then replace the GEMM-only ones) or keeps the GEMM-only winner.
    multi = snode.node
    # Inductor's timings for the deferred choice; asking for them (when no fusion
    # benchmark did yet) autotunes now, as finalizing the buffer would right after, and
    # the feedback saver records them (DECIDED: the GEMM-only ones)
    timings = multi.choice_timings()
    gemm = DECIDED.pick(multi.choices)
    winner = min(gemm, key=gemm.__getitem__) if gemm else None
    final = winner
    fused_ms = None
    if fused:
        benchmarked = {c: t for c, t in timings.items() if gemm.get(c) != t}
        pool = benchmarked or timings
        final = min(pool, key=pool.__getitem__) if pool else winner
        fused_ms = pool.get(final) if benchmarked else None
    winner_ms = gemm.get(winner) if winner is not None else None
    decided_by = ("benchmark_epilogue_fusion: " + (
        "the fused template beat the GEMM-only winner plus a separate epilogue kernel"
        if fused else "the GEMM-only winner with a separate epilogue kernel"
        if separate_ops else "no epilogue; the GEMM-only winner"))
    return _decision(note, epilogue, final, winner, fused=fused,
                     gemm_ms=gemm.get(final) if final is not None else None,
                     fused_ms=fused_ms, unfused_ms=winner_ms, decided_by=decided_by)


def _decision(note: NotedSelection, epilogue: dict[str, Any], final: Any | None,
              winner: Any | None, **rest: Any) -> EpilogueDecision:
    """The decision naming ``final`` (the kernel the code runs) and ``winner`` (the
    GEMM-only one); None: not known, written as empty."""
    return EpilogueDecision(
        problem_id=note.problem.id, epilogue_id=stable_id({"steps": epilogue["steps"]}),
        epilogue=epilogue, candidate_id=candidate_id(final) if final is not None else "",
        backend=backend_of(final) if final is not None else "",
        name=str(getattr(final, "name", "")),
        gemm_winner_id=candidate_id(winner) if winner is not None else "", **rest)
