"""A template's identity (its hash, in every record and cache key) covers every file its
code comes from, and templates load as modules of one package in both install modes."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.provenance import software

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"


def _siblings(name: str) -> set[str]:
    """The template files ``name`` imports with ``from . import x`` / ``from .x import``."""
    tree = ast.parse((TEMPLATES / f"{name}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [a.name for a in node.names])
    return found


def _closure(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(_siblings(current))
    return seen


@pytest.mark.parametrize("template", ["gemm_dense", "gemm_grouped", "gemm_mx"])
def test_the_hash_covers_every_file_the_template_imports(template: str) -> None:
    sources = software.template_sources(template)
    assert sources is not None and sources[0] == template
    assert len(set(sources)) == len(sources) and set(sources) == _closure(template)


def test_an_edit_to_shared_code_changes_every_hash_that_uses_it(tmp_path: Path,
                                                                 monkeypatch) -> None:
    copy = tmp_path / "templates"
    shutil.copytree(TEMPLATES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(software, "templates_dir", lambda: copy)
    names = ("gemm_dense", "gemm_grouped", "gemm_mx")
    before = {n: software.template_source_hash(n) for n in names}
    with open(copy / "fused_epilogue.py", "a", encoding="utf-8") as f:
        f.write("\n# edited\n")
    after_shared = {n: software.template_source_hash(n) for n in names}
    assert all(after_shared[n] != before[n] for n in names)
    with open(copy / "gemm_mx.py", "a", encoding="utf-8") as f:
        f.write("\n# edited\n")
    after_mx = {n: software.template_source_hash(n) for n in names}
    assert after_mx["gemm_mx"] != after_shared["gemm_mx"]
    assert {n: after_mx[n] for n in names[:2]} == {n: after_shared[n] for n in names[:2]}


def test_a_source_checkout_loads_templates_as_a_package(tmp_path: Path) -> None:
    """Without the installed ``inductor_flydsl_templates`` package (a bare checkout), the
    loader imports ``templates/`` as a package, so a template's sibling imports work."""
    code = (
        "import sys\n"
        "from inductor_flydsl import template_loader\n"
        "from inductor_flydsl.provenance import software\n"
        "template_loader._TEMPLATE_PACKAGES = ()\n"
        f"software.templates_dir = lambda: __import__('pathlib').Path({str(TEMPLATES)!r})\n"
        "mx = template_loader.load_template('gemm_mx')\n"
        "dense = template_loader.load_template('gemm_dense')\n"
        "assert mx.__name__ == '_inductor_flydsl_templates.gemm_mx', mx.__name__\n"
        "assert mx._dense is dense, (mx._dense, dense)\n"
        "assert mx.MxConfig.__mro__[1] is dense.TileConfig\n"
        "assert 'inductor_flydsl_templates' not in sys.modules\n"
        "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
