"""Parse the GEMM arguments the CLI commands share (--shape, --dtype, --layout); every
error names the one argument that is wrong and lists what it accepts."""

from __future__ import annotations

from collections.abc import Iterable

# the forms of --shape each op takes: the accepted numbers of sizes and how to write them
SHAPE_FORMS: dict[str, tuple[tuple[int, ...], str]] = {
    "mm": ((3,), "MxNxK, e.g. 8x4096x4096"),
    "addmm": ((3,), "MxNxK, e.g. 8x4096x4096"),
    "bmm": ((3, 4), "BxMxNxK or MxNxK, e.g. 4x8x4096x4096"),
    "grouped_mm": ((4,), "GxTxNxK (G groups over T tokens, weights G x K x N), "
                         "e.g. 8x512x4096x4096"),
    "scaled_mm": ((3,), "MxNxK, e.g. 128x4096x4096"),
}
LAYOUTS = ("nn", "nt", "tn", "tt")


class BadArgument(ValueError):
    """One command-line argument is wrong; ``str(exc)`` names it, its value and what it
    accepts."""

    def __init__(self, option: str, value: str, expected: str) -> None:
        super().__init__(f"{option} {value!r}: {expected}")
        self.option = option


def parse_gemm_shape(op: str, text: str, option: str = "--shape") -> tuple[int, ...]:
    """The sizes of ``--shape`` for ``op``: as many positive whole numbers as the op takes."""
    counts, form = SHAPE_FORMS[op]
    parts = text.strip().lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise BadArgument(option, text, f"use {form} (positive whole numbers joined by "
                                        "'x')") from None
    if len(dims) not in counts:
        numbers = " or ".join(str(c) for c in counts)
        raise BadArgument(option, text, f"--op {op} takes {numbers} sizes, not {len(dims)}: "
                                        f"use {form}")
    if any(d <= 0 for d in dims):
        raise BadArgument(option, text, f"sizes must be positive: use {form}")
    return dims


def parse_choice(option: str, text: str, choices: dict[str, str] | Iterable[str]) -> str:
    """``text`` (case-insensitive) among ``choices``; a dict maps accepted spellings to the
    value returned."""
    mapping = dict(choices) if isinstance(choices, dict) else {c: c for c in choices}
    value = mapping.get(text.strip().lower())
    if value is None:
        raise BadArgument(option, text, f"use one of {', '.join(mapping)}")
    return value


def parse_layout(text: str, option: str = "--layout") -> str:
    return parse_choice(option, text, LAYOUTS)
