"""Printing helpers shared by the CLI commands: JSON or rich tables."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

# soft_wrap: plain lines (paths, errors) are never broken; tables still fit the width.
console = Console(highlight=False, soft_wrap=True,
                  width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)  # progress and notes


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    console.print(table)


def fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"inductor-flydsl: error: {message}\n")
    return code
