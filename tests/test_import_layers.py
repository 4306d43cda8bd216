"""The import contract: every module of ``inductor_flydsl`` imports only from its own layer
or below, and no set of modules imports each other in a cycle (lazy, function-level
imports count; imports under ``if TYPE_CHECKING:`` do not, they never run).

Layers, low to high. A unit is a subpackage or module; a module's layer is that of the
longest dotted prefix of its name (below ``inductor_flydsl``) in :data:`LAYERS`: the
``flydsl_backend`` and ``inductor`` packages are layered by their subpackages.

0. foundations: version, settings, dependencies (the required packages, by module),
   template_loader; problems (what a GEMM problem is and
   its key), provenance (device, software stack, validity; what a time means: its timing
   mode, graph or eager, and how far it can be trusted, its noise), telemetry (counters,
   stats)
1. numerics: references and tolerances of the kernels' checks
2. db: the tuning DB
3. emulator (runs ISA), isa (reads ISA: resources, main loop), priors (ranks DB records)
4. performance: the model that predicts and ranks configs from the compiled code; the
   backend hands it the configs, the problem's shape and its catalog variant
5. inductor.adapter: every Inductor name the plugin touches (internals), the patches, the
   plugin's state and the state it keeps on a choice, a user's own passes
6. inductor.timing: a choice timed the way
   the compiled graph runs it, an epilogue fusion timed the same way, finalists re-measured
7. inductor.autotune: candidates, selections, the DB lookup, recording and serving
8. inductor.vllm: vLLM's GEMM ops as Inductor GEMMs and choices
9. inductor.fusion: fused-epilogue selections and the scheduler's fusion decisions
10. inductor.hooks (installs all of the above into Inductor) and
    inductor.vllm.vllm_passes (joins vLLM's compile with fusion's pass)
11. flydsl_backend.specs.registry: the template registry (imports nothing of the backend:
    it loads the specs by module name); flydsl_backend.offer: FlyDSL eligibility (and the
    HIP runtime check), the config space and resources, the offering (ranked by the model)
12. flydsl_backend.specs: one spec per template (its eligibility, configs, model variant,
    emulator driver...); flydsl_backend.builds: builds (pool, server, FlyDSL's compile
    split), cross-compiles and the compile catalog
13. flydsl_backend.run: the ops and the kernel runner (launches); flydsl_backend.direct
14. flydsl_backend.autotune: the FlyDSL choices and choice provider handed to Inductor
15. the package root, plugin_choices, autoload, report (and vllm_op_report, its vLLM table)
16. sweep
17. cli, __main__
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "inductor_flydsl"
LAYERS: dict[str, int] = {
    **dict.fromkeys(("version", "settings", "dependencies", "template_loader", "problems",
                     "provenance", "telemetry"), 0),
    "numerics": 1, "db": 2, "emulator": 3, "isa": 3, "priors": 3, "performance": 4,
    "inductor": 5, "inductor.adapter": 5,
    "inductor.timing": 6,
    "inductor.autotune": 7, "inductor.vllm": 8, "inductor.fusion": 9,
    "inductor.hooks": 10, "inductor.vllm.vllm_passes": 10,
    "flydsl_backend": 11, "flydsl_backend.offer": 11, "flydsl_backend.specs.registry": 11,
    "flydsl_backend.specs": 12, "flydsl_backend.builds": 12,
    "flydsl_backend.run": 13, "flydsl_backend.direct": 13, "flydsl_backend.autotune": 14,
    "": 15, "plugin_choices": 15, "autoload": 15, "report": 15, "vllm_op_report": 15,
    "sweep": 16, "cli": 17, "__main__": 17,
}
# Packages layered by their parts: each module in one is in a part named in LAYERS
SPLIT = ("inductor", "flydsl_backend")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    """The layered unit of a module: the longest prefix of its name (below the package)
    that :data:`LAYERS` names ('' the root; the top-level subpackage or module when
    none is named)."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    return parts[0] if parts else ""


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _imports(path: Path) -> set[str]:
    """Every inductor_flydsl module ``path`` imports (the module, or the package plus the
    imported name when that name is a submodule)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("inductor_flydsl"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _exists(sub) else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("inductor_flydsl."))
    found.discard(module)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer() -> None:
    units = {_unit(m) for m in _graph()}
    assert units <= set(LAYERS), f"give these a layer: {sorted(units - set(LAYERS))}"
    # a module of a split package (not the package itself) is in a part of it
    loose = sorted(m for m in _graph() if _unit(m) in SPLIT and m != f"inductor_flydsl.{_unit(m)}")
    assert not loose, f"give these a layer within their package: {loose}"


def test_the_unit_is_the_longest_named_prefix() -> None:
    assert _unit("inductor_flydsl.inductor.fusion.epilogue_pass") == "inductor.fusion"
    assert _unit("inductor_flydsl.inductor.vllm.vllm_passes") == "inductor.vllm.vllm_passes"
    assert _unit("inductor_flydsl.inductor.vllm.vllm_ops") == "inductor.vllm"
    assert _unit("inductor_flydsl.provenance.noise") == "provenance"
    assert _unit("inductor_flydsl.inductor.timing.timing_parity") == "inductor.timing"
    assert _unit("inductor_flydsl.db.store") == "db"
    assert _unit("inductor_flydsl") == ""


def _back_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer than the importer's."""
    return sorted(
        f"{module} (layer {LAYERS[_unit(module)]}) imports {target} "
        f"(layer {LAYERS[_unit(target)]})"
        for module, targets in graph.items() for target in targets
        if LAYERS.get(_unit(target), 99) > LAYERS.get(_unit(module), -1))


def test_no_module_imports_from_a_higher_layer() -> None:
    back_arrows = _back_arrows(_graph())
    assert not back_arrows, "\n".join(back_arrows)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_a_back_arrow_and_a_cycle() -> None:
    """The checks above would fail on a violation (so a pass means something)."""
    fake = {"inductor_flydsl.db.store": {"inductor_flydsl.cli.output"},
            "inductor_flydsl.cli.output": {"inductor_flydsl.db.store"}}
    assert _cycles(fake) == [["inductor_flydsl.cli.output", "inductor_flydsl.db.store"]]
    assert _back_arrows(fake) == [
        "inductor_flydsl.db.store (layer 2) imports inductor_flydsl.cli.output (layer 17)"]


def test_the_model_sits_below_the_backend_and_isa_reading_below_both() -> None:
    """Issue 44's layering: the model imports nothing of the backend (the backend hands it
    what it ranks), and reading ISA imports neither; each such import is a back-arrow."""
    model = "inductor_flydsl.performance.ranking"
    backend = "inductor_flydsl.flydsl_backend.offer.offering"
    isa = "inductor_flydsl.isa.loop_analysis"
    assert _back_arrows({model: {backend}}) and _back_arrows({isa: {model}})
    assert _back_arrows({isa: {backend}})
    assert not _back_arrows({backend: {model, isa}, model: {isa}})


ADAPTER = "inductor_flydsl.inductor.adapter.internals"  # the one module that touches Inductor


def _torch_internal_imports(path: Path) -> list[str]:
    """``torch._inductor`` / ``torch._dynamo`` imports and attribute uses in ``path``."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Attribute):
            names = [ast.unparse(node)]
        found += [f"{path.name}:{node.lineno}: {n}" for n in names
                  if n.startswith(("torch._inductor", "torch._dynamo"))]
    return found


def test_only_the_adapter_touches_inductor_internals() -> None:
    """Every use of ``torch._inductor`` / ``torch._dynamo`` goes through
    ``inductor/adapter/internals.py``, whose names are checked per torch release
    (tests/core/test_inductor_internals.py)."""
    touches = [hit for path in sorted(PACKAGE.rglob("*.py"))
               if _module_name(path) != ADAPTER for hit in _torch_internal_imports(path)]
    assert not touches, "\n".join(touches)


def test_the_adapter_check_sees_a_direct_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import torch\nfrom torch._inductor import config\n"
                      "def f():\n    return torch._dynamo.reset()\n")
    assert [h.split(": ")[1] for h in _torch_internal_imports(module)] == [
        "torch._inductor", "torch._dynamo.reset", "torch._dynamo"]
