"""``inductor-flydsl doctor``: what this machine offers the plugin, in the spirit of
``python -m torch.utils.collect_env``.

Exit 1 when something the user asked for cannot work: an ``INDUCTOR_FLYDSL*`` variable
with an invalid value or an unknown name, a DB that cannot be written in readwrite mode
(the default mode) or is unusable, FlyDSL requested (``FLYDSL`` in
``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS``) but unavailable, or a torch whose Inductor
internals changed (the plugin then stays off). Missing tools (lld, llvm-mca) and the
absence of a GPU are reported, not failures: a CPU machine is a supported setup.
"""

from __future__ import annotations

import argparse
import dataclasses

from .doctor_checks import Section, collect
from .output import console, print_json

COMMAND_NAMES = ("doctor",)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor", help="versions, tools, runtime, DB, settings and what a compile here "
                       "would offer (exit 1 if something asked for cannot work)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true")


def _problems(sections: list[Section]) -> list[str]:
    return [f.problem for s in sections for f in s.findings if f.problem]


def run(args: argparse.Namespace) -> int:
    sections = collect()
    problems = _problems(sections)
    if args.json:
        print_json({"sections": [dataclasses.asdict(s) for s in sections],
                    "problems": problems})
        return 1 if problems else 0
    for section in sections:
        console.print(f"[bold]{section.title}[/bold]")
        width = max(len(f.label) for f in section.findings)
        for finding in section.findings:
            mark = "  ! " if finding.problem else "    "
            console.print(f"{mark}{finding.label.ljust(width)}  {finding.value}", markup=False)
        console.print()
    if problems:
        console.print(f"{len(problems)} problem(s) (marked !):", markup=False)
        for problem in problems:
            console.print(f"  - {problem}", markup=False)
        return 1
    console.print("No problems: what is configured can work on this machine.")
    return 0
