"""Entry point of ``inductor-flydsl`` and ``python -m inductor_flydsl``."""

from __future__ import annotations

import argparse
import logging
import sys

from ..settings import SettingError
from ..version import __version__
from . import (
    compile_check,
    db_commands,
    doctor_command,
    emulate_command,
    explain_command,
    output,
    predict_command,
    report_command,
    sweep_command,
)

COMMANDS = [db_commands, explain_command, compile_check, emulate_command, sweep_command,
            report_command, doctor_command, predict_command]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inductor-flydsl",
        description="FlyDSL GEMM choices and a tuning DB for TorchInductor max-autotune")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(name)s: %(message)s")
    module = next(m for m in COMMANDS if args.command in m.COMMAND_NAMES)
    try:
        return int(module.run(args) or 0)
    except SettingError as exc:  # a bad INDUCTOR_FLYDSL_* value: named, no traceback
        return output.fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
