"""The tuning DB's boundary: only ``inductor_flydsl/db/`` touches SQLite.

No module outside ``db/`` imports ``sqlite3`` or ``sqlite_utils`` (lazy, function-level
imports count; ``if TYPE_CHECKING:`` ones too: name ``db.open.Database`` instead), and
none passes SQL text to ``.execute()``/``.query()``/``.executescript()`` or uses
sqlite-utils' table API: every read and write is a function of ``db/``. Read from the
source with ``ast``, so nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "inductor_flydsl"
DB = PACKAGE / "db"
SQLITE_MODULES = {"sqlite3", "sqlite_utils"}
SQL_TEXT = re.compile(r"^\s*(select|insert|update|delete|create|drop|alter|pragma|vacuum|"
                      r"begin|commit|with)\b", re.IGNORECASE)


def _outside_db() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if DB not in p.parents)


def _sqlite_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name.split(".")[0] in SQLITE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in SQLITE_MODULES:
                found.append((node.lineno, node.module))
    return found


def _string_start(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _string_start(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string_start(node.left)
    return None


def _sql_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"execute", "query", "executescript", "executemany"}
                and node.args):
            text = _string_start(node.args[0])
            if text is not None and SQL_TEXT.match(text):
                found.append((node.lineno, text.strip().splitlines()[0][:60]))
    return found


TABLE_API = {"table", "upsert_all", "insert_all", "rows_where", "create_table",
             "enable_wal", "columns_dict"}


def _table_api(tree: ast.AST) -> list[tuple[int, str]]:
    """sqlite-utils' table API (``db.table("winners").upsert_all(...)``)."""
    return [(node.lineno, node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in TABLE_API]


def _offences(check) -> list[str]:
    out = []
    for path in _outside_db():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out += [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
                for line, what in check(tree)]
    return out


def test_no_module_outside_db_imports_sqlite() -> None:
    assert _offences(_sqlite_imports) == []


def test_no_module_outside_db_runs_sql() -> None:
    assert _offences(_sql_calls) == []


def test_no_module_outside_db_uses_the_table_api() -> None:
    assert _offences(_table_api) == []


def test_the_checks_see_what_they_forbid() -> None:
    """The two checks find an import and a query written the ways the package wrote them
    before ``db/`` owned them (so an empty answer above means something)."""
    tree = ast.parse(
        "def f(path):\n"
        "    import sqlite3\n"
        "    from sqlite_utils import Database\n"
        "    con = sqlite3.connect(path)\n"
        "    con.execute(f\"SELECT * FROM {TABLE} WHERE a = ?\", (1,))\n"
        "    db.query(\"select count(*) from winners\")\n"
        "    db.execute('pragma wal_checkpoint(TRUNCATE)')\n"
        "    cursor.execute(sql)\n"
        "    db.table('compile_catalog').upsert_all(rows, pk=PK, alter=True)\n")
    assert [name for _, name in _sqlite_imports(tree)] == ["sqlite3", "sqlite_utils"]
    assert [line for line, _ in _sql_calls(tree)] == [5, 6, 7]
    assert sorted(name for _, name in _table_api(tree)) == ["table", "upsert_all"]
