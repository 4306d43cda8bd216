"""Printing helpers shared by the CLI commands: JSON or rich tables."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
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


def output_file_problem(path: Path | None) -> str | None:
    """Create the folder of an output file (every command that writes a file calls this
    first); why the file cannot be written there, or None."""
    if path is None:
        return None
    if path.is_dir():
        return "is a folder; give a file name"
    blocker = next((p for p in path.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        return f"{str(blocker)!r} is a file, not a folder"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create its folder {str(path.parent)!r}: {exc.strerror or exc}"
    if not os.access(path.parent, os.W_OK):
        return f"its folder {str(path.parent)!r} cannot be written"
    return None
