"""Entry point of ``inductor-flydsl`` and ``python -m inductor_flydsl``.

The command modules are imported when ``main`` runs, not with this module: where a
package the plugin requires is missing (``pip install --no-deps``), their import fails,
and ``main`` names the package and the fix instead (``doctor_dependencies.py``).
``validate-rocm`` and ``vllm-serving`` take their own options (``inductor-flydsl
validate-rocm --help``): ``main`` hands them the rest of the command line.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from types import ModuleType

from ..dependencies import requirement_of
from ..settings import SettingError
from ..version import __version__

COMMAND_MODULES = ("db_commands", "explain_command", "compile_check", "emulate_command",
                   "sweep_command", "report_command", "doctor_command", "predict_command")
# commands with their own argument parser: name -> (module, help)
PASS_THROUGH = {
    "validate-rocm": ("rocm.validate", "numerics and speed of the FlyDSL kernels on an "
                                       "MI300/MI350 (ROCm 7); exit 2 elsewhere"),
    "vllm-serving": ("vllm_serving", "vLLM throughput and latency with and without the "
                                     "plugin on a ROCm GPU"),
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{__package__}.{name}")


def _commands() -> list[ModuleType]:
    return [_module(name) for name in COMMAND_MODULES]


def build_parser(commands: list[ModuleType] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inductor-flydsl",
        description="FlyDSL GEMM choices and a tuning DB for TorchInductor max-autotune")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _commands() if commands is None else commands:
        module.add_parser(sub)
    for name, (_, text) in PASS_THROUGH.items():  # listed; main() runs them
        sub.add_parser(name, help=text, add_help=False)
    return parser


def _pass_through(argv: list[str]) -> int | None:
    """``validate-rocm ...`` / ``vllm-serving ...`` (after any ``-v``): that command's
    exit status; None for every other command line."""
    position = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if position is None or argv[position] not in PASS_THROUGH:
        return None
    if position and any(a not in ("-v", "--verbose") for a in argv[:position]):
        return None  # e.g. --version first: argparse says what it says
    module, _ = PASS_THROUGH[argv[position]]
    prog = f"inductor-flydsl {argv[position]}"
    return int(_module(module).main(argv[position + 1:], prog=prog) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        handed_on = _pass_through(argv)
        if handed_on is not None:
            return handed_on
        commands = _commands()
    except ImportError as exc:  # a required package is missing: named, with the fix
        if requirement_of(exc) is None:
            raise
        from .doctor_dependencies import run_without_dependencies

        return run_without_dependencies(argv, exc)
    parser = build_parser(commands)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(name)s: %(message)s")
    module = next(m for m in commands if args.command in m.COMMAND_NAMES)
    try:
        return int(module.run(args) or 0)
    except SettingError as exc:  # a bad INDUCTOR_FLYDSL_* value: named, no traceback
        from . import output

        return output.fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
