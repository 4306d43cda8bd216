"""``inductor-flydsl report``: a Markdown (and CSV, PNG) report of a tuning DB."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..db.open import UnusableDB
from ..settings import default_db_path, settings_from_env
from .db_commands import unusable_db_message
from .output import console, fail, output_file_problem, print_json

COMMAND_NAMES = ("report",)
# the [report] extra, installable as written (the package is not on PyPI yet); the same
# text as inductor_flydsl/report.py's
INSTALL_REPORT = ("pip install pandas matplotlib (or, in a checkout of inductor-flydsl: "
                  "pip install '.[report]')")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="winners, speedups, failures and coverage of a tuning DB (Markdown)")
    p.add_argument("--db", type=Path, default=None,
                   help=f"tuning DB (default: $INDUCTOR_FLYDSL_DB or {default_db_path()})")
    p.add_argument("--out", type=Path, default=None,
                   help="write the Markdown report here (default: print it)")
    p.add_argument("--csv", type=Path, default=None,
                   help="per-problem table as CSV (plus NAME.predicted.csv: the model's "
                        "predictions against FlyDSL times measured on MI300/MI350, if any)")
    p.add_argument("--plot", type=Path, default=None, help="speedup bar chart (PNG)")
    p.add_argument("--json", action="store_true", help="print summary numbers as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        from ..report import load_report, plot_speedup, render_markdown, write_csv
    except ImportError as exc:  # pandas/matplotlib are the [report] extra
        return fail(f"`inductor-flydsl report` needs pandas and matplotlib ({exc.name} is "
                    f"missing): {INSTALL_REPORT}")

    path = args.db or settings_from_env().db_path
    try:
        report = load_report(path)
    except UnusableDB as exc:
        return fail(unusable_db_message(Path(path), exc, given=args.db is not None))
    for option, target in (("--out", args.out), ("--csv", args.csv), ("--plot", args.plot)):
        problem = output_file_problem(target)
        if problem:
            return fail(f"{option} {str(target)!r}: {problem}")
    plot_ref = None
    if args.plot:
        try:
            plot_speedup(report, args.plot)
        except ImportError as exc:
            return fail(f"--plot needs matplotlib ({exc.name} is missing): "
                        f"{INSTALL_REPORT}")
        base = args.out.parent if args.out else Path.cwd()
        plot_ref = os.path.relpath(args.plot.resolve(), base.resolve())
    written = write_csv(report, args.csv) if args.csv else []
    text = render_markdown(report, plot_ref)
    if args.json:
        print_json(report.summary())
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
        if not args.json:
            console.print(f"wrote {args.out}" + "".join(f", {p}" for p in written)
                          + (f", {args.plot}" if args.plot else ""))
    elif not args.json:
        print(text)
    return 0
