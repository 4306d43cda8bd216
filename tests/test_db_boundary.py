"""The tuning DB's boundary: only ``inductor_flydsl/db/`` touches SQLite, and only
``db/open.py`` connects to a file.

No module outside ``db/`` imports ``sqlite3`` or ``sqlite_utils`` (lazy, function-level
imports count; ``if TYPE_CHECKING:`` ones too: name ``db.open.Database`` instead), and
none passes SQL text to ``.execute()``/``.query()``/``.executescript()`` or uses
sqlite-utils' table API: every read and write is a function of ``db/``. Every connection,
in the package (``db/`` included) and in ``scripts/``, is made by ``db.open.open_db``
(its file checks, schema check, migration and busy timeout): no ``sqlite3.connect`` and
no ``sqlite_utils.Database(...)`` anywhere else. Read from the source with ``ast``, so
nothing is imported.
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


SCRIPTS = PACKAGE.parent / "scripts"
OPEN = DB / "open.py"  # the one module that connects


def _connections(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls that open a connection: ``sqlite3.connect(...)``, ``sqlite_utils.Database(...)``
    (also through ``from ... import connect/Database``, aliases, or ``db.open``'s
    ``Database`` name)."""
    modules: dict[str, str] = {}  # local name -> sqlite3 / sqlite_utils
    functions: dict[str, str] = {}  # local name -> what it opens
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in SQLITE_MODULES:
                    modules[alias.asname or root] = root
        elif isinstance(node, ast.ImportFrom) and node.module:
            source = node.module.split(".")[0] if node.level == 0 else ""
            for alias in node.names:
                local = alias.asname or alias.name
                if source == "sqlite3" and alias.name == "connect":
                    functions[local] = "sqlite3.connect"
                elif alias.name == "Database" and (
                        source == "sqlite_utils" or node.module.split(".")[-1] == "open"):
                    functions[local] = "sqlite_utils.Database"
                elif source == "sqlite_utils" and alias.name == "db":
                    modules[local] = "sqlite_utils"
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in functions:
            found.append((node.lineno, functions[func.id]))
        elif isinstance(func, ast.Attribute):
            base = func.value
            while isinstance(base, ast.Attribute):  # sqlite_utils.db.Database
                base = base.value
            module = modules.get(base.id) if isinstance(base, ast.Name) else None
            if (module, func.attr) in {("sqlite3", "connect"),
                                       ("sqlite_utils", "Database")}:
                found.append((node.lineno, f"{module}.{func.attr}"))
    return found


def test_every_connection_is_made_by_open_db() -> None:
    offences = []
    for path in sorted([*PACKAGE.rglob("*.py"), *SCRIPTS.rglob("*.py")]):
        if path == OPEN:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offences += [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
                     for line, what in _connections(tree)]
    assert offences == [], "connect through inductor_flydsl.db.open.open_db"


def test_the_connection_check_sees_every_way_of_connecting() -> None:
    tree = ast.parse(
        "import sqlite3, sqlite_utils\n"
        "import sqlite3 as lite\n"
        "from sqlite3 import connect as c\n"
        "from sqlite_utils import Database\n"
        "from .open import Database as D\n"
        "def f(path):\n"
        "    sqlite3.connect(path)\n"
        "    lite.connect(path)\n"
        "    c(path)\n"
        "    sqlite_utils.Database(path)\n"
        "    sqlite_utils.db.Database(path)\n"
        "    Database(path)\n"
        "    D(path)\n"
        "    open_db(path, writable=False)\n")
    assert [line for line, _ in _connections(tree)] == [7, 8, 9, 10, 11, 12, 13]


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
