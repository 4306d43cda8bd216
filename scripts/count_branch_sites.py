"""Count the places in inductor_flydsl/ that branch on an op or template name.

A *branch site* is an ``==``/``!=``/``in``/``not in`` comparison, or a dict literal key,
or a ``match`` case, whose string constant is a GEMM op name or a template name
(``OP_NAMES``, ``TEMPLATE_NAMES``), or a comparison with a constant that names one
(a name ending in ``_OP``, ``_OPS``, ``_TEMPLATE`` or ``TEMPLATES``, e.g.
``GROUPED_OP``). Usage: ``python scripts/count_branch_sites.py [--by-module]``; prints
the total and the number of modules.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "inductor_flydsl"
TEMPLATE_NAMES = {"gemm_dense", "gemm_grouped", "gemm_mx"}
OP_NAMES = {"mm", "addmm", "bmm", "linear", "grouped_mm", "scaled_mm", "scaled_mm_bias",
            "gemm_epilogue", "scaled_grouped_mm"}
NAMES = TEMPLATE_NAMES | OP_NAMES


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _named_constant(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else ""
    return name.isupper() and name.endswith(("_OP", "_OPS", "_TEMPLATE", "TEMPLATE",
                                              "TEMPLATES"))


def sites(path: Path) -> int:
    count = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            sides = (node.left, *node.comparators)
            if any(_strings(side) & NAMES or _named_constant(side) for side in sides):
                count += 1
        elif isinstance(node, ast.Dict):
            if any(k is not None and _strings(k) & NAMES for k in node.keys):
                count += 1
        elif isinstance(node, ast.match_case) and _strings(
                getattr(node.pattern, "value", ast.Constant(None))) & NAMES:
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by-module", action="store_true")
    args = parser.parse_args()
    counts = Counter({str(p.relative_to(PACKAGE.parent)): sites(p)
                      for p in sorted(PACKAGE.rglob("*.py"))})
    counts = +counts
    if args.by_module:
        for name, n in counts.most_common():
            print(f"{n:4d}  {name}")
    print(f"{sum(counts.values())} branch sites on an op or template name in "
          f"{len(counts)} modules")


if __name__ == "__main__":
    main()
