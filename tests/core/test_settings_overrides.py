"""Environment writes go through one place (``settings.overridden`` for a block,
``settings.set_for_process`` for a write meant to last): the helper sets, unsets and puts
back, and no other module of the package writes ``os.environ`` (read from the source with
``ast``)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from inductor_flydsl import settings

PACKAGE = Path(__file__).resolve().parents[2] / "inductor_flydsl"
WRITERS = {"pop", "update", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"}


def _environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def _writes(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        if any(isinstance(t, ast.Subscript) and _environ(t.value) for t in targets):
            found.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                (node.func.attr in WRITERS and _environ(node.func.value))
                or (node.func.attr in {"putenv", "unsetenv"}
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "os")):
            found.append(node.lineno)
    return found


def test_only_settings_writes_the_environment() -> None:
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offences += [f"{path.relative_to(PACKAGE.parent)}:{line}" for line in _writes(tree)]
    assert offences == [], "write through settings.overridden / settings.set_for_process"


def test_the_check_sees_every_way_of_writing() -> None:
    tree = ast.parse("os.environ['A'] = '1'\n"
                     "del os.environ['A']\n"
                     "os.environ.pop('A', None)\n"
                     "os.environ.update({'A': '1'})\n"
                     "os.environ.setdefault('A', '1')\n"
                     "os.putenv('A', '1')\n"
                     "os.environ.get('A')\n"
                     "env = dict(os.environ); env['A'] = '1'\n")
    assert _writes(tree) == [1, 2, 3, 4, 5, 6]


def test_overridden_sets_unsets_and_puts_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDUCTOR_FLYDSL_TEST_KEPT", "before")
    monkeypatch.delenv("INDUCTOR_FLYDSL_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with settings.overridden({"INDUCTOR_FLYDSL_TEST_KEPT": None,
                                  "INDUCTOR_FLYDSL_TEST_NEW": "during"}):
            assert "INDUCTOR_FLYDSL_TEST_KEPT" not in os.environ
            assert os.environ["INDUCTOR_FLYDSL_TEST_NEW"] == "during"
            raise RuntimeError("the block fails")
    assert os.environ["INDUCTOR_FLYDSL_TEST_KEPT"] == "before"
    assert "INDUCTOR_FLYDSL_TEST_NEW" not in os.environ
    settings.set_for_process({"INDUCTOR_FLYDSL_TEST_NEW": "lasting",
                              "INDUCTOR_FLYDSL_TEST_KEPT": None})
    assert os.environ["INDUCTOR_FLYDSL_TEST_NEW"] == "lasting"
    assert "INDUCTOR_FLYDSL_TEST_KEPT" not in os.environ
    # (not monkeypatch.delenv: it would record "lasting" as the value to put back at
    # teardown, and leave it set for the worker's later tests)
    settings.set_for_process({"INDUCTOR_FLYDSL_TEST_NEW": None})
