"""The FlyDSL variants a compiled graph's code launches, read from that code, so a graph
loaded from Inductor's FX-graph cache has them built as one batch when it loads, before
its first call (:func:`start_loaded_builds`; without it each variant is built at its
first launch, one after another, inside the user's forward).

Inductor's generated code calls the plugin's ops with the candidate's config as text,
e.g. ``inductor_flydsl_direct.mm_out(buf0, buf1, config='{...}', alpha=1.0, out=buf2)``
(``direct.py``; code generated before issue 42's direct calls:
``torch.ops.inductor_flydsl.mm_out.default``);
a fused epilogue's text is the call's ``epilogue=``. The rest of the variant
(template, dtype, layout, op) is what the tensors say at launch; for a build before the
first call it must be in the text: a *self-describing* config carries it as a
``"variant"`` member, ``{"template": ..., "dtype": ..., "layout": ..., "op": ...}``
(:data:`VARIANT_KEY`), which the op ignores when it parses the config. The arch is the
device's the graph will run on, asked when it loads (a graph may be loaded on another
machine than the one that compiled it). A call whose config does not describe itself
(code generated before) is left to its first launch, as before.

Reading the code uses ``ast`` on the module's source text: literals only, nothing of it
is run or unpickled.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

NAMESPACE = "inductor_flydsl"  # torch.ops.<NAMESPACE>.<op>[.default]
DIRECT_ALIAS = "inductor_flydsl_direct"  # <DIRECT_ALIAS>.<op> (direct.ALIAS)
VARIANT_KEY = "variant"  # the self-describing config's member
VARIANT_FIELDS = ("template", "dtype", "layout", "op")


@dataclass(frozen=True)
class FlydslCall:
    """One call of a plugin op in generated code."""

    op: str  # the custom op (mm_out, addmm_out, gemm_epilogue_out, ...)
    config: str  # its config text
    epilogue: str = ""  # a fused epilogue's text; "" none


def _op_name(func: ast.expr) -> str | None:
    """``inductor_flydsl_direct.<op>`` or ``torch.ops.inductor_flydsl.<op>[.default]``
    -> ``<op>``."""
    parts: list[str] = []
    node = func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()  # e.g. inductor_flydsl_direct mm_out
    if len(parts) == 2 and parts[0] == DIRECT_ALIAS:
        return parts[1]
    if parts[-1] == "default":
        parts.pop()
    if len(parts) == 4 and parts[:3] == ["torch", "ops", NAMESPACE]:
        return parts[3]
    return None


def _text(node: ast.Call, name: str) -> str | None:
    for keyword in node.keywords:
        if keyword.arg == name and isinstance(keyword.value, ast.Constant) \
                and isinstance(keyword.value.value, str):
            return keyword.value.value
    return None


def _mentions_ops(source: str) -> bool:
    return f"{DIRECT_ALIAS}." in source or f"ops.{NAMESPACE}." in source


def flydsl_calls(source: str) -> list[FlydslCall]:
    """Every call of a plugin op with a literal config in ``source``, each once, in
    order; [] when the source does not parse."""
    if not _mentions_ops(source):
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: dict[FlydslCall, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (op := _op_name(node.func)) is not None:
            config = _text(node, "config")
            if config is not None:
                found[FlydslCall(op, config, _text(node, "epilogue") or "")] = None
    return list(found)


def job_for(call: FlydslCall, arch: str) -> Any | None:
    """The catalog ``Job`` that builds ``call``'s variant for ``arch``, keyed as its launch
    will key it; None when its config does not describe itself. Raises ValueError on a
    config or epilogue its template rejects."""
    from ...problems.epilogue_spec import EpilogueSpec
    from ...template_loader import load_template
    from ..builds.catalog import Job

    data = json.loads(call.config)
    variant = data.pop(VARIANT_KEY, None) if isinstance(data, dict) else None
    if not isinstance(variant, dict) or \
            not all(isinstance(variant.get(f), str) for f in VARIANT_FIELDS):
        return None
    template = load_template(variant["template"])
    config = template.GemmConfig.from_json(data)  # validated, in its launch's form
    epilogue = EpilogueSpec.from_json(call.epilogue).text() if call.epilogue else ""
    return Job(template=variant["template"], config=tuple(config.to_json().items()),
               arch=arch, dtype=variant["dtype"], layout=variant["layout"],
               op=variant["op"], epilogue=epilogue)


@dataclass
class LoadedBuilds:
    """What :func:`start_loaded_builds` did for one module."""

    calls: int  # distinct plugin-op calls in the code
    jobs: int  # variants resolved (built or building now)
    unresolved: int  # calls whose config does not describe itself: built at first launch
    errors: list[str]  # calls whose config or epilogue was refused
    builds: list[Any]  # the prebuild.Build of each job


def start_loaded_builds(sources: str | list[str], arch: str) -> LoadedBuilds:
    """Start, as one batch in the build pool, the builds of every variant ``sources`` (the
    generated code of compiled graphs) launch on a device of ``arch``; returns at once.
    Variants built or building in this process are not built again."""
    from ..builds import prebuild

    texts = [sources] if isinstance(sources, str) else sources
    calls = list(dict.fromkeys(call for text in texts for call in flydsl_calls(text)))
    jobs, unresolved, errors = [], 0, []
    for call in calls:
        try:
            job = job_for(call, arch)
        except (ValueError, TypeError, KeyError, ImportError) as exc:
            errors.append(f"{call.op}: {exc}")
            continue
        if job is None:
            unresolved += 1
        else:
            jobs.append(job)
    builds = prebuild.start_jobs(jobs) if jobs and prebuild.build_workers(len(jobs)) else []
    return LoadedBuilds(len(calls), len(jobs), unresolved, errors, builds)


class ModuleWatch:
    """Inductor's loaded modules (its code cache's list, appended to as graphs load), each
    looked at once: :meth:`start_builds` after every compile (a Dynamo compile-end
    callback: a graph loaded from the FX-graph cache is loaded by then, and not run
    yet)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def new_sources(self, modules: list[Any]) -> list[str]:
        """The source text of each module not seen before that calls a plugin op."""
        found = []
        for module in list(modules):
            path = getattr(module, "__file__", None)
            if not isinstance(path, str) or path in self._seen:
                continue
            self._seen.add(path)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            if _mentions_ops(text):
                found.append(text)
        return found

    def start_builds(self, modules: list[Any], arch: str) -> LoadedBuilds | None:
        """:func:`start_loaded_builds` for the new modules, as one batch (None when none
        calls a plugin op); never raises (a failure is logged, and the variants are then
        built at their first launch)."""
        import logging

        try:
            sources = self.new_sources(modules)
            return start_loaded_builds(sources, arch) if sources else None
        except Exception as exc:
            logging.getLogger("inductor_flydsl").warning(
                "inductor_flydsl: a loaded graph's FlyDSL builds were not started: %s", exc)
            return None


WATCH = ModuleWatch()  # this process's (provider.build_loaded_variants)
